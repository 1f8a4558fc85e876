// Scalar reference dot products: the definition every SIMD kernel is tested
// against. Integer parts are exact; the float parts follow ggml's x86 SIMD
// vec_dot operation by operation (see below), so results are bit-identical to
// llama.cpp's on this machine and to our SIMD kernels.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/vec_dot.h"

namespace specdec::kernels {

namespace {

inline uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

}  // namespace

float vec_dot_f32(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const float*>(w);
    const auto* y = static_cast<const float*>(a);
    double s = 0.0;  // as ggml's scalar path: a double accumulator
    for (int64_t i = 0; i < n; ++i) s += (double)(x[i] * y[i]);
    return (float)s;
}

float vec_dot_f16(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const uint16_t*>(w);
    const auto* y = static_cast<const uint16_t*>(a);
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += (double)(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
    return (float)s;
}

float vec_dot_bf16(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const uint16_t*>(w);
    const auto* y = static_cast<const uint16_t*>(a);
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += (double)(bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]));
    return (float)s;
}

// ---- ggml's x86 accumulation order ----------------------------------------------
//
// The integer parts of a dot are exact in any order, but its float parts are
// not, and real activations have outliers (|x| in the thousands) whose block
// terms cancel to a result 1e4 times smaller: summing them in another order
// moves outputs by 1e-2 relative and logits by tenths. So the scalar
// reference reproduces the float operations of ggml's AVX2/AVX-512 vec_dot
// (arch/x86/quants.c, what llama.cpp runs here) exactly, and the SIMD kernels
// compute the same integer lanes, so every path gives ggml's bits:
//   * 8 int32 lanes per block; lane i of a 32-byte chunk covers bytes 4i..4i+3;
//   * acc[i] = fma(d_block, (float)lane[i], acc[i]), block by block;
//   * hsum8: (a0+a4 + a2+a6) + (a1+a5 + a3+a7), as hsum_float_8;
//   * min terms (Q4_1/Q5_1: m*s, fused; K-quants: 4 lanes) accumulated apart
//     and added last.

namespace {

inline float hsum8(const float a[8]) {
    float r[4];
    for (int i = 0; i < 4; ++i) r[i] = a[i + 4] + a[i];
    return (r[0] + r[2]) + (r[1] + r[3]);
}

inline float hsum4(const float m[4]) { return (m[0] + m[2]) + (m[1] + m[3]); }

inline void fma_lanes(float acc[8], float d, const int32_t lanes[8]) {
    for (int i = 0; i < 8; ++i) acc[i] = std::fma(d, (float)lanes[i], acc[i]);
}

// Signed weight values of a 32-block in element order.
inline void legacy_values(const BlockQ4_0& b, int v[32]) {
    for (int j = 0; j < 16; ++j) {
        v[j] = (b.qs[j] & 0xF) - 8;
        v[j + 16] = (b.qs[j] >> 4) - 8;
    }
}
inline void legacy_values(const BlockQ4_1& b, int v[32]) {
    for (int j = 0; j < 16; ++j) {
        v[j] = b.qs[j] & 0xF;
        v[j + 16] = b.qs[j] >> 4;
    }
}
inline void legacy_values(const BlockQ5_0& b, int v[32]) {
    const uint32_t qh = load_u32(b.qh);
    for (int j = 0; j < 16; ++j) {
        v[j] = ((b.qs[j] & 0xF) | (int)(((qh >> j) & 1u) << 4)) - 16;
        v[j + 16] = ((b.qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4)) - 16;
    }
}
inline void legacy_values(const BlockQ5_1& b, int v[32]) {
    const uint32_t qh = load_u32(b.qh);
    for (int j = 0; j < 16; ++j) {
        v[j] = (b.qs[j] & 0xF) | (int)(((qh >> j) & 1u) << 4);
        v[j + 16] = (b.qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
    }
}
inline void legacy_values(const BlockQ8_0& b, int v[32]) {
    for (int j = 0; j < 32; ++j) v[j] = b.qs[j];
}

inline void lanes32(const int v[32], const int8_t* a, int32_t lanes[8]) {
    for (int i = 0; i < 8; ++i) {
        lanes[i] = 0;
        for (int k = 4 * i; k < 4 * i + 4; ++k) lanes[i] += v[k] * a[k];
    }
}

// Q4_0/Q5_0/Q8_0 x Q8_0: sum_b fp16(dx)*fp16(dy) * lanes.
template <class Block>
float dot_legacy_q8_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const Block*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float acc[8] = {};
    for (int64_t b = 0; b < n / QK; ++b) {
        int v[32];
        int32_t lanes[8];
        legacy_values(x[b], v);
        lanes32(v, y[b].qs, lanes);
        fma_lanes(acc, fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d), lanes);
    }
    return hsum8(acc);
}

// Q4_1/Q5_1 x Q8_1: d*lanes as above, plus the min term m * s (s = fp16 of
// d_act * sum(q_act)) fused into its own sum, added last.
template <class Block>
float dot_legacy_q8_1(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const Block*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    float acc[8] = {};
    float summs = 0.0f;
    for (int64_t b = 0; b < n / QK; ++b) {
        int v[32];
        int32_t lanes[8];
        legacy_values(x[b], v);
        lanes32(v, y[b].qs, lanes);
        summs = std::fma(fp16_to_fp32(x[b].m), fp16_to_fp32(y[b].s), summs);
        fma_lanes(acc, fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d), lanes);
    }
    return hsum8(acc) + summs;
}

// Q4_K/Q5_K x Q8_K. Lane i of the scaled sum: sc_j * (pair sums of the 4
// bytes) over the 8 sub-blocks; min lanes k = 0..3: m_{2k}*B_{2k} +
// m_{2k+1}*B_{2k+1} with B_j = bsums[2j] + bsums[2j+1], accumulated in 4
// float lanes (Q4_K) or summed to one integer per super-block first (Q5_K).
template <bool HasHigh>
float dot_q45_K(int64_t n, const void* w, const void* a) {
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float acc[8] = {}, acc_m[4] = {}, summs = 0.0f;
    for (int64_t b = 0; b < n / QK_K; ++b) {
        const uint8_t *scales, *qs, *qh = nullptr;
        uint16_t dh, dminh;
        if constexpr (HasHigh) {
            const auto& x = static_cast<const BlockQ5_K*>(w)[b];
            scales = x.scales, qs = x.qs, qh = x.qh, dh = x.d, dminh = x.dmin;
        } else {
            const auto& x = static_cast<const BlockQ4_K*>(w)[b];
            scales = x.scales, qs = x.qs, dh = x.d, dminh = x.dmin;
        }
        int32_t lanes[8] = {};
        int32_t mins[4] = {};
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            get_scale_min_k4(j, scales, &sc, &m);
            const uint8_t* q = qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            const int8_t* yq = y[b].qs + 32 * j;
            for (int i = 0; i < 8; ++i) {
                int dot = 0;
                for (int l = 4 * i; l < 4 * i + 4; ++l) {
                    int v = (q[l] >> shift) & 0xF;
                    if constexpr (HasHigh) v |= ((qh[l] >> j) & 1) << 4;
                    dot += v * yq[l];
                }
                lanes[i] += sc * dot;
            }
            mins[j / 2] += m * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        }
        const float d = y[b].d * fp16_to_fp32(dh);
        const float dmin = -y[b].d * fp16_to_fp32(dminh);
        if constexpr (HasHigh) {  // ggml's Q5_K sums the min lanes first, in a scalar
            summs = std::fma(dmin, (float)((mins[0] + mins[2]) + (mins[1] + mins[3])), summs);
        } else {
            for (int k = 0; k < 4; ++k) acc_m[k] = std::fma(dmin, (float)mins[k], acc_m[k]);
        }
        fma_lanes(acc, d, lanes);
    }
    return HasHigh ? hsum8(acc) + summs : hsum8(acc) + hsum4(acc_m);
}

}  // namespace

float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* a) {
    return dot_legacy_q8_0<BlockQ4_0>(n, w, a);
}
float vec_dot_q5_0_q8_0(int64_t n, const void* w, const void* a) {
    return dot_legacy_q8_0<BlockQ5_0>(n, w, a);
}
float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* a) {
    return dot_legacy_q8_0<BlockQ8_0>(n, w, a);
}
float vec_dot_q4_1_q8_1(int64_t n, const void* w, const void* a) {
    return dot_legacy_q8_1<BlockQ4_1>(n, w, a);
}
float vec_dot_q5_1_q8_1(int64_t n, const void* w, const void* a) {
    return dot_legacy_q8_1<BlockQ5_1>(n, w, a);
}
float vec_dot_q4_K_q8_K(int64_t n, const void* w, const void* a) { return dot_q45_K<false>(n, w, a); }
float vec_dot_q5_K_q8_K(int64_t n, const void* w, const void* a) { return dot_q45_K<true>(n, w, a); }

// Q6_K x Q8_K. Weights are used as stored, q+32 in [0, 63]; the offset comes
// off lane g (g = 0..7) as 32 * (sc_{2g}*bsums[2g] + sc_{2g+1}*bsums[2g+1]),
// as ggml does. Lane i of 32-byte chunk k (elements 32k..32k+31) takes
// scale 2k (bytes 0..15, lanes 0..3) or 2k+1 (lanes 4..7) within its half.
float vec_dot_q6_K_q8_K(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ6_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float acc[8] = {};
    for (int64_t b = 0; b < n / QK_K; ++b) {
        int32_t lanes[8];
        for (int g = 0; g < 8; ++g) {
            lanes[g] = -32 * (x[b].scales[2 * g] * y[b].bsums[2 * g] +
                              x[b].scales[2 * g + 1] * y[b].bsums[2 * g + 1]);
        }
        for (int half = 0; half < 2; ++half) {
            const uint8_t* ql = x[b].ql + 64 * half;
            const uint8_t* qh = x[b].qh + 32 * half;
            const int8_t* sc = x[b].scales + 8 * half;
            for (int k = 0; k < 4; ++k) {  // chunk: elements 128*half + 32k + l
                const int8_t* yq = y[b].qs + 128 * half + 32 * k;
                for (int i = 0; i < 8; ++i) {
                    int dot = 0;
                    for (int l = 4 * i; l < 4 * i + 4; ++l) {
                        const int lo = k % 2 == 0 ? ql[l] : ql[l + 32];
                        const int q = ((k < 2 ? lo & 0xF : lo >> 4) | (((qh[l] >> (2 * k)) & 3) << 4));
                        dot += q * yq[l];
                    }
                    lanes[i] += sc[2 * k + (i >= 4)] * dot;
                }
            }
        }
        fma_lanes(acc, y[b].d * fp16_to_fp32(x[b].d), lanes);
    }
    return hsum8(acc);
}

namespace {

// Q2_K/Q3_K x Q8_K, as ggml's AVX2 kernels. Chunk k (0..3) of half h
// (elements 128h+32k..+31) takes scale 8h+2k on its first 16 bytes (lanes
// 0..3) and 8h+2k+1 on the rest. Q2_K's min lane i, m_{2i}*bsums[2i] +
// m_{2i+1}*bsums[2i+1], goes into the same float lanes first (times -dmin).
template <bool IsQ3>
float dot_q23_K(int64_t n, const void* w, const void* a) {
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float acc[8] = {};
    for (int64_t b = 0; b < n / QK_K; ++b) {
        const uint8_t* qs;
        int sc[16];
        if constexpr (IsQ3) {
            const auto& x = static_cast<const BlockQ3_K*>(w)[b];
            qs = x.qs;
            for (int g = 0; g < 16; ++g) sc[g] = q3_K_scale(x.scales, g);
        } else {
            const auto& x = static_cast<const BlockQ2_K*>(w)[b];
            qs = x.qs;
            int32_t mins[8];
            for (int i = 0; i < 8; ++i) {
                mins[i] = (x.scales[2 * i] >> 4) * y[b].bsums[2 * i] +
                          (x.scales[2 * i + 1] >> 4) * y[b].bsums[2 * i + 1];
            }
            for (int g = 0; g < 16; ++g) sc[g] = x.scales[g] & 0xF;
            fma_lanes(acc, -y[b].d * fp16_to_fp32(x.dmin), mins);
        }
        int32_t lanes[8] = {};
        for (int h = 0; h < 2; ++h) {
            for (int k = 0; k < 4; ++k) {
                const int8_t* yq = y[b].qs + 128 * h + 32 * k;
                for (int i = 0; i < 8; ++i) {
                    int dot = 0;
                    for (int l = 4 * i; l < 4 * i + 4; ++l) {
                        int q = (qs[32 * h + l] >> (2 * k)) & 3;
                        if constexpr (IsQ3) {
                            const auto& x = static_cast<const BlockQ3_K*>(w)[b];
                            if (!((x.hmask[l] >> (4 * h + k)) & 1)) q -= 4;
                        }
                        dot += q * yq[l];
                    }
                    lanes[i] += sc[8 * h + 2 * k + (i >= 4)] * dot;
                }
            }
        }
        uint16_t dh;
        if constexpr (IsQ3) dh = static_cast<const BlockQ3_K*>(w)[b].d;
        else dh = static_cast<const BlockQ2_K*>(w)[b].d;
        fma_lanes(acc, y[b].d * fp16_to_fp32(dh), lanes);
    }
    return hsum8(acc);
}

// The two non-linear 4-bit types of 32-element blocks, as Q4_0's nibble
// order through a 16-entry int8 table: IQ4_NL (fp16 scale) and MXFP4 (E8M0
// exponent, doubled E2M1 values).
inline float nl4_scale(const BlockIQ4_NL& b) { return fp16_to_fp32(b.d); }
inline float nl4_scale(const BlockMXFP4& b) { return e8m0_to_fp32_half(b.e); }
inline const int8_t* nl4_table(const BlockIQ4_NL&) { return kIq4nlValues; }
inline const int8_t* nl4_table(const BlockMXFP4&) { return kMxfp4Values; }

// IQ4_NL/MXFP4 x Q8_0, as ggml's AVX2 kernels (the same code for both):
// blocks in pairs, the even one into one set of 8 float lanes and the odd one
// into another, the two added lane by lane before hsum8; an odd last block is
// added as one integer, multiplied then added: the llama-cpp-python 0.3.36
// build here (GCC 12) does not contract that `sumf += d * sumi` (vmulss,
// vaddss in libggml-cpu.so; this file is built for baseline x86-64, with no
// FMA to contract into, and the AVX2 tile hides its product behind an empty
// asm). The block factor is d_act * d_weight.
template <class Block>
float dot_nl4_q8_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const Block*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    const int64_t nb = n / QK;
    float acc[2][8] = {};
    auto block = [&](int64_t b, int32_t lanes[8]) {
        const int8_t* table = nl4_table(x[b]);
        int v[32];
        for (int j = 0; j < 16; ++j) {
            v[j] = table[x[b].qs[j] & 0xF];
            v[j + 16] = table[x[b].qs[j] >> 4];
        }
        lanes32(v, y[b].qs, lanes);
    };
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
        for (int k = 0; k < 2; ++k) {
            int32_t lanes[8];
            block(b + k, lanes);
            fma_lanes(acc[k], fp16_to_fp32(y[b + k].d) * nl4_scale(x[b + k]), lanes);
        }
    }
    float both[8];
    for (int i = 0; i < 8; ++i) both[i] = acc[0][i] + acc[1][i];
    float sum = hsum8(both);
    if (b < nb) {
        int32_t lanes[8];
        block(b, lanes);
        int32_t s = 0;
        for (int i = 0; i < 8; ++i) s += lanes[i];
        sum = sum + (fp16_to_fp32(y[b].d) * nl4_scale(x[b])) * (float)s;
    }
    return sum;
}

}  // namespace

float vec_dot_iq4_nl_q8_0(int64_t n, const void* w, const void* a) { return dot_nl4_q8_0<BlockIQ4_NL>(n, w, a); }
float vec_dot_mxfp4_q8_0(int64_t n, const void* w, const void* a) { return dot_nl4_q8_0<BlockMXFP4>(n, w, a); }

// IQ4_XS x Q8_K, as ggml's AVX2 kernel: lane i of a sub-block s (elements
// 32s..32s+31, IQ4_NL's order) is the dot of its bytes 4i..4i+3, times the
// sub-block's signed scale; the 8 sub-blocks' lanes add up as integers
// (ggml's even/odd split is integer too, so exact), then one fma per
// super-block with d * d_act, and hsum8 at the end.
float vec_dot_iq4_xs_q8_K(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockIQ4_XS*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float acc[8] = {};
    for (int64_t b = 0; b < n / QK_K; ++b) {
        int32_t lanes[8] = {};
        for (int s = 0; s < QK_K / 32; ++s) {
            int v[32];
            const uint8_t* qs = x[b].qs + 16 * s;
            for (int j = 0; j < 16; ++j) {
                v[j] = kIq4nlValues[qs[j] & 0xF];
                v[j + 16] = kIq4nlValues[qs[j] >> 4];
            }
            int32_t l[8];
            lanes32(v, y[b].qs + 32 * s, l);
            const int ls = iq4_xs_scale(x[b], s);
            for (int i = 0; i < 8; ++i) lanes[i] += ls * l[i];
        }
        fma_lanes(acc, fp16_to_fp32(x[b].d) * y[b].d, lanes);
    }
    return hsum8(acc);
}

float vec_dot_q2_K_q8_K(int64_t n, const void* w, const void* a) { return dot_q23_K<false>(n, w, a); }
float vec_dot_q3_K_q8_K(int64_t n, const void* w, const void* a) { return dot_q23_K<true>(n, w, a); }

namespace {

using DotFn = float (*)(int64_t, const void*, const void*);

template <DotFn Dot>
void scalar_tile(int64_t n_in, const uint8_t* w, size_t w_stride, int64_t nr, const uint8_t* a,
                 size_t a_stride, int64_t nt, float* y, int64_t ldy) {
    for (int64_t r = 0; r < nr; ++r) {
        for (int64_t t = 0; t < nt; ++t) {
            y[t * ldy + r] = Dot(n_in, w + r * w_stride, a + t * a_stride);
        }
    }
}

KernelTable make_scalar_table() {
    KernelTable k;
    auto set = [&](TensorType t, TileFn f) { k.tile[(int)t] = f; };
    set(TensorType::F32, scalar_tile<vec_dot_f32>);
    set(TensorType::F16, scalar_tile<vec_dot_f16>);
    set(TensorType::BF16, scalar_tile<vec_dot_bf16>);
    set(TensorType::Q4_0, scalar_tile<vec_dot_q4_0_q8_0>);
    set(TensorType::Q4_1, scalar_tile<vec_dot_q4_1_q8_1>);
    set(TensorType::Q5_0, scalar_tile<vec_dot_q5_0_q8_0>);
    set(TensorType::Q5_1, scalar_tile<vec_dot_q5_1_q8_1>);
    set(TensorType::Q8_0, scalar_tile<vec_dot_q8_0_q8_0>);
    set(TensorType::Q4_K, scalar_tile<vec_dot_q4_K_q8_K>);
    set(TensorType::Q5_K, scalar_tile<vec_dot_q5_K_q8_K>);
    set(TensorType::Q6_K, scalar_tile<vec_dot_q6_K_q8_K>);
    set(TensorType::Q2_K, scalar_tile<vec_dot_q2_K_q8_K>);
    set(TensorType::Q3_K, scalar_tile<vec_dot_q3_K_q8_K>);
    set(TensorType::IQ4_NL, scalar_tile<vec_dot_iq4_nl_q8_0>);
    set(TensorType::IQ4_XS, scalar_tile<vec_dot_iq4_xs_q8_K>);
    set(TensorType::MXFP4, scalar_tile<vec_dot_mxfp4_q8_0>);
    return k;
}

}  // namespace

const KernelTable& scalar_kernel_table() {
    static const KernelTable table = make_scalar_table();
    return table;
}

}  // namespace specdec::kernels
