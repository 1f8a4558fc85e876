// Simple reference quantizers for weight types, used only by the tests to
// make valid weight rows from random floats. They are not ggml's (which
// searches for the best scales); the kernels under test only need valid
// blocks, and the dequantized floats are the ground truth either way.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "core/tensor_type.h"
#include "kernels/quant_blocks.h"
#include "kernels/quantize_act.h"

namespace specdec::testing {

using namespace specdec::kernels;

inline int clampi(int v, int lo, int hi) { return std::min(hi, std::max(lo, v)); }

inline void quant_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, x += QK) {
        float amax = 0, max = 0;
        for (int j = 0; j < QK; ++j)
            if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
        const float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        for (int j = 0; j < QK / 2; ++j) {
            const int q0 = clampi((int)std::lround(x[j] * id) + 8, 0, 15);
            const int q1 = clampi((int)std::lround(x[j + 16] * id) + 8, 0, 15);
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

inline void quant_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, x += QK) {
        const float mn = *std::min_element(x, x + QK), mx = *std::max_element(x, x + QK);
        const float d = (mx - mn) / 15.0f, id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        y[b].m = fp32_to_fp16(mn);
        for (int j = 0; j < QK / 2; ++j) {
            const int q0 = clampi((int)std::lround((x[j] - mn) * id), 0, 15);
            const int q1 = clampi((int)std::lround((x[j + 16] - mn) * id), 0, 15);
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

inline void quant_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, x += QK) {
        float amax = 0, max = 0;
        for (int j = 0; j < QK; ++j)
            if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
        const float d = max / -16.0f, id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; ++j) {
            const int q0 = clampi((int)std::lround(x[j] * id) + 16, 0, 31);
            const int q1 = clampi((int)std::lround(x[j + 16] * id) + 16, 0, 31);
            y[b].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + 16);
        }
        std::memcpy(y[b].qh, &qh, 4);
    }
}

inline void quant_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, x += QK) {
        const float mn = *std::min_element(x, x + QK), mx = *std::max_element(x, x + QK);
        const float d = (mx - mn) / 31.0f, id = d != 0 ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        y[b].m = fp32_to_fp16(mn);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; ++j) {
            const int q0 = clampi((int)std::lround((x[j] - mn) * id), 0, 31);
            const int q1 = clampi((int)std::lround((x[j + 16] - mn) * id), 0, 31);
            y[b].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + 16);
        }
        std::memcpy(y[b].qh, &qh, 4);
    }
}

// Packs 8 six-bit scales and mins as get_scale_min_k4 unpacks them.
inline void pack_scales_k4(const int* sc, const int* m, uint8_t* q) {
    std::memset(q, 0, 12);
    for (int j = 0; j < 4; ++j) {
        q[j] = (uint8_t)sc[j];
        q[j + 4] = (uint8_t)m[j];
    }
    for (int j = 4; j < 8; ++j) {
        q[j + 4] = (uint8_t)((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
        q[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
        q[j] |= (uint8_t)((m[j] >> 4) << 6);
    }
}

// Q4_K (nmax=15) and Q5_K (nmax=31): per sub-block of 32, scale and min
// relative to super-block scales, then q = round((x + min) / scale).
template <class Block>
inline void quant_k45(const float* x, Block* y, int64_t nb, int nmax) {
    for (int64_t b = 0; b < nb; ++b, x += QK_K) {
        float scale[8], mins[8], max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; ++j) {
            const float mn = std::min(0.0f, *std::min_element(x + 32 * j, x + 32 * j + 32));
            const float mx = *std::max_element(x + 32 * j, x + 32 * j + 32);
            scale[j] = (mx - mn) / (float)nmax;
            mins[j] = -mn;
            max_scale = std::max(max_scale, scale[j]);
            max_min = std::max(max_min, mins[j]);
        }
        const float d = max_scale / 63.0f, dmin = max_min / 63.0f;
        y[b].d = fp32_to_fp16(d);
        y[b].dmin = fp32_to_fp16(dmin);
        const float dq = fp16_to_fp32(y[b].d), dmq = fp16_to_fp32(y[b].dmin);
        int sc[8], m[8];
        for (int j = 0; j < 8; ++j) {
            sc[j] = dq > 0 ? clampi((int)std::lround(scale[j] / dq), 0, 63) : 0;
            m[j] = dmq > 0 ? clampi((int)std::lround(mins[j] / dmq), 0, 63) : 0;
        }
        pack_scales_k4(sc, m, y[b].scales);
        std::memset(y[b].qs, 0, sizeof(y[b].qs));
        if constexpr (sizeof(Block) == sizeof(BlockQ5_K)) std::memset(y[b].qh, 0, 32);
        for (int j = 0; j < 8; ++j) {
            const float ds = dq * (float)sc[j], dm = dmq * (float)m[j];
            for (int l = 0; l < 32; ++l) {
                const int q = ds > 0 ? clampi((int)std::lround((x[32 * j + l] + dm) / ds), 0, nmax)
                                     : 0;
                y[b].qs[32 * (j / 2) + l] |= (uint8_t)((q & 0xF) << (4 * (j % 2)));
                if constexpr (sizeof(Block) == sizeof(BlockQ5_K)) {
                    y[b].qh[l] |= (uint8_t)((q >> 4) << j);
                }
            }
        }
    }
}

inline void quant_q6_K(const float* x, BlockQ6_K* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, x += QK_K) {
        float scale[16], max_abs_scale = 0, max_scale = 0;
        for (int g = 0; g < 16; ++g) {
            float amax = 0, max = 0;
            for (int l = 0; l < 16; ++l)
                if (std::fabs(x[16 * g + l]) > amax) amax = std::fabs(x[16 * g + l]), max = x[16 * g + l];
            scale[g] = max / -32.0f;
            if (std::fabs(scale[g]) > max_abs_scale) max_abs_scale = std::fabs(scale[g]), max_scale = scale[g];
        }
        const float d = max_scale / -128.0f;
        y[b].d = fp32_to_fp16(d);
        const float dq = fp16_to_fp32(y[b].d);
        std::memset(y[b].ql, 0, sizeof(y[b].ql));
        std::memset(y[b].qh, 0, sizeof(y[b].qh));
        int q[QK_K];
        for (int g = 0; g < 16; ++g) {
            const int sc = dq != 0 ? clampi((int)std::lround(scale[g] / dq), -128, 127) : 0;
            y[b].scales[g] = (int8_t)sc;
            const float ds = dq * (float)sc;
            for (int l = 0; l < 16; ++l) {
                q[16 * g + l] =
                    ds != 0 ? clampi((int)std::lround(x[16 * g + l] / ds) + 32, 0, 63) : 32;
            }
        }
        for (int half = 0; half < 2; ++half) {
            uint8_t* ql = y[b].ql + 64 * half;
            uint8_t* qh = y[b].qh + 32 * half;
            const int* qq = q + 128 * half;
            for (int l = 0; l < 32; ++l) {
                ql[l] = (uint8_t)((qq[l] & 0xF) | ((qq[l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((qq[l + 32] & 0xF) | ((qq[l + 96] & 0xF) << 4));
                qh[l] = (uint8_t)((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) | ((qq[l + 64] >> 4) << 4) |
                                  ((qq[l + 96] >> 4) << 6));
            }
        }
    }
}

// MXFP4, as gguf-py's quantizer: the block exponent e = floor(log2(amax)) -
// 2 + 127 (amax / 2^(e-127) in [4, 8), E2M1 reaching 6), then each value's
// nearest of the 16 levels.
inline void quant_mxfp4(const float* x, BlockMXFP4* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, x += QK) {
        float amax = 0;
        for (int j = 0; j < QK; ++j) amax = std::max(amax, std::fabs(x[j]));
        const int e = amax > 0 ? clampi((int)std::floor(std::log2(amax)) - 2 + 127, 0, 254) : 0;
        y[b].e = (uint8_t)e;
        const float d = e8m0_to_fp32_half((uint8_t)e);
        auto nearest = [&](float v) {
            int best = 0;
            for (int k = 1; k < 16; ++k)
                if (std::fabs(d * kMxfp4Values[k] - v) < std::fabs(d * kMxfp4Values[best] - v)) best = k;
            return best;
        };
        for (int j = 0; j < QK / 2; ++j) y[b].qs[j] = (uint8_t)(nearest(x[j]) | (nearest(x[j + 16]) << 4));
    }
}

// Q2_K/Q3_K/IQ4_NL/IQ4_XS: no search for scales here; blocks of pseudo-random bits (every
// bit pattern is a valid block) with the fp16 super-scales set from the
// row's floats, so a seed's rows differ and every code path is exercised.
template <class Block, int Elems>
inline void random_blocks(const float* x, Block* y, int64_t nb) {
    uint32_t st;
    std::memcpy(&st, x, 4);
    for (int64_t b = 0; b < nb; ++b) {
        auto* p = reinterpret_cast<uint8_t*>(&y[b]);
        for (size_t i = 0; i < sizeof(Block); ++i) {
            st = st * 1664525u + 1013904223u;
            p[i] = (uint8_t)(st >> 24);
        }
        y[b].d = fp32_to_fp16(0.01f + std::fabs(x[b * Elems]) * 0.01f);
        if constexpr (sizeof(Block) == sizeof(BlockQ2_K)) y[b].dmin = fp32_to_fp16(std::fabs(x[b * Elems + 1]) * 0.01f);
    }
}

// Quantizes a (rows, n) float matrix to type t; rows are tensor_row_bytes apart.
inline std::vector<uint8_t> quantize_weights(TensorType t, const float* x, int64_t rows, int64_t n) {
    const size_t rb = tensor_row_bytes(t, n);
    std::vector<uint8_t> out(rb * (size_t)rows);
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        uint8_t* dst = out.data() + rb * (size_t)r;
        switch (t) {
            case TensorType::F32: std::memcpy(dst, xr, (size_t)n * 4); break;
            case TensorType::F16: convert_row_f16(xr, dst, n); break;
            case TensorType::BF16: convert_row_bf16(xr, dst, n); break;
            case TensorType::Q4_0: quant_q4_0(xr, reinterpret_cast<BlockQ4_0*>(dst), n / QK); break;
            case TensorType::Q4_1: quant_q4_1(xr, reinterpret_cast<BlockQ4_1*>(dst), n / QK); break;
            case TensorType::Q5_0: quant_q5_0(xr, reinterpret_cast<BlockQ5_0*>(dst), n / QK); break;
            case TensorType::Q5_1: quant_q5_1(xr, reinterpret_cast<BlockQ5_1*>(dst), n / QK); break;
            case TensorType::Q8_0: quantize_row_q8_0(xr, dst, n); break;
            case TensorType::Q4_K: quant_k45(xr, reinterpret_cast<BlockQ4_K*>(dst), n / QK_K, 15); break;
            case TensorType::Q5_K: quant_k45(xr, reinterpret_cast<BlockQ5_K*>(dst), n / QK_K, 31); break;
            case TensorType::Q6_K: quant_q6_K(xr, reinterpret_cast<BlockQ6_K*>(dst), n / QK_K); break;
            case TensorType::Q2_K: random_blocks<BlockQ2_K, QK_K>(xr, reinterpret_cast<BlockQ2_K*>(dst), n / QK_K); break;
            case TensorType::Q3_K: random_blocks<BlockQ3_K, QK_K>(xr, reinterpret_cast<BlockQ3_K*>(dst), n / QK_K); break;
            case TensorType::IQ4_NL: random_blocks<BlockIQ4_NL, QK>(xr, reinterpret_cast<BlockIQ4_NL*>(dst), n / QK); break;
            case TensorType::IQ4_XS: random_blocks<BlockIQ4_XS, QK_K>(xr, reinterpret_cast<BlockIQ4_XS*>(dst), n / QK_K); break;
            case TensorType::MXFP4: quant_mxfp4(xr, reinterpret_cast<BlockMXFP4*>(dst), n / QK); break;
            default: break;
        }
    }
    return out;
}

}  // namespace specdec::testing
