// AVX2 tile kernels (maddubs/madd integer dots). This file is also compiled a
// second time as the AVX-512 level: vec_dot_avx512.cpp includes it with
// SPECDEC_VEC_DOT_VNNI defined, which turns the integer dot primitives into
// 256-bit VNNI (vpdpbusd / vpdpwssd) and renames the exported table. One
// source keeps the two levels from drifting apart; CMake gives each file
// its own ISA flags, so nothing here leaks into the baseline build.
//
// Tiles walk weight rows in the outer loop and groups of up to 4 activation
// rows inside: each weight block is loaded and unpacked once per group and
// serves every activation row of it (register blocking).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/quant_blocks.h"
#include "kernels/quantize_act.h"
#include "kernels/vec_dot.h"

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "vec_dot_avx2.cpp must be compiled with -mavx2 -mfma -mf16c"
#endif

namespace specdec::kernels {

namespace {

// ---- primitives ------------------------------------------------------------

#if defined(SPECDEC_VEC_DOT_VNNI)
// acc += sum of 4 products u8*s8 per int32 lane (no int16 saturation).
inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(acc, u, s);
}
// acc += pairwise products of int16 lanes.
inline __m256i madd_acc(__m256i acc, __m256i a, __m256i b) {
    return _mm256_dpwssd_epi32(acc, a, b);
}
#else
// maddubs cannot saturate here: weights <= 128 (|int8|) or <= 63, activations
// in [-128, 127], so a pair is at most 2*128*127 < 32767.
inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s),
                                                   _mm256_set1_epi16(1)));
}
inline __m256i madd_acc(__m256i acc, __m256i a, __m256i b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}
#endif

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// (m0+m2) + (m1+m3), as ggml reduces its 4-lane min accumulator.
inline float hsum4(__m128 m) {
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// 16 packed nibbles -> 32 bytes: low nibbles are elements 0..15, high 16..31.
inline __m256i unpack_nibbles32(const uint8_t* qs) {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

// 32 bits -> 32 bytes, 0xFF where the bit is set (byte i <- bit i).
inline __m256i bits_to_bytes32(const uint8_t* p) {
    uint32_t x;
    std::memcpy(&x, p, 4);
    const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                            0x0202020202020202, 0x0303030303030303);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
    const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

inline __m256i load256(const void* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Software prefetch for the few-token K-quant kernels, which stream weight
// rows once and do little work per byte: the hardware streamer restarts at
// every 4 KiB page and runs only a few lines ahead, so on a machine where one
// core is close to its memory limit (Zen 3 VM: 1 token decodes at ~9.6 GB/s
// from L2 but ~5 GB/s from DRAM) latency shows. The rows of a matrix are
// contiguous, so the lines kPrefetchAhead bytes past the block being decoded
// belong to this row or the next. Prefetches never fault and change no result.
// Measured there (specdec_microbench, one core, matrices from DRAM, medians of
// 5 alternated runs): Q4_K 1 token 5.9-7.1 -> 8.5-9.7 GB/s, Q6_K 1 token
// 7.3 -> 8.7, 4 tokens 5.1 -> 7.0; 2048 bytes ahead beat 1024 and 4096.
constexpr size_t kPrefetchAhead = 2048;
template <size_t BlockBytes>
inline void prefetch_block_ahead(const void* block) {
    const char* p = static_cast<const char*>(block) + kPrefetchAhead;
#pragma GCC unroll 4
    for (size_t off = 0; off < BlockBytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}

// ---- legacy 32-element blocks ------------------------------------------------
//
// The activation rows carry float block scales and (for Q8_0) -offset*sum(q)
// after their blocks (see add_act_row_extras), so a block costs each
// activation row only: one integer dot, one scale multiply, one fmadd.

// Per-token pointers into one activation row.
struct ActRow {
    const int8_t* qs;  // block b's quants at qs + b * block_bytes
    const float* d;    // (nb) block scales
    const void* e;     // (nb, 8) int32 lane bias terms (Q8_0) or (nb) float s (Q8_1)
};

template <class ActBlock>
inline ActRow act_row(const uint8_t* row, TensorType wt, int64_t n_in) {
    // This runs per (weight row, token group), and the layout depends only on
    // (wt, n_in): memoised per thread, not recomputed out of line each time
    // (4 % of a Gemma 3 prefill went to act_extras_layout).
    struct Memo {
        TensorType t = TensorType::F32;
        int64_t n = -1;
        ActExtrasLayout l;
    };
    thread_local Memo m;
    if (m.n != n_in || m.t != wt) m = {wt, n_in, act_extras_layout(wt, n_in)};
    const ActExtrasLayout& l = m.l;
    return {reinterpret_cast<const ActBlock*>(row)->qs,
            reinterpret_cast<const float*>(row + l.d_offset), row + l.e_offset};
}

// Decoders return the 32 weights of a block as bytes. Unsigned ones are the
// true value plus kOffset (the activation row's bias term undoes it); a
// signed decoder (AVX2 Q8_0: 255*127*2 would saturate maddubs) uses
// |w| * sign(a, w) instead.
struct DecQ4_0 {
    using Block = BlockQ4_0;
    using ActBlock = BlockQ8_0;  // the activation rows it is dotted with
    static constexpr TensorType kType = TensorType::Q4_0;
    static constexpr bool kSigned = false;
    static __m256i decode(const Block& b) { return unpack_nibbles32(b.qs); }
};
struct DecQ5_0 {
    using Block = BlockQ5_0;
    using ActBlock = BlockQ8_0;  // the activation rows it is dotted with
    static constexpr TensorType kType = TensorType::Q5_0;
    static constexpr bool kSigned = false;
    static __m256i decode(const Block& b) {
        const __m256i hi = _mm256_and_si256(bits_to_bytes32(b.qh), _mm256_set1_epi8(0x10));
        return _mm256_or_si256(unpack_nibbles32(b.qs), hi);
    }
};
struct DecQ8_0 {
    using Block = BlockQ8_0;
    using ActBlock = BlockQ8_0;  // the activation rows it is dotted with
    static constexpr TensorType kType = TensorType::Q8_0;
#if defined(SPECDEC_VEC_DOT_VNNI)
    static constexpr bool kSigned = false;  // vpdpbusd sums in int32: no saturation
    static __m256i decode(const Block& b) {
        return _mm256_xor_si256(load256(b.qs), _mm256_set1_epi8((char)0x80));  // w + 128
    }
#else
    static constexpr bool kSigned = true;
    static __m256i decode(const Block& b) { return load256(b.qs); }
#endif
};

template <class Dec, int NT>
void dot_q8_0_family(int64_t n_in, const uint8_t* w, const uint8_t* a, size_t a_stride,
                     float* out) {
    const auto* x = reinterpret_cast<const typename Dec::Block*>(w);
    ActRow ys[NT];
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) {
        ys[t] = act_row<BlockQ8_0>(a + (size_t)t * a_stride, Dec::kType, n_in);
        acc[t] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < n_in / QK; ++b) {
        if constexpr (NT <= 4) prefetch_block_ahead<sizeof(typename Dec::Block)>(&x[b]);
        const __m256i q = Dec::decode(x[b]);
        const __m256 dx = _mm256_set1_ps(h2f(x[b].d));
        for (int t = 0; t < NT; ++t) {
            const __m256i yq = load256(ys[t].qs + b * (int64_t)sizeof(BlockQ8_0));
            __m256i p;
            if constexpr (Dec::kSigned) {
                p = dot_u8s8(_mm256_setzero_si256(), _mm256_sign_epi8(q, q),
                             _mm256_sign_epi8(yq, q));
            } else {
                // Start from each lane's bias: sum((w+off)*a) - off*sum(a) per
                // 4 bytes, which is ggml's lane integer sum((w)*a) exactly.
                const __m256i e = load256(static_cast<const int32_t*>(ys[t].e) + 8 * b);
                p = dot_u8s8(e, q, yq);
            }
            const __m256 d = _mm256_mul_ps(dx, _mm256_broadcast_ss(ys[t].d + b));
            acc[t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc[t]);
        }
    }
    for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]);
}

// Unsigned weights with a min (Q4_1, Q5_1) against Q8_1: d*sum(q*a) + m*s.
struct DecQ4_1 {
    using Block = BlockQ4_1;
    using ActBlock = BlockQ8_1;  // the activation rows it is dotted with
    static constexpr TensorType kType = TensorType::Q4_1;
    static __m256i decode(const Block& b) { return unpack_nibbles32(b.qs); }
};
struct DecQ5_1 {
    using Block = BlockQ5_1;
    using ActBlock = BlockQ8_1;  // the activation rows it is dotted with
    static constexpr TensorType kType = TensorType::Q5_1;
    static __m256i decode(const Block& b) {
        const __m256i hi = _mm256_and_si256(bits_to_bytes32(b.qh), _mm256_set1_epi8(0x10));
        return _mm256_or_si256(unpack_nibbles32(b.qs), hi);
    }
};

template <class Dec, int NT>
void dot_q8_1_family(int64_t n_in, const uint8_t* w, const uint8_t* a, size_t a_stride,
                     float* out) {
    const auto* x = reinterpret_cast<const typename Dec::Block*>(w);
    ActRow ys[NT];
    __m256 acc[NT];
    float summ[NT];
    for (int t = 0; t < NT; ++t) {
        ys[t] = act_row<BlockQ8_1>(a + (size_t)t * a_stride, Dec::kType, n_in);
        acc[t] = _mm256_setzero_ps();
        summ[t] = 0.0f;
    }
    for (int64_t b = 0; b < n_in / QK; ++b) {
        if constexpr (NT <= 4) prefetch_block_ahead<sizeof(typename Dec::Block)>(&x[b]);
        const __m256i q = Dec::decode(x[b]);
        const __m256 dx = _mm256_set1_ps(h2f(x[b].d));
        const float mx = h2f(x[b].m);
        for (int t = 0; t < NT; ++t) {
            const __m256i yq = load256(ys[t].qs + b * (int64_t)sizeof(BlockQ8_1));
            const __m256i p = dot_u8s8(_mm256_setzero_si256(), q, yq);
            const __m256 d = _mm256_mul_ps(dx, _mm256_broadcast_ss(ys[t].d + b));
            acc[t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc[t]);
            summ[t] = std::fma(mx, static_cast<const float*>(ys[t].e)[b], summ[t]);  // as ggml (contracted)
        }
    }
    for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]) + summ[t];
}

// One token against kOneTokenRows weight rows at once, for the 32-element
// families. A 1-row call walks its row's blocks through two loop-carried
// float chains (acc's fmadd and summ's fma, 4 cycles each) with ~16 uops a
// block between them, and pays its set-up and horizontal sum per row: on a
// 576-wide row that is 18 blocks, so the latency and the per-row overhead,
// not memory, set the pace (SmolLM2 135M decoded at 14.5 ms a token, 2/3 of
// it in the Q4_1 1-row kernel). Here the rows' chains are independent and
// interleave, and each activation block is loaded once for all of them.
// Every row runs the 1-row kernel's operations in its order: the same bits.
constexpr int kOneTokenRows = 8;

// Software prefetch of the next kOneTokenRows rows while these run: they are
// the bytes [w + n w_stride, w + 2 n w_stride) (rows are contiguous), and
// block step b prefetches the b-th n * BlockBytes of them, so the prefetch
// runs a group ahead of the walk. Without it the 1-token walk waited on
// memory on a Zen 4 VM, whose hardware streamer alone left 4 tokens through
// the 2-row tiles (which prefetch) faster than 1 token through these:
// specdec_microbench 576x1536 Q4_1, 1 thread, 88 us at 4 tokens, 78 at 1.
// Prefetches never fault, so running past the last row is harmless.
template <size_t BlockBytes>
inline void prefetch_next_rows(const uint8_t* w, size_t w_stride, int64_t b) {
    const uint8_t* p = w + kOneTokenRows * w_stride + (size_t)b * kOneTokenRows * BlockBytes;
#pragma GCC unroll 8
    for (size_t off = 0; off < kOneTokenRows * BlockBytes; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
}

// Q4_0 / Q5_0 / Q8_0 against Q8_0, or Q4_1 / Q5_1 against Q8_1 (the min
// term m * s per block, as dot_q8_1_family): the decoder's ActBlock says which.
template <class Dec>
void dot_one_token_rows(int64_t n_in, const uint8_t* w, size_t w_stride, const uint8_t* a, float* out) {
    using ActBlock = typename Dec::ActBlock;
    constexpr bool kMin = std::is_same_v<ActBlock, BlockQ8_1>;
    constexpr int NW = kOneTokenRows;
    const typename Dec::Block* x[NW];
    __m256 acc[NW];
    float summ[NW];
    for (int r = 0; r < NW; ++r) {
        x[r] = reinterpret_cast<const typename Dec::Block*>(w + (size_t)r * w_stride);
        acc[r] = _mm256_setzero_ps();
        summ[r] = 0.0f;
    }
    const ActRow y = act_row<ActBlock>(a, Dec::kType, n_in);
    for (int64_t b = 0; b < n_in / QK; ++b) {
        prefetch_next_rows<sizeof(typename Dec::Block)>(w, w_stride, b);
        const __m256i yq = load256(y.qs + b * (int64_t)sizeof(ActBlock));
        const __m256 yd = _mm256_broadcast_ss(y.d + b);
#pragma GCC unroll 8
        for (int r = 0; r < NW; ++r) {
            const __m256i q = Dec::decode(x[r][b]);
            const __m256 dx = _mm256_set1_ps(h2f(x[r][b].d));
            __m256i p;
            if constexpr (kMin) {
                p = dot_u8s8(_mm256_setzero_si256(), q, yq);
                summ[r] = std::fma(h2f(x[r][b].m), static_cast<const float*>(y.e)[b], summ[r]);  // as ggml
            } else if constexpr (Dec::kSigned) {
                p = dot_u8s8(_mm256_setzero_si256(), _mm256_sign_epi8(q, q), _mm256_sign_epi8(yq, q));
            } else {
                p = dot_u8s8(load256(static_cast<const int32_t*>(y.e) + 8 * b), q, yq);
            }
            acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dx, yd), _mm256_cvtepi32_ps(p), acc[r]);
        }
    }
    for (int r = 0; r < NW; ++r) out[r] = kMin ? hsum(acc[r]) + summ[r] : hsum(acc[r]);
}

// IQ4_NL and MXFP4 against Q8_0: nibbles through the type's 16-entry int8
// table (pshufb), signed dot as ggml's (|w| * sign(a, w): |w| <= 127 and
// |a| <= 127, no saturation), even and odd blocks in separate float lanes, an
// odd last block as one integer (see dot_nl4_q8_0 in vec_dot_scalar.cpp).
// (Local copies of the header's e8m0_to_fp32_half and iq4_xs_scale: an
// ISA-flagged copy of an external inline function could be the one the
// linker keeps for baseline code.)
inline float nl4_scale(const BlockIQ4_NL& b) { return h2f(b.d); }
inline float nl4_scale(const BlockMXFP4& b) {
    const uint32_t bits = b.e < 2 ? 0x00200000u << b.e : (uint32_t)(b.e - 1) << 23;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}
inline int16_t iq4_xs_scale16(const BlockIQ4_XS& b, int s) {
    return (int16_t)((((b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((b.scales_h >> (2 * s)) & 3) << 4)) - 32);
}

template <class Block, int NT>
void dot_nl4(int64_t n_in, const uint8_t* w, const uint8_t* a, size_t a_stride, float* out) {
    constexpr bool kMx = std::is_same_v<Block, BlockMXFP4>;
    const auto* x = reinterpret_cast<const Block*>(w);
    ActRow ys[NT];
    __m256 acc[2][NT];
    for (int t = 0; t < NT; ++t) {
        ys[t] = act_row<BlockQ8_0>(a + (size_t)t * a_stride, kMx ? TensorType::MXFP4 : TensorType::IQ4_NL, n_in);
        acc[0][t] = acc[1][t] = _mm256_setzero_ps();
    }
    const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMx ? kMxfp4Values : kIq4nlValues));
    const __m128i low4 = _mm_set1_epi8(0x0F);
    auto decode = [&](int64_t b) {
        const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].qs));
        return _mm256_set_m128i(_mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(t, 4), low4)),
                                _mm_shuffle_epi8(values, _mm_and_si128(t, low4)));
    };
    auto lanes = [&](__m256i q, int t, int64_t b) {
        const __m256i yq = load256(ys[t].qs + b * (int64_t)sizeof(BlockQ8_0));
        return dot_u8s8(_mm256_setzero_si256(), _mm256_sign_epi8(q, q), _mm256_sign_epi8(yq, q));
    };
    const int64_t nb = n_in / QK;
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
        for (int k = 0; k < 2; ++k) {
            const __m256i q = decode(b + k);
            const float dx = nl4_scale(x[b + k]);
            for (int t = 0; t < NT; ++t) {
                const __m256 d = _mm256_set1_ps(ys[t].d[b + k] * dx);
                acc[k][t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes(q, t, b + k)), acc[k][t]);
            }
        }
    }
    for (int t = 0; t < NT; ++t) out[t] = hsum(_mm256_add_ps(acc[0][t], acc[1][t]));
    if (b < nb) {
        const __m256i q = decode(b);
        const float dx = nl4_scale(x[b]);
        for (int t = 0; t < NT; ++t) {
            const __m256i l = lanes(q, t, b);
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(l), _mm256_extracti128_si256(l, 1));
            s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
            const int32_t s = _mm_cvtsi128_si32(s4) + _mm_extract_epi32(s4, 1);
            // Not fused, as ggml's build here: the empty asm hides the
            // product from GCC, which would contract the add into an fma.
            float p = (ys[t].d[b] * dx) * (float)s;
            __asm__("" : "+x"(p));
            out[t] = out[t] + p;
        }
    }
}

// ---- K-quants against Q8_K -------------------------------------------------------


// Unpacks the 8 six-bit scales (bytes 0..7) and mins (bytes 8..15) of a
// Q4_K/Q5_K super-block: the layout of get_scale_min_k4, four values to a
// 32-bit lane. With the 12 bytes as words d0, d1, d2:
//   scales 0..3 = d0 & 0x3f..,  scales 4..7 = (d2 & 0x0f..) | ((d0 >> 2) & 0x30..),
//   mins 0..3   = d1 & 0x3f..,  mins 4..7   = ((d2 >> 4) & 0x0f..) | ((d1 >> 2) & 0x30..).
// In vector lanes (8 instructions) rather than 32-bit scalar words: the
// 1-token K-quant kernels issue about a hundred instructions per super-block,
// and the scalar unpacking and its moves into a vector were a quarter of them.
// It reads 16 bytes from s: every caller's scales are followed by more of
// its block (qh, qs). (Not calling the header's inline get_scale_min_k4: an
// ISA-flagged copy of an external inline function could be the one the
// linker keeps for baseline code.)
inline __m128i k4_scales_mins(const uint8_t* s) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i d0_d2_d1_d2 = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0));
    const __m128i low = _mm_and_si128(_mm_srlv_epi32(d0_d2_d1_d2, _mm_set_epi32(4, 0, 0, 0)),
                                      _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    const __m128i d0_d0_d1_d1 = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0));
    const __m128i high = _mm_and_si128(_mm_srli_epi32(d0_d0_d1_d1, 2), _mm_set_epi32(0x30303030, 0, 0x30303030, 0));
    return _mm_or_si128(low, high);
}

// Shuffle mask that broadcasts int16 lane w of each 128-bit half.
inline __m256i word_bcast_mask(int w) { return _mm256_set1_epi16((short)((2 * w) | ((2 * w + 1) << 8))); }

// Chunk c (of 4) of a Q4_K/Q5_K block: lo = its 32 low-nibble weights
// (sub-block 2c), hi = its 32 high-nibble ones (sub-block 2c + 1); for Q5_K
// (HasHigh) with their 5th bits from qh (bit 2c of qh[l] for lo[l], 2c+1 for hi[l]).
template <bool HasHigh, class Block>
inline void q45_chunk(const Block& blk, __m256i qh, int c, __m256i& lo, __m256i& hi) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i q = load256(blk.qs + 32 * c);
    lo = _mm256_and_si256(q, low4);
    hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
    if constexpr (HasHigh) {
        const __m256i one = _mm256_set1_epi8(1);
        const __m256i hl = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one);
        const __m256i hh = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(hl, 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(hh, 4));
    }
}

// One token's float steps after a Q4_K/Q5_K super-block, as ggml takes them:
// the min term (mins against the 8 bsum pair sums bs8) into acc_m, the
// integer lanes times yd * dx into acc.
template <bool HasHigh>
inline void q45_accumulate(__m128i mins, __m128i bs8, float yd, float dx, float dmx, __m256i sumi, __m256& acc,
                           __m128& acc_m) {
    const __m128i pm = _mm_madd_epi16(mins, bs8);
    if constexpr (HasHigh) {
        // ggml's Q5_K: one integer per super-block, into a scalar sum
        // (kept in lane 0 of acc_m; hsum4 of (s, 0, 0, 0) is s).
        const __m128i h = _mm_add_epi32(pm, _mm_unpackhi_epi64(pm, pm));  // m0+m2, m1+m3
        const int32_t msum = _mm_cvtsi128_si32(h) + _mm_extract_epi32(h, 1);
        acc_m = _mm_set_ss(std::fma(-yd * dmx, (float)msum, _mm_cvtss_f32(acc_m)));
    } else {
        acc_m = _mm_fmadd_ps(_mm_set1_ps(-yd * dmx), _mm_cvtepi32_ps(pm), acc_m);
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(yd * dx), _mm256_cvtepi32_ps(sumi), acc);
}

// Q4_K (HasHigh=false) and Q5_K (HasHigh=true).
template <bool HasHigh, int NT>
void dot_q45_K(int64_t n_in, const uint8_t* w, const uint8_t* a, size_t a_stride, float* out) {
    using Block = std::conditional_t<HasHigh, BlockQ5_K, BlockQ4_K>;
    const auto* x = reinterpret_cast<const Block*>(w);
    const BlockQ8_K* ys[NT];
    __m256 acc[NT];
    __m128 acc_m[NT];
    for (int t = 0; t < NT; ++t) {
        ys[t] = reinterpret_cast<const BlockQ8_K*>(a + (size_t)t * a_stride);
        acc[t] = _mm256_setzero_ps();
        acc_m[t] = _mm_setzero_ps();
    }
    for (int64_t b = 0; b < n_in / QK_K; ++b) {
        if constexpr (NT <= 4) prefetch_block_ahead<sizeof(Block)>(&x[b]);
        const __m128i sm = k4_scales_mins(x[b].scales);  // 8 scales, 8 mins (u8)
        // mins as 8 int16, against the 8 sub-block sums of the bsums (4 lanes, as ggml)
        const __m128i mins = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm, sm));
        // scales as 8 int16, in both 128-bit halves
        const __m256i sc2 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        // Two chains per token, low and high nibbles: one chain of 8 dependent
        // madds per super-block was the 1-row kernel's critical path. Their
        // exact sum is the same integer.
        __m256i sumi[NT], sumj[NT];
        for (int t = 0; t < NT; ++t) sumi[t] = sumj[t] = _mm256_setzero_si256();
        __m256i qh;
        if constexpr (HasHigh) qh = load256(x[b].qh);
        for (int c = 0; c < 4; ++c) {
            __m256i lo, hi;
            q45_chunk<HasHigh>(x[b], qh, c, lo, hi);
            const __m256i s_lo = _mm256_shuffle_epi8(sc2, word_bcast_mask(2 * c));
            const __m256i s_hi = _mm256_shuffle_epi8(sc2, word_bcast_mask(2 * c + 1));
            for (int t = 0; t < NT; ++t) {
                const int8_t* yq = ys[t][b].qs + 64 * c;
                const __m256i p_lo = _mm256_maddubs_epi16(lo, load256(yq));
                const __m256i p_hi = _mm256_maddubs_epi16(hi, load256(yq + 32));
                sumi[t] = madd_acc(sumi[t], p_lo, s_lo);
                sumj[t] = madd_acc(sumj[t], p_hi, s_hi);
            }
        }
        const float dx = h2f(x[b].d), dmx = h2f(x[b].dmin);
        for (int t = 0; t < NT; ++t) {
            const __m256i bs = load256(ys[t][b].bsums);
            const __m128i bs8 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
            q45_accumulate<HasHigh>(mins, bs8, ys[t][b].d, dx, dmx, _mm256_add_epi32(sumi[t], sumj[t]), acc[t],
                                    acc_m[t]);
        }
    }
    for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]) + hsum4(acc_m[t]);
}

// 4 int16 shuffle indices selecting word w.
inline int64_t q6_mask(int w) {
    const int64_t v = (2 * w) | ((2 * w + 1) << 8);
    return v | (v << 16) | (v << 32) | (v << 48);
}

// The four 32-byte chunks of half `half` of a Q6_K block: chunk k holds
// elements 128 half + 32 k + i as q + 32, in [0, 63].
inline void q6_half(const BlockQ6_K& blk, int half, __m256i q[4]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i low2 = _mm256_set1_epi8(0x03);
    const uint8_t* ql = blk.ql + 64 * half;
    const __m256i l0 = load256(ql);
    const __m256i l1 = load256(ql + 32);
    const __m256i h = load256(blk.qh + 32 * half);
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_slli_epi16(_mm256_and_si256(h, low2), 4));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, low4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), low2), 4));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), low2), 4));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), low2), 4));
}

template <int NT>
void dot_q6_K(int64_t n_in, const uint8_t* w, const uint8_t* a, size_t a_stride, float* out) {
    const auto* x = reinterpret_cast<const BlockQ6_K*>(w);
    const BlockQ8_K* ys[NT];
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) {
        ys[t] = reinterpret_cast<const BlockQ8_K*>(a + (size_t)t * a_stride);
        acc[t] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < n_in / QK_K; ++b) {
        if constexpr (NT <= 4) prefetch_block_ahead<sizeof(BlockQ6_K)>(&x[b]);
        // scales as 16 int16, one per group of 16 (= per bsum)
        const __m256i sc16 = _mm256_cvtepi8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales)));
        __m256i sumi[NT];
        // Weights are stored as q+32 in [0, 63]; sum((q+32)*a) - 32*sum(a)
        // with sum(a) per group from bsums keeps the product u8*s8.
        for (int t = 0; t < NT; ++t) {
            const __m256i off = _mm256_madd_epi16(load256(ys[t][b].bsums), sc16);
            sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
        }
        // per half: both 128-bit lanes holding that half's 8 scales
        const __m256i sc_half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                                    _mm256_permute2x128_si256(sc16, sc16, 0x11)};
        for (int half = 0; half < 2; ++half) {
            __m256i q[4];
            q6_half(x[b], half, q);
            for (int k = 0; k < 4; ++k) {
                // 16 int16 lanes: the first 8 pairs are group 2k, the next 8 group 2k+1
                // low lane: scale 2k of this half, high lane: scale 2k+1
                const __m256i s = _mm256_shuffle_epi8(
                    sc_half[half], _mm256_setr_epi64x(q6_mask(2 * k),
                                                      q6_mask(2 * k), q6_mask(2 * k + 1),
                                                      q6_mask(2 * k + 1)));
                for (int t = 0; t < NT; ++t) {
                    const __m256i p =
                        _mm256_maddubs_epi16(q[k], load256(ys[t][b].qs + 128 * half + 32 * k));
                    sumi[t] = madd_acc(sumi[t], p, s);
                }
            }
        }
        const float dx = h2f(x[b].d);
        for (int t = 0; t < NT; ++t) {
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * ys[t][b].d), _mm256_cvtepi32_ps(sumi[t]),
                                     acc[t]);
        }
    }
    for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]);
}

// ---- paired K-quant kernels (Q4_K, Q5_K, Q6_K, two or more rows) -------------
//
// The kernels above spend two int16 multiplies (maddubs, then pmaddwd with the
// sub-block scale) on every 32 weights and activation row, and one multiply
// pipe (Zen 2: 1 per cycle) is what bounds them from a few rows on. Here the
// weights of two neighbouring 32-element chunks A and B (each with its own
// scale) are interleaved per int32 lane k: U holds A[4k], A[4k+1], B[4k],
// B[4k+1] and V the other two of each. The activation row carries the same
// interleave (the paired quants p of quantize_act.h, made once per row), so
// maddubs(U) + maddubs(V) (an int16 add, |sum| <= 4*63*127) leaves A's and B's
// 4-element sums side by side, and one pmaddwd with (scale A, scale B) adds
// both into lane k: 3 multiplies per 64 weights instead of 4. Lane k gets the
// same integers as in the kernels above (elements 4k..4k+3 of every chunk,
// times its scale), so the float steps and the result are bit-identical.

struct KActRow {
    const BlockQ8_K* y;  // blocks (d)
    const int8_t* p;     // paired quants, 256 per block
    const int16_t* e;    // per block: the 8 bsum pair sums (twice)
};

inline KActRow k_act_row(const uint8_t* row, TensorType wt, int64_t n_in) {
    struct Memo {
        TensorType t = TensorType::F32;
        int64_t n = -1;
        ActExtrasLayout l;
    };
    thread_local Memo m;
    if (m.n != n_in || m.t != wt) m = {wt, n_in, act_extras_layout(wt, n_in)};
    return {reinterpret_cast<const BlockQ8_K*>(row), reinterpret_cast<const int8_t*>(row + m.l.p_offset),
            reinterpret_cast<const int16_t*>(row + m.l.e_offset)};
}

// Bytes a (chunk A) and b (chunk B) -> U, V as described above.
inline void pair_chunks(__m256i a, __m256i b, __m256i& u, __m256i& v) {
    u = _mm256_blend_epi16(a, _mm256_slli_epi32(b, 16), 0xAA);
    v = _mm256_blend_epi16(_mm256_srli_epi32(a, 16), b, 0xAA);
}

// Shuffle mask giving every int32 lane of a 128-bit half the int16 words wa, wb of that half.
inline __m128i word_pair_mask(int wa, int wb) {
    return _mm_set1_epi32((2 * wa) | ((2 * wa + 1) << 8) | ((2 * wb) << 16) | ((2 * wb + 1) << 24));
}

// Q4_K (HasHigh=false) and Q5_K (HasHigh=true), paired: same result as dot_q45_K.
template <bool HasHigh, int NT>
void dot_q45_K_paired(int64_t n_in, const uint8_t* w, const uint8_t* a, size_t a_stride, float* out) {
    using Block = std::conditional_t<HasHigh, BlockQ5_K, BlockQ4_K>;
    constexpr TensorType kType = HasHigh ? TensorType::Q5_K : TensorType::Q4_K;
    const auto* x = reinterpret_cast<const Block*>(w);
    KActRow r[NT];
    __m256 acc[NT];
    __m128 acc_m[NT];
    for (int t = 0; t < NT; ++t) {
        r[t] = k_act_row(a + (size_t)t * a_stride, kType, n_in);
        acc[t] = _mm256_setzero_ps();
        acc_m[t] = _mm_setzero_ps();
    }
    for (int64_t b = 0; b < n_in / QK_K; ++b) {
        if constexpr (NT <= 4) prefetch_block_ahead<sizeof(Block)>(&x[b]);
        const __m128i sm = k4_scales_mins(x[b].scales);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm, sm));
        const __m256i sc2 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        __m256i sumi[NT];
        for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
        __m256i qh;
        if constexpr (HasHigh) qh = load256(x[b].qh);
        for (int c = 0; c < 4; ++c) {
            __m256i lo, hi;
            q45_chunk<HasHigh>(x[b], qh, c, lo, hi);
            __m256i u, v;
            pair_chunks(lo, hi, u, v);  // A = sub-block 2c, B = 2c + 1
            const __m256i s = _mm256_shuffle_epi8(sc2, _mm256_broadcastsi128_si256(word_pair_mask(2 * c, 2 * c + 1)));
            for (int t = 0; t < NT; ++t) {
                const int8_t* pq = r[t].p + QK_K * b + 64 * c;
                const __m256i pu = _mm256_maddubs_epi16(u, load256(pq));
                const __m256i pv = _mm256_maddubs_epi16(v, load256(pq + 32));
                sumi[t] = madd_acc(sumi[t], _mm256_add_epi16(pu, pv), s);
            }
        }
        const float dx = h2f(x[b].d), dmx = h2f(x[b].dmin);
        for (int t = 0; t < NT; ++t) {
            // the 8 bsum pair sums, as dot_q45_K's hadd makes them
            const __m128i bs8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[t].e + 16 * b));
            q45_accumulate<HasHigh>(mins, bs8, r[t].y[b].d, dx, dmx, sumi[t], acc[t], acc_m[t]);
        }
    }
    for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]) + hsum4(acc_m[t]);
}

// Q6_K, paired: same result as dot_q6_K. Its 32-element chunks k of a half
// pair as (0, 1) and (2, 3); each chunk has two 16-element scales, one per
// 128-bit half, so the scale pair differs between the halves.
template <int NT>
void dot_q6_K_paired(int64_t n_in, const uint8_t* w, const uint8_t* a, size_t a_stride, float* out) {
    const auto* x = reinterpret_cast<const BlockQ6_K*>(w);
    KActRow r[NT];
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) {
        r[t] = k_act_row(a + (size_t)t * a_stride, TensorType::Q6_K, n_in);
        acc[t] = _mm256_setzero_ps();
    }
    // pair p of a half: low 128 bits take scales (4p, 4p+2), high ones (4p+1, 4p+3)
    const __m256i pair_mask[2] = {_mm256_set_m128i(word_pair_mask(1, 3), word_pair_mask(0, 2)),
                                  _mm256_set_m128i(word_pair_mask(5, 7), word_pair_mask(4, 6))};
    for (int64_t b = 0; b < n_in / QK_K; ++b) {
        if constexpr (NT <= 4) prefetch_block_ahead<sizeof(BlockQ6_K)>(&x[b]);
        const __m256i sc16 = _mm256_cvtepi8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales)));
        __m256i sumi[NT];
        for (int t = 0; t < NT; ++t) {
            const __m256i off = _mm256_madd_epi16(load256(r[t].y[b].bsums), sc16);
            sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
        }
        for (int half = 0; half < 2; ++half) {
            const __m256i sch = half == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00)
                                          : _mm256_permute2x128_si256(sc16, sc16, 0x11);
            __m256i q[4];
            q6_half(x[b], half, q);
            for (int p = 0; p < 2; ++p) {
                __m256i u, v;
                pair_chunks(q[2 * p], q[2 * p + 1], u, v);
                const __m256i s = _mm256_shuffle_epi8(sch, pair_mask[p]);
                for (int t = 0; t < NT; ++t) {
                    const int8_t* pq = r[t].p + QK_K * b + 128 * half + 64 * p;
                    const __m256i pu = _mm256_maddubs_epi16(u, load256(pq));
                    const __m256i pv = _mm256_maddubs_epi16(v, load256(pq + 32));
                    sumi[t] = madd_acc(sumi[t], _mm256_add_epi16(pu, pv), s);
                }
            }
        }
        const float dx = h2f(x[b].d);
        for (int t = 0; t < NT; ++t) {
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * r[t].y[b].d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
        }
    }
    for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]);
}

// Q2_K (IsQ3=false) and Q3_K (IsQ3=true) against Q8_K. The int32 lanes are
// ggml's (see dot_q23_K in vec_dot_scalar.cpp): per chunk of 32, maddubs
// of the unsigned 2-bit weights, less (Q3_K) maddubs of 4 where the 3rd bit
// is clear, times the chunk's two scales (one per 128-bit half).
template <bool IsQ3, int NT>
void dot_q23_K(int64_t n_in, const uint8_t* w, const uint8_t* a, size_t a_stride, float* out) {
    using Block = std::conditional_t<IsQ3, BlockQ3_K, BlockQ2_K>;
    const auto* x = reinterpret_cast<const Block*>(w);
    const BlockQ8_K* ys[NT];
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) {
        ys[t] = reinterpret_cast<const BlockQ8_K*>(a + (size_t)t * a_stride);
        acc[t] = _mm256_setzero_ps();
    }
    const __m256i low2 = _mm256_set1_epi8(0x03);
    for (int64_t b = 0; b < n_in / QK_K; ++b) {
        if constexpr (NT <= 4) prefetch_block_ahead<sizeof(Block)>(&x[b]);
        __m256i sc16;  // 16 int16 scales, one per group of 16
        if constexpr (IsQ3) {
            // q3_K_scale four bytes at a time
            uint32_t u[4];
            std::memcpy(u, x[b].scales, 12);
            const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303, t2 = u[2];
            u[2] = ((u[0] >> 4) & m4) | (((t2 >> 4) & m2) << 4);
            u[3] = ((u[1] >> 4) & m4) | (((t2 >> 6) & m2) << 4);
            u[0] = (u[0] & m4) | ((t2 & m2) << 4);
            u[1] = (u[1] & m4) | (((t2 >> 2) & m2) << 4);
            const __m128i s8 = _mm_sub_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u)),
                                            _mm_set1_epi8(32));
            sc16 = _mm256_cvtepi8_epi16(s8);
        } else {
            const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales));
            sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(s8, _mm_set1_epi8(0x0F)));
            // min lanes first, into the same float lanes (as ggml)
            const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(0x0F)));
            const float dmx = h2f(x[b].dmin);
            for (int t = 0; t < NT; ++t) {
                const __m256i pm = _mm256_madd_epi16(mins, load256(ys[t][b].bsums));
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(-ys[t][b].d * dmx), _mm256_cvtepi32_ps(pm), acc[t]);
            }
        }
        __m256i sumi[NT];
        for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
        const __m256i sc_half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                                    _mm256_permute2x128_si256(sc16, sc16, 0x11)};
        __m256i hm;
        if constexpr (IsQ3) hm = load256(x[b].hmask);
        for (int h = 0; h < 2; ++h) {
            const __m256i qb = load256(x[b].qs + 32 * h);
            for (int k = 0; k < 4; ++k) {
                const __m256i q = _mm256_and_si256(_mm256_srli_epi16(qb, 2 * k), low2);
                __m256i q4;  // Q3_K: 4 where bit 4h+k of hmask is clear
                if constexpr (IsQ3) {
                    const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), _mm256_set1_epi8(1));
                    q4 = _mm256_slli_epi16(_mm256_xor_si256(bit, _mm256_set1_epi8(1)), 2);
                }
                const __m256i s = _mm256_shuffle_epi8(
                    sc_half[h], _mm256_setr_epi64x(q6_mask(2 * k), q6_mask(2 * k), q6_mask(2 * k + 1),
                                                   q6_mask(2 * k + 1)));
                for (int t = 0; t < NT; ++t) {
                    const __m256i yq = load256(ys[t][b].qs + 128 * h + 32 * k);
                    __m256i p = _mm256_maddubs_epi16(q, yq);
                    if constexpr (IsQ3) p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(q4, yq));
                    sumi[t] = madd_acc(sumi[t], p, s);
                }
            }
        }
        const float dx = h2f(x[b].d);
        for (int t = 0; t < NT; ++t) {
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(ys[t][b].d * dx), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
        }
    }
    for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]);
}

// IQ4_XS against Q8_K: each sub-block of 32 decoded through the IQ4_NL table
// as dot_nl4 does, its signed pair sums (maddubs of |w| and sign(a, w),
// at most 2*127*127: no saturation) times the sub-block's scale into int32
// lanes (madd), the 8 sub-blocks summed as integers, then one fmadd per
// super-block: ggml's lanes, see vec_dot_iq4_xs_q8_K.
template <int NT>
void dot_iq4_xs(int64_t n_in, const uint8_t* w, const uint8_t* a, size_t a_stride, float* out) {
    const auto* x = reinterpret_cast<const BlockIQ4_XS*>(w);
    const BlockQ8_K* ys[NT];
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) {
        ys[t] = reinterpret_cast<const BlockQ8_K*>(a + (size_t)t * a_stride);
        acc[t] = _mm256_setzero_ps();
    }
    const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
    const __m128i low4 = _mm_set1_epi8(0x0F);
    for (int64_t b = 0; b < n_in / QK_K; ++b) {
        if constexpr (NT <= 4) prefetch_block_ahead<sizeof(BlockIQ4_XS)>(&x[b]);
        __m256i sumi[NT];
        for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
        for (int s = 0; s < QK_K / 32; ++s) {
            const __m128i qb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].qs + 16 * s));
            const __m256i q = _mm256_set_m128i(_mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(qb, 4), low4)),
                                               _mm_shuffle_epi8(values, _mm_and_si128(qb, low4)));
            const __m256i aq = _mm256_sign_epi8(q, q);
            const __m256i ls = _mm256_set1_epi16(iq4_xs_scale16(x[b], s));
            for (int t = 0; t < NT; ++t) {
                const __m256i yq = load256(ys[t][b].qs + 32 * s);
                sumi[t] = madd_acc(sumi[t], _mm256_maddubs_epi16(aq, _mm256_sign_epi8(yq, q)), ls);
            }
        }
        const float dx = h2f(x[b].d);
        for (int t = 0; t < NT; ++t) {
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * ys[t][b].d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
        }
    }
    for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]);
}

// ---- float types ---------------------------------------------------------------

inline __m256 load8_f32(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
inline __m256 load8_f16(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load8_bf16(const uint8_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
inline float scalar_f32(const uint8_t* p, int64_t i) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
}
inline float scalar_f16(const uint8_t* p, int64_t i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return _cvtsh_ss(h);
}
inline float scalar_bf16(const uint8_t* p, int64_t i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    const uint32_t u = (uint32_t)h << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

template <int Bytes, __m256 (*Load)(const uint8_t*), float (*Scalar)(const uint8_t*, int64_t), int NT>
void dot_float(int64_t n_in, const uint8_t* w, const uint8_t* a, size_t a_stride, float* out) {
    __m256 acc[NT][2];
    for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    int64_t i = 0;
    // Two independent accumulators per row hide the fmadd latency.
    for (; i + 16 <= n_in; i += 16) {
        const __m256 w0 = Load(w + Bytes * i);
        const __m256 w1 = Load(w + Bytes * (i + 8));
        for (int t = 0; t < NT; ++t) {
            const uint8_t* at = a + (size_t)t * a_stride;
            acc[t][0] = _mm256_fmadd_ps(w0, Load(at + Bytes * i), acc[t][0]);
            acc[t][1] = _mm256_fmadd_ps(w1, Load(at + Bytes * (i + 8)), acc[t][1]);
        }
    }
    for (; i + 8 <= n_in; i += 8) {
        const __m256 w0 = Load(w + Bytes * i);
        for (int t = 0; t < NT; ++t) {
            acc[t][0] = _mm256_fmadd_ps(w0, Load(a + (size_t)t * a_stride + Bytes * i), acc[t][0]);
        }
    }
    for (int t = 0; t < NT; ++t) {
        float s = hsum(_mm256_add_ps(acc[t][0], acc[t][1]));
        for (int64_t j = i; j < n_in; ++j) s += Scalar(w, j) * Scalar(a + (size_t)t * a_stride, j);
        out[t] = s;
    }
}

// ---- AVX-512: two weight rows per 512-bit register --------------------------------
//
// ggml's lane structure is 8 int32 / float lanes per output (256 bits). On
// AVX-512 one zmm holds two outputs side by side: weight row r in the low
// half, row r+1 in the high half, and each activation chunk broadcast to both
// halves (a plain load). Every integer lane and every float operation of an
// output is the one its 256-bit kernel above does, in the same order, so the
// result of a (row, token) is bit-identical whatever rows or tokens share
// its tile. One 512-bit integer multiply does the work of two 256-bit ones
// (this CPU issues both widths on two ports), and each decoded weight block
// serves NT tokens.
#if defined(SPECDEC_VEC_DOT_VNNI)

// [lo | hi] from two 32-byte halves.
inline __m512i join256(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
inline __m512i bcast256(const void* p) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// 16 floats: fp16 h0 in lanes 0..7, h1 in lanes 8..15 (exact conversions).
inline __m512 two_halves_f16(uint16_t h0, uint16_t h1) {
    return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)h1), _mm_set1_epi16((short)h0)));
}
// The two 8-lane outputs of a zmm, each reduced exactly as hsum does.
inline float hsum_lo(__m512 v) { return hsum(_mm512_castps512_ps256(v)); }
inline float hsum_hi(__m512 v) {
    return hsum(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

// What a 2-row kernel call shares across its tokens: the activation extras
// layout and, for the Q8_1 family, each block's s of the call's tokens side
// by side (s_t[8 b + i] = s of token i in block b), gathered once per token
// group by tile2 so the min terms of 8 tokens take one vector fma per row.
struct Group2 : ActExtrasLayout {
    const float* s_t = nullptr;
};

// Software prefetch of the next row pair's weights while this pair runs.
// tile2 walks row pairs in order, so the next pair's two rows are the bytes
// [w1 + (w1 - w0), + 2 (w1 - w0)); super-block b of nb prefetches the b-th
// nb-th of them. With 16 tokens a pair takes ~100 cycles per super-block,
// long enough that the hardware streamer, which restarts at every 4 KiB page
// and only runs a few lines ahead of demand, leaves DRAM latency exposed (in-
// cache vs DRAM: ~1.3-1.5x at 16 tokens). Prefetches never fault, so running
// past the matrix's last row is harmless; they change no arithmetic.
template <size_t BlockBytes>
inline void prefetch_next_pair(const uint8_t* w0, const uint8_t* w1, int64_t b) {
    const uint8_t* p = w1 + (w1 - w0) + 2 * (size_t)b * BlockBytes;
#pragma GCC unroll 8
    for (size_t off = 0; off < 2 * BlockBytes; off += 64) _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
}
// Tokens per call from which the next pair's prefetch pays: fewer tokens
// make a pair's time too short for one pair's distance.
constexpr int kPrefetchMinTokens = 8;
// Below that, both rows' lines kPrefetchAhead bytes past super-block b, as
// the 1-row kernels do: the hardware streamer alone left the small-batch
// walk waiting on memory (2026-12-07 Intel VM, qwen 1.5B, every tile forced
// to the AVX-512 level, weights in huge pages, 2 threads: Q4_K's prefetch
// alone took a 1-row forward 57.9 -> 45.8 ms and a 4-row one 85.1 -> 69.6 ms).
template <size_t BlockBytes, int NT>
inline void prefetch_pair(const uint8_t* w0, const uint8_t* w1, int64_t b) {
    if constexpr (NT >= kPrefetchMinTokens) {
        prefetch_next_pair<BlockBytes>(w0, w1, b);
    } else {
        prefetch_block_ahead<BlockBytes>(w0 + (size_t)b * BlockBytes);
        prefetch_block_ahead<BlockBytes>(w1 + (size_t)b * BlockBytes);
    }
}

// The 32-element families' pair tiles below prefetch the next pair at every
// token count (their rows are short: a pair of 2048-wide Q8_0 rows is 4.3 KiB,
// and kPrefetchAhead bytes past row r reaches only into row r + 1 or r + 2,
// which leaves every other pair's start waiting on DRAM). Without any
// prefetch they were the slowest choice at 2 tokens: the kernel calibration
// (2048-wide, flushed, 1 thread, Zen 4 VM, ns per row and token) timed the
// 2-token bucket at 113 (Q4_1) and 107-123 (Q8_0) against 77 and 90 for one
// token; with it 58 and 48. 2 threads, fwd(2)/fwd(1): SmolLM2 135M 1.65-1.85
// -> 1.15-1.34, Gemma 3 270M 1.29-1.36 -> 1.09-1.11, qwen 0.5B 1.43-1.46 ->
// 1.14-1.30 (two runs each, alternating with the build before).
// Q4_0 / Q5_0 / Q8_0 against Q8_0: as dot_q8_0_family (unsigned decoders).
template <class Dec, int NT>
void zmm_q8_0_family(int64_t n_in, const uint8_t* w0, const uint8_t* w1, const uint8_t* a,
                     size_t a_stride, const ActExtrasLayout& l, float* out0, float* out1) {
    static_assert(!Dec::kSigned, "VNNI decoders are unsigned");
    const auto* x0 = reinterpret_cast<const typename Dec::Block*>(w0);
    const auto* x1 = reinterpret_cast<const typename Dec::Block*>(w1);
    // One base pointer per token and shared block offsets: 8 tokens x 3
    // arrays of pointers would not fit the 16 general registers.
    const uint8_t* row[NT];
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) {
        row[t] = a + (size_t)t * a_stride;
        acc[t] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < n_in / QK; ++b) {
        prefetch_next_pair<sizeof(typename Dec::Block)>(w0, w1, b);
        const __m512i q = join256(Dec::decode(x0[b]), Dec::decode(x1[b]));
        const __m512 dx = two_halves_f16(x0[b].d, x1[b].d);
        const size_t q_off = (size_t)b * sizeof(BlockQ8_0) + offsetof(BlockQ8_0, qs);
        const size_t d_off = l.d_offset + (size_t)b * sizeof(float);
        const size_t e_off = l.e_offset + (size_t)b * 8 * sizeof(int32_t);
        for (int t = 0; t < NT; ++t) {
            const __m512i p = _mm512_dpbusd_epi32(bcast256(row[t] + e_off), q, bcast256(row[t] + q_off));
            float yd;
            std::memcpy(&yd, row[t] + d_off, sizeof(float));
            const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(yd));
            acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc[t]);
        }
    }
    for (int t = 0; t < NT; ++t) {
        out0[t] = hsum_lo(acc[t]);
        out1[t] = hsum_hi(acc[t]);
    }
}

// One token against kOneTokenRows weight rows, two rows to a zmm (as
// dot_one_token_rows, with half the vector instructions per row: the
// activation block, its bias and scale are broadcast to both halves once).
// Each half runs the ymm kernel's lane operations: the same bits.
template <class Dec>
void zmm_one_token_rows(int64_t n_in, const uint8_t* w, size_t w_stride, const uint8_t* a, float* out) {
    using ActBlock = typename Dec::ActBlock;
    constexpr bool kMin = std::is_same_v<ActBlock, BlockQ8_1>;
    if constexpr (!kMin) static_assert(!Dec::kSigned, "VNNI decoders are unsigned");
    constexpr int NP = kOneTokenRows / 2;
    const typename Dec::Block* x[2 * NP];
    __m512 acc[NP];
    float summ[2 * NP];
    for (int r = 0; r < 2 * NP; ++r) {
        x[r] = reinterpret_cast<const typename Dec::Block*>(w + (size_t)r * w_stride);
        summ[r] = 0.0f;
    }
    for (int p = 0; p < NP; ++p) acc[p] = _mm512_setzero_ps();
    const ActRow y = act_row<ActBlock>(a, Dec::kType, n_in);
    for (int64_t b = 0; b < n_in / QK; ++b) {
        prefetch_next_rows<sizeof(typename Dec::Block)>(w, w_stride, b);
        const __m512i yq = bcast256(y.qs + b * (int64_t)sizeof(ActBlock));
        // Q8_0 family: each lane starts from its bias (see dot_q8_0_family)
        const __m512i e0 = kMin ? _mm512_setzero_si512() : bcast256(static_cast<const int32_t*>(y.e) + 8 * b);
        const __m512 yd = _mm512_set1_ps(y.d[b]);
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p) {
            const auto& b0 = x[2 * p][b];
            const auto& b1 = x[2 * p + 1][b];
            const __m512i q = join256(Dec::decode(b0), Dec::decode(b1));
            const __m512i pq = _mm512_dpbusd_epi32(e0, q, yq);
            acc[p] = _mm512_fmadd_ps(_mm512_mul_ps(two_halves_f16(b0.d, b1.d), yd), _mm512_cvtepi32_ps(pq), acc[p]);
            if constexpr (kMin) {
                const float s = static_cast<const float*>(y.e)[b];
                summ[2 * p] = std::fma(h2f(b0.m), s, summ[2 * p]);
                summ[2 * p + 1] = std::fma(h2f(b1.m), s, summ[2 * p + 1]);
            }
        }
    }
    for (int p = 0; p < NP; ++p) {
        out[2 * p] = kMin ? hsum_lo(acc[p]) + summ[2 * p] : hsum_lo(acc[p]);
        out[2 * p + 1] = kMin ? hsum_hi(acc[p]) + summ[2 * p + 1] : hsum_hi(acc[p]);
    }
}

// Q4_1 / Q5_1 against Q8_1: as dot_q8_1_family. The min term m * s is
// still one fma per (row, token, block) in block order, but with the tokens
// in the lanes of one vector per row (s_t from Group2).
template <class Dec, int NT>
void zmm_q8_1_family(int64_t n_in, const uint8_t* w0, const uint8_t* w1, const uint8_t* a,
                     size_t a_stride, const Group2& g, float* out0, float* out1) {
    static_assert(NT <= 8, "s_t holds 8 tokens per block");
    const auto* x0 = reinterpret_cast<const typename Dec::Block*>(w0);
    const auto* x1 = reinterpret_cast<const typename Dec::Block*>(w1);
    const uint8_t* row[NT];
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) {
        row[t] = a + (size_t)t * a_stride;
        acc[t] = _mm512_setzero_ps();
    }
    __m256 summ0 = _mm256_setzero_ps(), summ1 = _mm256_setzero_ps();  // lane t: token t
    for (int64_t b = 0; b < n_in / QK; ++b) {
        prefetch_next_pair<sizeof(typename Dec::Block)>(w0, w1, b);
        const __m512i q = join256(Dec::decode(x0[b]), Dec::decode(x1[b]));
        const __m512 dx = two_halves_f16(x0[b].d, x1[b].d);
        const __m256 sv = _mm256_loadu_ps(g.s_t + 8 * b);
        summ0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x0[b].m)), sv, summ0);
        summ1 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x1[b].m)), sv, summ1);
        const size_t q_off = (size_t)b * sizeof(BlockQ8_1) + offsetof(BlockQ8_1, qs);
        const size_t d_off = g.d_offset + (size_t)b * sizeof(float);
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) {
            const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, bcast256(row[t] + q_off));
            float yd;
            std::memcpy(&yd, row[t] + d_off, sizeof(float));
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, _mm512_set1_ps(yd)), _mm512_cvtepi32_ps(p), acc[t]);
        }
    }
    alignas(32) float m0[8], m1[8];
    _mm256_store_ps(m0, summ0);
    _mm256_store_ps(m1, summ1);
    for (int t = 0; t < NT; ++t) {
        out0[t] = hsum_lo(acc[t]) + m0[t];
        out1[t] = hsum_hi(acc[t]) + m1[t];
    }
}

// Q4_K against Q8_K: as dot_q45_K<false>. Loop order: a super-block's 8
// unpacked weight vectors (4 chunks x two 32-element halves, both rows) stay
// in registers while every token runs its whole super-block and its
// epilogue; the scale vectors go through a stack buffer and are read as
// memory operands of vpdpwssd. That leaves registers for the NT float
// accumulators without spills, and every shuffle mask is a constant. The
// integer lanes are exact sums, so visiting chunks token by token instead of
// chunk by chunk changes no bit.
//
// Plain (Paired = false): the low and high nibbles of chunk c (sub-blocks 2c
// and 2c + 1), 4 multiplies per 64 weights, row and token. Paired (see
// "paired K-quant kernels" above): each 32-byte half of a zmm pairs its row's
// sub-blocks 2c and 2c + 1 into U and V, and every token reads its paired
// quants p (made once per activation row): 3 multiplies instead of 4, the
// same integers per lane, so the same bits.
template <int NT, bool Paired>
void zmm_q4_K_tile(int64_t n_in, const uint8_t* w0, const uint8_t* w1, const uint8_t* a,
                   size_t a_stride, const ActExtrasLayout& l, float* out0, float* out1) {
    const auto* x0 = reinterpret_cast<const BlockQ4_K*>(w0);
    const auto* x1 = reinterpret_cast<const BlockQ4_K*>(w1);
    // Per token one base pointer; the extras (-d, pair sums, p) at shared offsets.
    const uint8_t* row[NT];
    __m512 acc[NT];
    __m256 acc_m[NT];  // 4 min lanes of row 0, then 4 of row 1
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
        row[t] = a + (size_t)t * a_stride;
        acc[t] = _mm512_setzero_ps();
        acc_m[t] = _mm256_setzero_ps();
    }
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    constexpr __mmask32 kOdd = 0xAAAAAAAAu;  // the odd int16 words
    // Plain: sub-block j's scale in every int16 lane of its row's half.
    // Paired: chunk c's (scale 2c, scale 2c + 1) in every int32 lane.
    alignas(64) __m512i s[Paired ? 4 : 8];
    for (int64_t b = 0; b < n_in / QK_K; ++b) {
        const __m128i sm0 = k4_scales_mins(x0[b].scales);
        const __m128i sm1 = k4_scales_mins(x1[b].scales);
        const __m256i mins = _mm256_set_m128i(_mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm1, sm1)),
                                              _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm0, sm0)));
        // 128-bit lanes: row 0's 8 scales twice, then row 1's twice
        const __m512i sc = join256(_mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm0)),
                                   _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm1)));
        if constexpr (Paired) {
#pragma GCC unroll 4
            for (int c = 0; c < 4; ++c)
                s[c] = _mm512_shuffle_epi8(sc, _mm512_broadcast_i32x4(word_pair_mask(2 * c, 2 * c + 1)));
        } else {
#pragma GCC unroll 8
            for (int j = 0; j < 8; ++j) s[j] = _mm512_shuffle_epi8(sc, _mm512_broadcast_i64x4(word_bcast_mask(j)));
        }
        __m512i wa[4], wb[4];  // plain: low and high nibbles; paired: U and V
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
            const __m512i q = join256(load256(x0[b].qs + 32 * c), load256(x1[b].qs + 32 * c));
            const __m512i lo = _mm512_and_si512(q, low4);                          // sub-block 2c
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);  // sub-block 2c + 1
            if constexpr (Paired) {
                wa[c] = _mm512_mask_blend_epi16(kOdd, lo, _mm512_slli_epi32(hi, 16));
                wb[c] = _mm512_mask_blend_epi16(kOdd, _mm512_srli_epi32(lo, 16), hi);
            } else {
                wa[c] = lo;
                wb[c] = hi;
            }
        }
        const __m512 dx = two_halves_f16(x0[b].d, x1[b].d);
        const __m256 dmx = _mm256_cvtph_ps(_mm_set_epi16((short)x1[b].dmin, (short)x1[b].dmin,
                                                         (short)x1[b].dmin, (short)x1[b].dmin,
                                                         (short)x0[b].dmin, (short)x0[b].dmin,
                                                         (short)x0[b].dmin, (short)x0[b].dmin));
        prefetch_pair<sizeof(BlockQ4_K), NT>(w0, w1, b);
        // the token's quants: Q8_K's qs (plain) or the paired quants p
        const size_t q_off = Paired ? l.p_offset + (size_t)b * QK_K
                                    : (size_t)b * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, qs);
        const size_t d_off = (size_t)b * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, d);
        const size_t nd_off = l.d_offset + (size_t)b * sizeof(float);
        const size_t e_off = l.e_offset + (size_t)b * 16 * sizeof(int16_t);
#pragma GCC unroll 16
        for (int t = 0; t < NT; ++t) {
            const uint8_t* yq = row[t] + q_off;
            // two independent chains halve the dependent vpdpwssd latency a
            // token waits on; their exact sum is the same integer
            __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int c = 0; c < 4; ++c) {
                const __m512i pa = _mm512_maddubs_epi16(wa[c], bcast256(yq + 64 * c));
                const __m512i pb = _mm512_maddubs_epi16(wb[c], bcast256(yq + 64 * c + 32));
                if constexpr (Paired) {  // chains: chunks 0, 2 and 1, 3
                    if (c % 2 == 0) s0 = _mm512_dpwssd_epi32(s0, _mm512_add_epi16(pa, pb), s[c]);
                    else s1 = _mm512_dpwssd_epi32(s1, _mm512_add_epi16(pa, pb), s[c]);
                } else {  // chains: low and high nibbles
                    s0 = _mm512_dpwssd_epi32(s0, pa, s[2 * c]);
                    s1 = _mm512_dpwssd_epi32(s1, pb, s[2 * c + 1]);
                }
            }
            const __m512i sumi = _mm512_add_epi32(s0, s1);
            float yd, neg_yd;
            std::memcpy(&yd, row[t] + d_off, sizeof(float));
            std::memcpy(&neg_yd, row[t] + nd_off, sizeof(float));
            const __m256i pm = _mm256_madd_epi16(mins, load256(row[t] + e_off));
            acc_m[t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(neg_yd), dmx), _mm256_cvtepi32_ps(pm),
                                       acc_m[t]);
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(yd), dx), _mm512_cvtepi32_ps(sumi),
                                     acc[t]);
        }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
        out0[t] = hsum_lo(acc[t]) + hsum4(_mm256_castps256_ps128(acc_m[t]));
        out1[t] = hsum_hi(acc[t]) + hsum4(_mm256_extractf128_ps(acc_m[t], 1));
    }
}

// Q6_K against Q8_K: as dot_q6_K, in the loop order of zmm_q4_K_tile (a
// super-block's 8 decoded weight vectors in registers, scale vectors on the
// stack). The -32 offset term 32 * sum(sc * bsums) starts each token's
// integer sum as one vpdpwssd of the bsums with the scales times -32 (int16:
// |sc * 32| <= 4096): the same exact integer as madd, shift and subtract.
// Chunk k of half h is elements 128 h + 32 k; each chunk has two 16-element
// scales, one per 128-bit half of its row's 256 bits.
//
// Plain: one vpdpwssd per chunk, 4 multiplies per 64 weights, row and token.
// Paired (see "paired K-quant kernels" above), as dot_q6_K_paired: chunks
// (0, 1) and (2, 3) of a half pair up, the low 128 bits of a row taking
// scales (4p, 4p + 2) of the half and the high ones (4p + 1, 4p + 3):
// 3 multiplies instead of 4, the same integers per lane, so the same bits.
template <int NT, bool Paired>
void zmm_q6_K_tile(int64_t n_in, const uint8_t* w0, const uint8_t* w1, const uint8_t* a,
                   size_t a_stride, const ActExtrasLayout& l, float* out0, float* out1) {
    const auto* x0 = reinterpret_cast<const BlockQ6_K*>(w0);
    const auto* x1 = reinterpret_cast<const BlockQ6_K*>(w1);
    const uint8_t* row[NT];
    __m512 acc[NT];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
        row[t] = a + (size_t)t * a_stride;
        acc[t] = _mm512_setzero_ps();
    }
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i low2 = _mm512_set1_epi8(0x03);
    constexpr __mmask32 kOdd = 0xAAAAAAAAu;  // the odd int16 words
    const __m512i pair_mask[2] = {
        _mm512_broadcast_i64x4(_mm256_set_m128i(word_pair_mask(1, 3), word_pair_mask(0, 2))),
        _mm512_broadcast_i64x4(_mm256_set_m128i(word_pair_mask(5, 7), word_pair_mask(4, 6)))};
    // plain: (half, chunk k) -> the chunk's scale vector; paired: (half, pair p)
    alignas(64) __m512i s[Paired ? 4 : 8];
    for (int64_t b = 0; b < n_in / QK_K; ++b) {
        // 16 int16 scales of row 0, then 16 of row 1
        const __m512i sc16 = join256(
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x0[b].scales))),
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x1[b].scales))));
        const __m512i sc_m32 = _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_slli_epi16(sc16, 5));
        // per half: each 256-bit half's two 128-bit lanes hold its row's 8 scales of that half
        const __m512i sc_half[2] = {_mm512_shuffle_i64x2(sc16, sc16, 0xA0),
                                    _mm512_shuffle_i64x2(sc16, sc16, 0xF5)};
        __m512i wa[Paired ? 4 : 8], wb[Paired ? 4 : 1];  // plain: the chunks; paired: U and V per (half, p)
#pragma GCC unroll 2
        for (int half = 0; half < 2; ++half) {
            const __m512i l0 = join256(load256(x0[b].ql + 64 * half), load256(x1[b].ql + 64 * half));
            const __m512i l1 =
                join256(load256(x0[b].ql + 64 * half + 32), load256(x1[b].ql + 64 * half + 32));
            const __m512i h = join256(load256(x0[b].qh + 32 * half), load256(x1[b].qh + 32 * half));
            __m512i q[4];
            q[0] = _mm512_or_si512(_mm512_and_si512(l0, low4), _mm512_slli_epi16(_mm512_and_si512(h, low2), 4));
            q[1] = _mm512_or_si512(_mm512_and_si512(l1, low4),
                                   _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2), low2), 4));
            q[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), low4),
                                   _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 4), low2), 4));
            q[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), low4),
                                   _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 6), low2), 4));
            if constexpr (Paired) {
#pragma GCC unroll 2
                for (int p = 0; p < 2; ++p) {
                    wa[2 * half + p] = _mm512_mask_blend_epi16(kOdd, q[2 * p], _mm512_slli_epi32(q[2 * p + 1], 16));
                    wb[2 * half + p] = _mm512_mask_blend_epi16(kOdd, _mm512_srli_epi32(q[2 * p], 16), q[2 * p + 1]);
                    s[2 * half + p] = _mm512_shuffle_epi8(sc_half[half], pair_mask[p]);
                }
            } else {
#pragma GCC unroll 4
                for (int k = 0; k < 4; ++k) {
                    wa[4 * half + k] = q[k];
                    s[4 * half + k] = _mm512_shuffle_epi8(
                        sc_half[half],
                        _mm512_broadcast_i64x4(_mm256_setr_epi64x(q6_mask(2 * k), q6_mask(2 * k),
                                                                  q6_mask(2 * k + 1), q6_mask(2 * k + 1))));
                }
            }
        }
        const __m512 dx = two_halves_f16(x0[b].d, x1[b].d);
        prefetch_pair<sizeof(BlockQ6_K), NT>(w0, w1, b);
        // the token's quants: Q8_K's qs (plain) or the paired quants p
        const size_t q_off = Paired ? l.p_offset + (size_t)b * QK_K
                                    : (size_t)b * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, qs);
        const size_t bs_off = (size_t)b * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, bsums);
        const size_t d_off = (size_t)b * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, d);
#pragma GCC unroll 16
        for (int t = 0; t < NT; ++t) {
            const uint8_t* yq = row[t] + q_off;
            // two chains (the halves), as in zmm_q4_K_tile
            __m512i s0 = _mm512_dpwssd_epi32(_mm512_setzero_si512(), bcast256(row[t] + bs_off), sc_m32);
            __m512i s1 = _mm512_setzero_si512();
            if constexpr (Paired) {
#pragma GCC unroll 2
                for (int p = 0; p < 2; ++p) {
                    const __m512i pu0 = _mm512_maddubs_epi16(wa[p], bcast256(yq + 64 * p));
                    const __m512i pv0 = _mm512_maddubs_epi16(wb[p], bcast256(yq + 64 * p + 32));
                    s0 = _mm512_dpwssd_epi32(s0, _mm512_add_epi16(pu0, pv0), s[p]);
                    const __m512i pu1 = _mm512_maddubs_epi16(wa[2 + p], bcast256(yq + 128 + 64 * p));
                    const __m512i pv1 = _mm512_maddubs_epi16(wb[2 + p], bcast256(yq + 128 + 64 * p + 32));
                    s1 = _mm512_dpwssd_epi32(s1, _mm512_add_epi16(pu1, pv1), s[2 + p]);
                }
            } else {
#pragma GCC unroll 4
                for (int k = 0; k < 4; ++k) {
                    s0 = _mm512_dpwssd_epi32(s0, _mm512_maddubs_epi16(wa[k], bcast256(yq + 32 * k)), s[k]);
                    s1 = _mm512_dpwssd_epi32(s1, _mm512_maddubs_epi16(wa[4 + k], bcast256(yq + 128 + 32 * k)),
                                             s[4 + k]);
                }
            }
            const __m512i sumi = _mm512_add_epi32(s0, s1);
            float yd;
            std::memcpy(&yd, row[t] + d_off, sizeof(float));
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, _mm512_set1_ps(yd)), _mm512_cvtepi32_ps(sumi), acc[t]);
        }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
        out0[t] = hsum_lo(acc[t]);
        out1[t] = hsum_hi(acc[t]);
    }
}

// Tokens per 2-row micro-kernel call. The K-quant kernels and the Q8_0
// family keep only the NT float accumulators (and the block's weight
// vectors) in registers, so they take 16 tokens per call: each weight block
// is decoded once per 16 tokens instead of 8 (Q5_0's decode, which expands
// its fifth bits, is most of the work per block: 2026-12-07 Intel VM, 2
// threads, prefill of 512 tokens, Gemma 3 270M 670 -> 762 tok/s, qwen 0.5B
// 260 -> 290). The Q8_1 family stays at 8: its s_t holds 8 tokens a block.
constexpr int kGroup2Max = 16;

template <template <int> class K2>
void run_group2(int64_t n_in, const uint8_t* w0, const uint8_t* w1, const uint8_t* at,
                size_t a_stride, const Group2& l, int64_t n, float* out0, float* out1) {
    if constexpr (K2<1>::kGroup >= 16) {
        if (n == 16) return K2<16>::run(n_in, w0, w1, at, a_stride, l, out0, out1);
    }
    if (n > 8) {  // 8, then the rest: the kernels between 9 and 15 would only add code
        K2<8>::run(n_in, w0, w1, at, a_stride, l, out0, out1);
        return run_group2<K2>(n_in, w0, w1, at + 8 * a_stride, a_stride, l, n - 8, out0 + 8, out1 + 8);
    }
    switch (n) {
        case 8: K2<8>::run(n_in, w0, w1, at, a_stride, l, out0, out1); break;
        case 7: K2<7>::run(n_in, w0, w1, at, a_stride, l, out0, out1); break;
        case 6: K2<6>::run(n_in, w0, w1, at, a_stride, l, out0, out1); break;
        case 5: K2<5>::run(n_in, w0, w1, at, a_stride, l, out0, out1); break;
        case 4: K2<4>::run(n_in, w0, w1, at, a_stride, l, out0, out1); break;
        case 3: K2<3>::run(n_in, w0, w1, at, a_stride, l, out0, out1); break;
        case 2: K2<2>::run(n_in, w0, w1, at, a_stride, l, out0, out1); break;
        default: K2<1>::run(n_in, w0, w1, at, a_stride, l, out0, out1); break;
    }
}

// As tile() below, over pairs of weight rows; an odd last row is paired with
// itself (its second result is dropped).
template <template <int> class K2>
void tile2(int64_t n_in, const uint8_t* w, size_t w_stride, int64_t nr, const uint8_t* a,
           size_t a_stride, int64_t nt, float* y, int64_t ldy) {
    constexpr size_t kBlockBytes = 24 << 10;
    constexpr int64_t kG = K2<1>::kGroup;
    Group2 l;
    static_cast<ActExtrasLayout&>(l) = act_extras_layout(K2<1>::kType, n_in);
    constexpr bool kNeedsS = K2<1>::kType == TensorType::Q4_1 || K2<1>::kType == TensorType::Q5_1;
    thread_local std::vector<float> s_t;  // (n_in / 32, 8), Q8_1 family only
    const int64_t rb = nt <= kG ? nr : std::max<int64_t>(2, (int64_t)(kBlockBytes / w_stride) & ~(int64_t)1);
    for (int64_t r0 = 0; r0 < nr; r0 += rb) {
        const int64_t r1 = std::min(nr, r0 + rb);
        for (int64_t t = 0; t < nt; t += kG) {
            const int64_t g = std::min<int64_t>(kG, nt - t);
            const uint8_t* at = a + (size_t)t * a_stride;
            if constexpr (kNeedsS) {
                const int64_t nb = n_in / QK;
                s_t.assign((size_t)(nb * 8), 0.0f);  // lanes past g: zeros, never read back
                for (int64_t i = 0; i < g; ++i) {
                    const auto* s = reinterpret_cast<const float*>(at + (size_t)i * a_stride + l.e_offset);
                    for (int64_t b = 0; b < nb; ++b) s_t[(size_t)(8 * b + i)] = s[b];
                }
                l.s_t = s_t.data();
            }
            for (int64_t r = r0; r < r1; r += 2) {
                const bool pair = r + 1 < r1;
                const uint8_t* w0 = w + (size_t)r * w_stride;
                float out0[kGroup2Max], out1[kGroup2Max];
                run_group2<K2>(n_in, w0, pair ? w0 + w_stride : w0, at, a_stride, l, g, out0, out1);
                for (int64_t i = 0; i < g; ++i) y[(t + i) * ldy + r] = out0[i];
                if (pair)
                    for (int64_t i = 0; i < g; ++i) y[(t + i) * ldy + r + 1] = out1[i];
            }
        }
    }
}

template <int NT> struct Z2Q4_0 {
    static constexpr int kGroup = 16;
    static constexpr TensorType kType = TensorType::Q4_0;
    static constexpr auto run = zmm_q8_0_family<DecQ4_0, NT>;
};
template <int NT> struct Z2Q5_0 {
    static constexpr int kGroup = 16;
    static constexpr TensorType kType = TensorType::Q5_0;
    static constexpr auto run = zmm_q8_0_family<DecQ5_0, NT>;
};
template <int NT> struct Z2Q8_0 {
    static constexpr int kGroup = 16;
    static constexpr TensorType kType = TensorType::Q8_0;
    static constexpr auto run = zmm_q8_0_family<DecQ8_0, NT>;
};
template <int NT> struct Z2Q4_1 {
    static constexpr int kGroup = 8;
    static constexpr TensorType kType = TensorType::Q4_1;
    static constexpr auto run = zmm_q8_1_family<DecQ4_1, NT>;
};
template <int NT> struct Z2Q5_1 {
    static constexpr int kGroup = 8;
    static constexpr TensorType kType = TensorType::Q5_1;
    static constexpr auto run = zmm_q8_1_family<DecQ5_1, NT>;
};
// The Q4_K tile: paired from 8 tokens up. Paired saves a multiply per 64
// weights and token but spends two blends and two shifts per 64 weights of
// each row pair; below 8 tokens that unpacking costs more than it saves.
// Microbenchmark, AVX-512 Xeon (model 167), qwen 1.5B shapes, paired / plain:
// 16 tokens 0.82-0.99, 64 tokens 0.84-0.97, 4 tokens 1.00-1.08. Both give the
// same integers and float steps, so mixing them keeps a row's bits
// independent of how many rows ran with it.
template <int NT> struct Z2Q4_K {
    static constexpr int kGroup = 16;
    static constexpr TensorType kType = TensorType::Q4_K;
    static constexpr auto run = zmm_q4_K_tile<NT, (NT >= 8)>;
};
template <int NT> struct Z2Q6_K {
    static constexpr int kGroup = 16;
    static constexpr TensorType kType = TensorType::Q6_K;
    // Paired from 8 tokens up, as Q4_K. Microbenchmark (same machine, qwen
    // 1.5B shapes with the 151936-row LM head), paired / plain: 16 and 64
    // tokens 0.82-0.96.
    static constexpr auto run = zmm_q6_K_tile<NT, (NT >= 8)>;
};

#endif  // SPECDEC_VEC_DOT_VNNI

// ---- tiles -----------------------------------------------------------------------

template <int NT>
using DotN = void (*)(int64_t, const uint8_t*, const uint8_t*, size_t, float*);

// Register blocking: each kernel call decodes a weight row once for a group
// of kGroup activation rows (8 with AVX-512's 32 vector registers, 4 with
// AVX2's 16). Cache blocking: rows go in blocks of about kRowBlockBytes of
// weights, and every token group walks the whole block before the next
// group starts, so a block's weights are re-read from L1/L2 per group while
// the activations of one group (not of all tokens) stay in L1. Neither
// changes the order of any (row, token) sum, so results stay bit-identical.
#if defined(SPECDEC_VEC_DOT_VNNI)
constexpr int kGroup = 8;
#else
constexpr int kGroup = 4;
#endif
constexpr size_t kRowBlockBytes = 24 << 10;

template <template <int> class K>
void run_group(int64_t n_in, const uint8_t* wr, const uint8_t* at, size_t a_stride, int64_t n,
               float* out) {
    switch (n) {
#if defined(SPECDEC_VEC_DOT_VNNI)
        case 8: K<8>::run(n_in, wr, at, a_stride, out); break;
        case 7: K<7>::run(n_in, wr, at, a_stride, out); break;
        case 6: K<6>::run(n_in, wr, at, a_stride, out); break;
        case 5: K<5>::run(n_in, wr, at, a_stride, out); break;
#endif
        case 4: K<4>::run(n_in, wr, at, a_stride, out); break;
        case 3: K<3>::run(n_in, wr, at, a_stride, out); break;
        case 2: K<2>::run(n_in, wr, at, a_stride, out); break;
        default: K<1>::run(n_in, wr, at, a_stride, out); break;
    }
}

template <template <int> class K>
void tile(int64_t n_in, const uint8_t* w, size_t w_stride, int64_t nr, const uint8_t* a,
          size_t a_stride, int64_t nt, float* y, int64_t ldy) {
    const int64_t rb = nt <= kGroup ? nr : std::max<int64_t>(1, (int64_t)(kRowBlockBytes / w_stride));
    for (int64_t r0 = 0; r0 < nr; r0 += rb) {
        const int64_t r1 = std::min(nr, r0 + rb);
        for (int64_t t = 0; t < nt; t += kGroup) {
            const int64_t g = std::min<int64_t>(kGroup, nt - t);
            const uint8_t* at = a + (size_t)t * a_stride;
            for (int64_t r = r0; r < r1; ++r) {
                float out[kGroup] = {};
                run_group<K>(n_in, w + (size_t)r * w_stride, at, a_stride, g, out);
                for (int64_t i = 0; i < g; ++i) y[(t + i) * ldy + r] = out[i];
            }
        }
    }
}

template <int NT> struct KQ4_0 { static constexpr auto run = dot_q8_0_family<DecQ4_0, NT>; };
template <int NT> struct KQ5_0 { static constexpr auto run = dot_q8_0_family<DecQ5_0, NT>; };
template <int NT> struct KQ8_0 { static constexpr auto run = dot_q8_0_family<DecQ8_0, NT>; };
template <int NT> struct KQ4_1 { static constexpr auto run = dot_q8_1_family<DecQ4_1, NT>; };
template <int NT> struct KQ5_1 { static constexpr auto run = dot_q8_1_family<DecQ5_1, NT>; };
template <int NT> struct KQ4_K { static constexpr auto run = dot_q45_K<false, NT>; };
template <int NT> struct KQ5_K { static constexpr auto run = dot_q45_K<true, NT>; };
template <int NT> struct KQ6_K { static constexpr auto run = dot_q6_K<NT>; };
template <int NT> struct KQ4_Kp { static constexpr auto run = dot_q45_K_paired<false, NT>; };
template <int NT> struct KQ5_Kp { static constexpr auto run = dot_q45_K_paired<true, NT>; };
template <int NT> struct KQ6_Kp { static constexpr auto run = dot_q6_K_paired<NT>; };
template <int NT> struct KIQ4_NL { static constexpr auto run = dot_nl4<BlockIQ4_NL, NT>; };
template <int NT> struct KMXFP4 { static constexpr auto run = dot_nl4<BlockMXFP4, NT>; };
template <int NT> struct KIQ4_XS { static constexpr auto run = dot_iq4_xs<NT>; };
template <int NT> struct KQ2_K { static constexpr auto run = dot_q23_K<false, NT>; };
template <int NT> struct KQ3_K { static constexpr auto run = dot_q23_K<true, NT>; };
template <int NT> struct KF32 { static constexpr auto run = dot_float<4, load8_f32, scalar_f32, NT>; };
template <int NT> struct KF16 { static constexpr auto run = dot_float<2, load8_f16, scalar_f16, NT>; };
template <int NT> struct KBF16 { static constexpr auto run = dot_float<2, load8_bf16, scalar_bf16, NT>; };

// One token: kOneTokenRows weight rows per Rows call (the rest through K1);
// more tokens: Many (a tile function; at the VNNI level the 2-row zmm tiles,
// which win from 2 tokens on: in-cache 576-wide Q4_1, 1.4x at 4 tokens, 1.9x
// at 8 and more). All give the same bits.
template <void (*Rows)(int64_t, const uint8_t*, size_t, const uint8_t*, float*), template <int> class K1,
          TileFn Many>
void tile_one_token_rows(int64_t n_in, const uint8_t* w, size_t w_stride, int64_t nr, const uint8_t* a,
                         size_t a_stride, int64_t nt, float* y, int64_t ldy) {
    if (nt != 1) return Many(n_in, w, w_stride, nr, a, a_stride, nt, y, ldy);
    int64_t r = 0;
    for (; r + kOneTokenRows <= nr; r += kOneTokenRows) Rows(n_in, w + (size_t)r * w_stride, w_stride, a, y + r);
    for (; r < nr; ++r) K1<1>::run(n_in, w + (size_t)r * w_stride, a, a_stride, y + r);
}

// Up to K1Rows rows: K1's kernels; more: KN's (both give the same bits).
template <template <int> class K1, template <int> class KN, int K1Rows = 1>
void tile_one_or_many(int64_t n_in, const uint8_t* w, size_t w_stride, int64_t nr, const uint8_t* a,
                      size_t a_stride, int64_t nt, float* y, int64_t ldy) {
    if (nt <= K1Rows) tile<K1>(n_in, w, w_stride, nr, a, a_stride, nt, y, ldy);
    else tile<KN>(n_in, w, w_stride, nr, a, a_stride, nt, y, ldy);
}

#if defined(SPECDEC_VEC_DOT_VNNI)
// Q4_K and Q6_K at the VNNI level: up to 4 activation rows the 256-bit VNNI
// kernels (this level's build of the AVX2 ones), from 5 on the 2-row zmm
// tiles. Zen 4 (AMD EPYC VM, 2026-12-07), specdec_microbench, 1 thread, us,
// AVX2 level / zmm tile / ymm VNNI: Q4_K 8960x1536 1 token 397-407 / 677-686 /
// 371-388, 4 tokens 1032-1055 / 1109-1116 / 961-971, 16 tokens 3915-4594 /
// 2655-2864 / 3850-3968; Q4_K 1536x1536 4 tokens 203 / 172-184 / 153-160;
// Q6_K 8960x1536 1 token 471-495 / 1017-1036 / 466-472, 4 tokens 1268-1371 /
// 1415-1438 / 1250-1324. (The zmm tiles decode one row at half speed on Zen
// 4, whose 512-bit operations are double-pumped; from about 8 rows their 16
// activation rows per weight load win.) The row-count calibration
// (kernel_choice.h) still picks between this and the AVX2 level per bucket.
constexpr int kYmmRowsQ4_K = 4;
constexpr int kYmmRowsQ6_K = 4;
// Within that range the plain kernels run 1 and 2 rows, the paired ones 3 and
// 4: at 2 rows the paired kernels' blends and shifts cost more than their
// saved multiply on Zen 4 (specdec_microbench, 1 thread, SPECDEC_ISA=avx512,
// 2 tokens, us, paired / plain, two runs each: Q4_K 1536x8960 695, 720 /
// 622, 593; Q4_K 8960x1536 788, 751 / 674, 596; Q6_K 8960x1536 1039, 981 /
// 906, 682), while at 4 rows paired still wins (Q4_K 8960x1536 951, 976 /
// 1037, 1034). At the AVX2 level the same comparison was mixed, so it keeps
// its paired kernels from 2 rows.
constexpr int kPlainRowsK = 2;
// Up to YmmRows activation rows the 256-bit VNNI kernels (K1 up to K1Rows
// rows, KN for more), from there Many (the 2-row zmm tiles). All give the
// same bits.
template <template <int> class K1, template <int> class KN, TileFn Many, int YmmRows, int K1Rows>
void tile_ymm_or_zmm(int64_t n_in, const uint8_t* w, size_t w_stride, int64_t nr, const uint8_t* a,
                     size_t a_stride, int64_t nt, float* y, int64_t ldy) {
    if (nt > YmmRows) return Many(n_in, w, w_stride, nr, a, a_stride, nt, y, ldy);
    tile_one_or_many<K1, KN, K1Rows>(n_in, w, w_stride, nr, a, a_stride, nt, y, ldy);
}
#endif

KernelTable make_table() {
    KernelTable k{};  // aggregate init: no out-of-line constructor compiled with these flags
    auto set = [&](TensorType t, TileFn f) { k.tile[(int)t] = f; };
    set(TensorType::Q4_0, tile_one_token_rows<dot_one_token_rows<DecQ4_0>, KQ4_0, tile<KQ4_0>>);
    set(TensorType::Q4_1, tile_one_token_rows<dot_one_token_rows<DecQ4_1>, KQ4_1, tile<KQ4_1>>);
    set(TensorType::Q5_0, tile_one_token_rows<dot_one_token_rows<DecQ5_0>, KQ5_0, tile<KQ5_0>>);
    set(TensorType::Q5_1, tile_one_token_rows<dot_one_token_rows<DecQ5_1>, KQ5_1, tile<KQ5_1>>);
    set(TensorType::Q8_0, tile_one_token_rows<dot_one_token_rows<DecQ8_0>, KQ8_0, tile<KQ8_0>>);
    set(TensorType::Q4_K, tile<KQ4_K>);
    set(TensorType::Q5_K, tile<KQ5_K>);
    set(TensorType::Q6_K, tile<KQ6_K>);
    set(TensorType::Q2_K, tile<KQ2_K>);
    set(TensorType::Q3_K, tile<KQ3_K>);
    set(TensorType::IQ4_NL, tile<KIQ4_NL>);
    set(TensorType::IQ4_XS, tile<KIQ4_XS>);
    set(TensorType::MXFP4, tile<KMXFP4>);
    set(TensorType::F32, tile<KF32>);
    set(TensorType::F16, tile<KF16>);
    set(TensorType::BF16, tile<KBF16>);
#if !defined(SPECDEC_VEC_DOT_VNNI)
    // One row keeps the shorter unpaired loop (its 4 multiplies per 64
    // weights hide under the memory read); from 2 rows on the paired
    // kernels' 3 multiplies win (Zen 2, in-cache 8960x1536 Q4_K, 1 thread:
    // 60 -> 66 GFLOP/s at 4-64 rows; qwen 1.5B prefill 19.5 -> 22 tok/s).
    // At the AVX-512 level Q4_K and Q6_K run the plain kernels up to 2 rows
    // and the paired ones for 3-4 (tile_ymm_or_zmm, kPlainRowsK), the zmm
    // tiles from there.
    set(TensorType::Q4_K, tile_one_or_many<KQ4_K, KQ4_Kp>);
    set(TensorType::Q5_K, tile_one_or_many<KQ5_K, KQ5_Kp>);
    set(TensorType::Q6_K, tile_one_or_many<KQ6_K, KQ6_Kp>);
#endif
#if defined(SPECDEC_VEC_DOT_VNNI)
    set(TensorType::Q4_0, tile_one_token_rows<zmm_one_token_rows<DecQ4_0>, KQ4_0, tile2<Z2Q4_0>>);
    set(TensorType::Q5_0, tile_one_token_rows<zmm_one_token_rows<DecQ5_0>, KQ5_0, tile2<Z2Q5_0>>);
    set(TensorType::Q8_0, tile_one_token_rows<zmm_one_token_rows<DecQ8_0>, KQ8_0, tile2<Z2Q8_0>>);
    set(TensorType::Q4_1, tile_one_token_rows<zmm_one_token_rows<DecQ4_1>, KQ4_1, tile2<Z2Q4_1>>);
    set(TensorType::Q5_1, tile_one_token_rows<zmm_one_token_rows<DecQ5_1>, KQ5_1, tile2<Z2Q5_1>>);
    set(TensorType::Q4_K, tile_ymm_or_zmm<KQ4_K, KQ4_Kp, tile2<Z2Q4_K>, kYmmRowsQ4_K, kPlainRowsK>);
    set(TensorType::Q6_K, tile_ymm_or_zmm<KQ6_K, KQ6_Kp, tile2<Z2Q6_K>, kYmmRowsQ6_K, kPlainRowsK>);
#endif
    return k;
}

}  // namespace

#if defined(SPECDEC_VEC_DOT_VNNI)
const KernelTable& avx512_kernel_table() {
#else
const KernelTable& avx2_kernel_table() {
#endif
    static const KernelTable table = make_table();
    return table;
}

}  // namespace specdec::kernels
