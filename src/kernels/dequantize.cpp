// Block -> float conversion of every supported weight type (used for
// embeddings lookups and as the independent check of the dot kernels).
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/fp16.h"
#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"

namespace specdec::kernels {

namespace {

inline uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

void deq_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, y += QK) {
        const float d = fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK / 2; ++j) {
            y[j] = (float)((x[b].qs[j] & 0xF) - 8) * d;
            y[j + QK / 2] = (float)((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

void deq_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, y += QK) {
        const float d = fp16_to_fp32(x[b].d), m = fp16_to_fp32(x[b].m);
        for (int j = 0; j < QK / 2; ++j) {
            y[j] = (float)(x[b].qs[j] & 0xF) * d + m;
            y[j + QK / 2] = (float)(x[b].qs[j] >> 4) * d + m;
        }
    }
}

void deq_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, y += QK) {
        const float d = fp16_to_fp32(x[b].d);
        const uint32_t qh = load_u32(x[b].qh);
        for (int j = 0; j < QK / 2; ++j) {
            const int h0 = (int)((qh >> j) & 1u) << 4;
            const int h1 = (int)((qh >> (j + 16)) & 1u) << 4;
            y[j] = (float)(((x[b].qs[j] & 0xF) | h0) - 16) * d;
            y[j + QK / 2] = (float)(((x[b].qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

void deq_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, y += QK) {
        const float d = fp16_to_fp32(x[b].d), m = fp16_to_fp32(x[b].m);
        const uint32_t qh = load_u32(x[b].qh);
        for (int j = 0; j < QK / 2; ++j) {
            const int h0 = (int)((qh >> j) & 1u) << 4;
            const int h1 = (int)((qh >> (j + 16)) & 1u) << 4;
            y[j] = (float)((x[b].qs[j] & 0xF) | h0) * d + m;
            y[j + QK / 2] = (float)((x[b].qs[j] >> 4) | h1) * d + m;
        }
    }
}

void deq_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, y += QK) {
        const float d = fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK; ++j) y[j] = (float)x[b].qs[j] * d;
    }
}

void deq_q4_K(const BlockQ4_K* x, float* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b) {
        const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
        for (int j = 0; j < 8; ++j, y += 32) {
            uint8_t sc, m;
            get_scale_min_k4(j, x[b].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            const uint8_t* q = x[b].qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            for (int l = 0; l < 32; ++l) y[l] = d1 * (float)((q[l] >> shift) & 0xF) - m1;
        }
    }
}

void deq_q5_K(const BlockQ5_K* x, float* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b) {
        const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
        for (int j = 0; j < 8; ++j, y += 32) {
            uint8_t sc, m;
            get_scale_min_k4(j, x[b].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            const uint8_t* q = x[b].qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            for (int l = 0; l < 32; ++l) {
                const int hi = ((x[b].qh[l] >> j) & 1) << 4;
                y[l] = d1 * (float)(((q[l] >> shift) & 0xF) | hi) - m1;
            }
        }
    }
}

void deq_q6_K(const BlockQ6_K* x, float* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        // Each half of 128: element l (<32) of quarter k takes its low nibble
        // from ql[l] (k=0,2) or ql[l+32] (k=1,3), low (k<2) or high (k>=2),
        // and its 2 high bits from bits 2k..2k+1 of qh[l].
        for (int half = 0; half < 2; ++half, y += 128) {
            const uint8_t* ql = x[b].ql + 64 * half;
            const uint8_t* qh = x[b].qh + 32 * half;
            const int8_t* sc = x[b].scales + 8 * half;
            for (int l = 0; l < 32; ++l) {
                const int g = l / 16;
                const int q0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * (float)sc[g] * (float)q0;
                y[l + 32] = d * (float)sc[2 + g] * (float)q1;
                y[l + 64] = d * (float)sc[4 + g] * (float)q2;
                y[l + 96] = d * (float)sc[6 + g] * (float)q3;
            }
        }
    }
}

void deq_q2_K(const BlockQ2_K* x, float* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, y += QK_K) {
        const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
        for (int e = 0; e < QK_K; ++e) {
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            const int q = (x[b].qs[32 * h + l] >> (2 * k)) & 3;
            const uint8_t sc = x[b].scales[e / 16];
            y[e] = d * (float)(sc & 0xF) * (float)q - dmin * (float)(sc >> 4);
        }
    }
}

void deq_q3_K(const BlockQ3_K* x, float* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, y += QK_K) {
        const float d = fp16_to_fp32(x[b].d);
        for (int e = 0; e < QK_K; ++e) {
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            int q = (x[b].qs[32 * h + l] >> (2 * k)) & 3;
            if (!((x[b].hmask[l] >> (4 * h + k)) & 1)) q -= 4;
            y[e] = d * (float)q3_K_scale(x[b].scales, e / 16) * (float)q;
        }
    }
}

void deq_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, y += QK) {
        const float d = fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK / 2; ++j) {
            y[j] = d * (float)kIq4nlValues[x[b].qs[j] & 0xF];
            y[j + QK / 2] = d * (float)kIq4nlValues[x[b].qs[j] >> 4];
        }
    }
}

// IQ4_XS: (d * scale) * value, the float order of ggml's dequantize_row_iq4_xs.
void deq_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int s = 0; s < QK_K / 32; ++s, y += 32) {
            const float dl = d * (float)iq4_xs_scale(x[b], s);
            const uint8_t* qs = x[b].qs + 16 * s;
            for (int j = 0; j < 16; ++j) {
                y[j] = dl * (float)kIq4nlValues[qs[j] & 0xF];
                y[j + 16] = dl * (float)kIq4nlValues[qs[j] >> 4];
            }
        }
    }
}

void deq_mxfp4(const BlockMXFP4* x, float* y, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b, y += QK) {
        const float d = e8m0_to_fp32_half(x[b].e);
        for (int j = 0; j < QK / 2; ++j) {
            y[j] = (float)kMxfp4Values[x[b].qs[j] & 0xF] * d;
            y[j + QK / 2] = (float)kMxfp4Values[x[b].qs[j] >> 4] * d;
        }
    }
}

}  // namespace

bool is_supported_weight_type(TensorType type) {
    switch (type) {
        case TensorType::F32:
        case TensorType::F16:
        case TensorType::BF16:
        case TensorType::Q4_0:
        case TensorType::Q4_1:
        case TensorType::Q5_0:
        case TensorType::Q5_1:
        case TensorType::Q8_0:
        case TensorType::Q4_K:
        case TensorType::Q5_K:
        case TensorType::Q6_K:
        case TensorType::Q2_K:
        case TensorType::Q3_K:
        case TensorType::IQ4_NL:
        case TensorType::IQ4_XS:
        case TensorType::MXFP4: return true;
        default: return false;
    }
}

void dequantize_row(TensorType type, const void* src, float* dst, int64_t n) {
    const int64_t be = tensor_type_traits(type).block_elems;
    if (!is_supported_weight_type(type) || n % be != 0) {
        throw std::invalid_argument("dequantize_row: unsupported type " +
                                    std::string(tensor_type_name(type)) + " or n=" +
                                    std::to_string(n) + " not a multiple of its block");
    }
    const int64_t nb = n / be;
    switch (type) {
        case TensorType::F32: std::memcpy(dst, src, (size_t)n * 4); break;
        case TensorType::F16: {
            const auto* s = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
            break;
        }
        case TensorType::BF16: {
            const auto* s = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
            break;
        }
        case TensorType::Q4_0: deq_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb); break;
        case TensorType::Q4_1: deq_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb); break;
        case TensorType::Q5_0: deq_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb); break;
        case TensorType::Q5_1: deq_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb); break;
        case TensorType::Q8_0: deq_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb); break;
        case TensorType::Q4_K: deq_q4_K(static_cast<const BlockQ4_K*>(src), dst, nb); break;
        case TensorType::Q5_K: deq_q5_K(static_cast<const BlockQ5_K*>(src), dst, nb); break;
        case TensorType::Q6_K: deq_q6_K(static_cast<const BlockQ6_K*>(src), dst, nb); break;
        case TensorType::Q2_K: deq_q2_K(static_cast<const BlockQ2_K*>(src), dst, nb); break;
        case TensorType::Q3_K: deq_q3_K(static_cast<const BlockQ3_K*>(src), dst, nb); break;
        case TensorType::IQ4_NL: deq_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, nb); break;
        case TensorType::IQ4_XS: deq_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, nb); break;
        case TensorType::MXFP4: deq_mxfp4(static_cast<const BlockMXFP4*>(src), dst, nb); break;
        default: break;
    }
}

}  // namespace specdec::kernels
