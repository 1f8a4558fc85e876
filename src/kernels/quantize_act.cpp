#include "kernels/quantize_act.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/dispatch.h"
#include "kernels/quant_blocks.h"
#include "kernels/quantize_act_simd.h"

namespace specdec::kernels {

namespace {

// ggml's nearest_int: adding 1.5*2^23 puts the integer part in the mantissa,
// rounding half to even; valid for |f| < 2^22.
inline int nearest_int(float f) {
    const float v = f + 12582912.f;
    int32_t i;
    std::memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}

}  // namespace

// Q8_0 / Q8_1 follow ggml's x86 SIMD quantize_row_q8_0/q8_1 (arch/x86/quants.c),
// which is what llama.cpp runs on any AVX/AVX2/AVX-512 CPU, not the generic
// quantize_row_q8_0_ref: the multiplier is id = 127/amax (one rounding; the
// reference's 1/(amax/127) has two and differs in the last bit), and x*id is
// rounded half to even (_mm256_round_ps(_MM_ROUND_NEAREST)), not half away
// from zero like roundf. Either difference flips an activation quant now and
// then (always on exact .5 ties), and each flip moves a logit. Every path of
// ours (scalar reference included) consumes these bytes, so they all match.
namespace {

// amax of a 32-block, d = amax/127, id = 127/amax (0 for an all-zero block).
inline void q8_block_scale(const float* x, float* d, float* id) {
    float amax = 0.0f;
    for (int j = 0; j < QK; ++j) amax = std::max(amax, std::fabs(x[j]));
    *d = amax / 127.0f;
    *id = amax != 0.0f ? 127.0f / amax : 0.0f;
}

}  // namespace

void quantize_row_q8_0(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_0*>(dst);
    for (int64_t b = 0; b < n / QK; ++b, x += QK) {
        float d, id;
        q8_block_scale(x, &d, &id);
        y[b].d = fp32_to_fp16(d);
        for (int j = 0; j < QK; ++j) y[b].qs[j] = (int8_t)nearest_int(x[j] * id);
    }
}

void quantize_row_q8_1(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_1*>(dst);
    for (int64_t b = 0; b < n / QK; ++b, x += QK) {
        float d, id;
        q8_block_scale(x, &d, &id);
        y[b].d = fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < QK; ++j) {
            y[b].qs[j] = (int8_t)nearest_int(x[j] * id);
            sum += y[b].qs[j];
        }
        // ggml scales the integer sum by the float d, not the fp16-rounded one
        // (the dots then read s back as fp16, like d).
        y[b].s = fp32_to_fp16((float)sum * d);
    }
}

void quantize_row_q8_K(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_K*>(dst);
    for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < QK_K; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            std::memset(&y[b], 0, sizeof(BlockQ8_K));
            continue;
        }
        // Current ggml uses -127 (it was -128 once); the sign makes the
        // largest-magnitude value map to -127 exactly.
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; ++j) {
            y[b].qs[j] = (int8_t)std::min(127, nearest_int(iscale * x[j]));
        }
        for (int g = 0; g < QK_K / 16; ++g) {
            int sum = 0;
            for (int j = 0; j < 16; ++j) sum += y[b].qs[16 * g + j];
            y[b].bsums[g] = (int16_t)sum;
        }
        y[b].d = 1.0f / iscale;
    }
}

void convert_row_f16(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void convert_row_bf16(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}

TensorType dot_type_for(TensorType w) {
    switch (w) {
        case TensorType::Q4_0:
        case TensorType::Q5_0:
        case TensorType::Q8_0:
        case TensorType::IQ4_NL:
        case TensorType::MXFP4: return TensorType::Q8_0;
        case TensorType::Q4_1:
        case TensorType::Q5_1: return TensorType::Q8_1;
        case TensorType::Q2_K:
        case TensorType::Q3_K:
        case TensorType::Q4_K:
        case TensorType::Q5_K:
        case TensorType::Q6_K:
        case TensorType::IQ4_XS: return TensorType::Q8_K;
        case TensorType::F16: return TensorType::F16;
        case TensorType::BF16: return TensorType::BF16;
        default: return TensorType::F32;
    }
}

size_t act_row_bytes(TensorType w, int64_t n) { return tensor_row_bytes(dot_type_for(w), n); }

void quantize_act_row(TensorType w, const float* x, void* dst, int64_t n) {
    switch (dot_type_for(w)) {
        case TensorType::Q8_0: quantize_row_q8_0(x, dst, n); break;
        case TensorType::Q8_1: quantize_row_q8_1(x, dst, n); break;
        case TensorType::Q8_K: quantize_row_q8_K(x, dst, n); break;
        case TensorType::F16: convert_row_f16(x, dst, n); break;
        case TensorType::BF16: convert_row_bf16(x, dst, n); break;
        default: std::memcpy(dst, x, (size_t)n * sizeof(float)); break;
    }
}

namespace {

uint16_t to_fp16(float f) { return fp32_to_fp16(f); }

}  // namespace

void quantize_act_row_fast(TensorType w, const float* x, void* dst, int64_t n) {
    if (active_isa() == Isa::Avx512) {
        switch (dot_type_for(w)) {
            case TensorType::Q8_K: quantize_row_q8_K_avx512(x, dst, n); return;
            case TensorType::Q8_0: quantize_row_q8_0_avx512(x, dst, n, to_fp16); return;
            default: break;
        }
    }
    quantize_act_row(w, x, dst, n);
}

namespace {

bool has_extras(TensorType w) {
    const TensorType d = dot_type_for(w);
    return d == TensorType::Q8_0 || d == TensorType::Q8_1 || d == TensorType::Q8_K;
}

}  // namespace

namespace {

constexpr size_t align32(size_t v) { return (v + 31) & ~(size_t)31; }

}  // namespace

ActExtrasLayout act_extras_layout(TensorType w, int64_t n) {
    ActExtrasLayout l;
    l.end = act_row_bytes(w, n);
    if (!has_extras(w)) return l;
    const size_t nb = (size_t)(n / QK);
    l.d_offset = align32(l.end);
    l.e_offset = align32(l.d_offset + nb * sizeof(float));
    const TensorType dt = dot_type_for(w);
    if (dt == TensorType::Q8_K) {  // per 256-block: -d (float), 16 int16; then the paired quants
        const size_t nbk = (size_t)(n / QK_K);
        l.e_offset = align32(l.d_offset + nbk * sizeof(float));
        l.p_offset = align32(l.e_offset + nbk * 16 * sizeof(int16_t));
        l.end = l.p_offset + (size_t)n;
        return l;
    }
    const bool q8_1 = dt == TensorType::Q8_1;
    l.end = l.e_offset + nb * (q8_1 ? sizeof(float) : 8 * sizeof(int32_t));
    return l;
}

size_t act_row_bytes_ext(TensorType w, int64_t n) { return act_extras_layout(w, n).end; }

void add_act_row_extras(TensorType w, void* row, int64_t n) {
    if (!has_extras(w)) return;
    const int64_t nb = n / QK;
    const ActExtrasLayout l = act_extras_layout(w, n);
    auto* base = static_cast<uint8_t*>(row);
    auto* d = reinterpret_cast<float*>(base + l.d_offset);  // (nb)
    if (dot_type_for(w) == TensorType::Q8_K) {
        const auto* y = static_cast<const BlockQ8_K*>(row);
        auto* e = reinterpret_cast<int16_t*>(base + l.e_offset);  // (n/256, 16)
        for (int64_t b = 0; b < n / QK_K; ++b) {
            d[b] = -y[b].d;
            for (int j = 0; j < 8; ++j) {
                // int16 like ggml's _mm_hadd_epi16 (no overflow: |sum| <= 32 * 127)
                const auto s = (int16_t)(y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
                e[16 * b + j] = s;
                e[16 * b + 8 + j] = s;
            }
        }
        // Paired quants: per 64 elements (chunks A = the first 32, B = the
        // next 32), 32 bytes U whose int32 lane k holds A[4k], A[4k+1], B[4k],
        // B[4k+1], then 32 bytes V with A[4k+2], A[4k+3], B[4k+2], B[4k+3]
        // (as int16 words: U[2k] = A's word 2k, U[2k+1] = B's word 2k, V the
        // odd words).
        auto* p = reinterpret_cast<uint16_t*>(base + l.p_offset);
        for (int64_t b = 0; b < n / QK_K; ++b) {
            for (int c = 0; c < QK_K / 64; ++c, p += 32) {
                uint16_t wa[16], wb[16];
                std::memcpy(wa, y[b].qs + 64 * c, 32);
                std::memcpy(wb, y[b].qs + 64 * c + 32, 32);
                for (int k = 0; k < 8; ++k) {
                    p[2 * k] = wa[2 * k];
                    p[2 * k + 1] = wb[2 * k];
                    p[16 + 2 * k] = wa[2 * k + 1];
                    p[16 + 2 * k + 1] = wb[2 * k + 1];
                }
            }
        }
        return;
    }
    if (dot_type_for(w) == TensorType::Q8_1) {
        const auto* y = static_cast<const BlockQ8_1*>(row);
        auto* s = reinterpret_cast<float*>(base + l.e_offset);  // (nb)
        for (int64_t b = 0; b < nb; ++b) {
            d[b] = fp16_to_fp32(y[b].d);
            s[b] = fp16_to_fp32(y[b].s);
        }
        return;
    }
    const int offset = w == TensorType::Q4_0 ? 8 : w == TensorType::Q5_0 ? 16 : 128;
    const auto* y = static_cast<const BlockQ8_0*>(row);
    auto* e = reinterpret_cast<int32_t*>(base + l.e_offset);  // (nb, 8)
    for (int64_t b = 0; b < nb; ++b) {
        d[b] = fp16_to_fp32(y[b].d);
        for (int i = 0; i < 8; ++i) {
            const int8_t* q = y[b].qs + 4 * i;
            e[8 * b + i] = -offset * (q[0] + q[1] + q[2] + q[3]);
        }
    }
}

}  // namespace specdec::kernels
