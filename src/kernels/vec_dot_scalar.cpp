// Scalar reference dot products: the definition every SIMD kernel is tested
// against. Integer parts are exact; block scales are applied as ggml's generic
// code does (per block, float).
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

float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ4_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK; ++b) {
        int sumi = 0;
        for (int j = 0; j < QK / 2; ++j) {
            sumi += ((x[b].qs[j] & 0xF) - 8) * y[b].qs[j];
            sumi += ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + QK / 2];
        }
        sumf += (float)sumi * fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d);
    }
    return sumf;
}

float vec_dot_q4_1_q8_1(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ4_1*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK; ++b) {
        int sumi = 0;
        for (int j = 0; j < QK / 2; ++j) {
            sumi += (x[b].qs[j] & 0xF) * y[b].qs[j];
            sumi += (x[b].qs[j] >> 4) * y[b].qs[j + QK / 2];
        }
        // min term: m * sum(x_act) = m * s, with s = d_act * sum(q_act)
        sumf += fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d) * (float)sumi +
                fp16_to_fp32(x[b].m) * fp16_to_fp32(y[b].s);
    }
    return sumf;
}

float vec_dot_q5_0_q8_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ5_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK; ++b) {
        const uint32_t qh = load_u32(x[b].qh);
        int sumi = 0;
        for (int j = 0; j < QK / 2; ++j) {
            const int h0 = (int)((qh >> j) & 1u) << 4;
            const int h1 = (int)((qh >> (j + 16)) & 1u) << 4;
            sumi += (((x[b].qs[j] & 0xF) | h0) - 16) * y[b].qs[j];
            sumi += (((x[b].qs[j] >> 4) | h1) - 16) * y[b].qs[j + QK / 2];
        }
        sumf += (float)sumi * fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d);
    }
    return sumf;
}

float vec_dot_q5_1_q8_1(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ5_1*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK; ++b) {
        const uint32_t qh = load_u32(x[b].qh);
        int sumi = 0;
        for (int j = 0; j < QK / 2; ++j) {
            const int h0 = (int)((qh >> j) & 1u) << 4;
            const int h1 = (int)((qh >> (j + 16)) & 1u) << 4;
            sumi += ((x[b].qs[j] & 0xF) | h0) * y[b].qs[j];
            sumi += ((x[b].qs[j] >> 4) | h1) * y[b].qs[j + QK / 2];
        }
        sumf += fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d) * (float)sumi +
                fp16_to_fp32(x[b].m) * fp16_to_fp32(y[b].s);
    }
    return sumf;
}

float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ8_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK; ++b) {
        int sumi = 0;
        for (int j = 0; j < QK; ++j) sumi += x[b].qs[j] * y[b].qs[j];
        sumf += (float)sumi * fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d);
    }
    return sumf;
}

float vec_dot_q4_K_q8_K(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ4_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK_K; ++b) {
        int sumi = 0;   // sum_j sc_j * dot(q_j, y_j) over the 8 sub-blocks of 32
        int summs = 0;  // sum_j m_j * sum(y_j): the min term, from the bsums
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            get_scale_min_k4(j, x[b].scales, &sc, &m);
            const uint8_t* q = x[b].qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            const int8_t* yq = y[b].qs + 32 * j;
            int dot = 0;
            for (int l = 0; l < 32; ++l) dot += ((q[l] >> shift) & 0xF) * yq[l];
            sumi += sc * dot;
            summs += m * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        }
        const float d = fp16_to_fp32(x[b].d) * y[b].d;
        const float dmin = fp16_to_fp32(x[b].dmin) * y[b].d;
        sumf += d * (float)sumi - dmin * (float)summs;
    }
    return sumf;
}

float vec_dot_q5_K_q8_K(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ5_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK_K; ++b) {
        int sumi = 0, summs = 0;
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            get_scale_min_k4(j, x[b].scales, &sc, &m);
            const uint8_t* q = x[b].qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            const int8_t* yq = y[b].qs + 32 * j;
            int dot = 0;
            for (int l = 0; l < 32; ++l) {
                const int hi = ((x[b].qh[l] >> j) & 1) << 4;
                dot += (((q[l] >> shift) & 0xF) | hi) * yq[l];
            }
            sumi += sc * dot;
            summs += m * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        }
        const float d = fp16_to_fp32(x[b].d) * y[b].d;
        const float dmin = fp16_to_fp32(x[b].dmin) * y[b].d;
        sumf += d * (float)sumi - dmin * (float)summs;
    }
    return sumf;
}

float vec_dot_q6_K_q8_K(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ6_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK_K; ++b) {
        int sumi = 0;
        for (int half = 0; half < 2; ++half) {
            const uint8_t* ql = x[b].ql + 64 * half;
            const uint8_t* qh = x[b].qh + 32 * half;
            const int8_t* sc = x[b].scales + 8 * half;
            const int8_t* yq = y[b].qs + 128 * half;
            // four 32-element quarters; quarter k uses sc[2k] then sc[2k+1]
            int dots[8] = {};
            for (int l = 0; l < 32; ++l) {
                const int q0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                const int g = l / 16;
                dots[0 + g] += q0 * yq[l];
                dots[2 + g] += q1 * yq[l + 32];
                dots[4 + g] += q2 * yq[l + 64];
                dots[6 + g] += q3 * yq[l + 96];
            }
            for (int k = 0; k < 8; ++k) sumi += sc[k] * dots[k];
        }
        sumf += fp16_to_fp32(x[b].d) * y[b].d * (float)sumi;
    }
    return sumf;
}

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
    return k;
}

}  // namespace

const KernelTable& scalar_kernel_table() {
    static const KernelTable table = make_scalar_table();
    return table;
}

}  // namespace specdec::kernels
