// Scalar definitions of the layer operations. They mirror ggml's CPU
// semantics (double accumulation in RMSNorm, iterative theta in RoPE) so that
// hidden states track llama.cpp's closely.
#include "kernels/ops.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/fp16.h"
#include "kernels/attention.h"

namespace specdec::kernels {

void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += (double)(x[i] * x[i]);
    const float scale = 1.0f / std::sqrt((float)(sum / (double)n) + eps);
    if (w) {
        for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
    } else {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
    }
}

void rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p) {
    const float theta_scale = std::pow(p.freq_base, -2.0f / (float)p.n_rot);
    // cos/sin per rotated pair, computed as ggml does: theta multiplied step by step.
    float cs[512], sn[512];
    float theta = (float)pos;
    for (int i = 0; i < p.n_rot / 2; ++i) {
        // As ggml: the factor divides the unscaled angle, then freq_scale applies.
        const float t = p.freq_scale * (p.freq_factors ? theta / p.freq_factors[i] : theta);
        cs[i] = std::cos(t) * p.attn_factor;
        sn[i] = std::sin(t) * p.attn_factor;
        theta *= theta_scale;
    }
    for (int h = 0; h < n_heads; ++h) {
        float* v = x + (int64_t)h * head_dim;
        if (p.neox) {
            const int half = p.n_rot / 2;
            for (int i = 0; i < half; ++i) {
                const float a = v[i], b = v[i + half];
                v[i] = a * cs[i] - b * sn[i];
                v[i + half] = a * sn[i] + b * cs[i];
            }
        } else {
            for (int i = 0; i < p.n_rot / 2; ++i) {
                const float a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * cs[i] - b * sn[i];
                v[2 * i + 1] = a * sn[i] + b * cs[i];
            }
        }
    }
}

void softmax(float* x, int64_t n) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
    if (mx == -std::numeric_limits<float>::infinity()) {
        for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
        return;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float e = x[i] == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(x[i] - mx);
        x[i] = e;
        sum += e;
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void softmax_ggml(float* x, int64_t n) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
    double sum = 0.0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float e[16];
        for (int l = 0; l < 16; ++l) x[i + l] = e[l] = attn_detail::ggml_expf_lane(x[i + l] - mx);
        // _mm512_reduce_add_ps: halves (l, l+8), (l, l+4), (l, l+2), (l, l+1).
        for (int w = 8; w >= 1; w /= 2)
            for (int l = 0; l < w; ++l) e[l] += e[l + w];
        sum += (double)e[0];
    }
    for (; i < n; ++i) {
        x[i] = std::exp(x[i] - mx);
        sum += (double)x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < n; ++j) x[j] *= inv;
}

void softcap_inplace(float* x, float cap, int64_t n) {
    const float inv = 1.0f / cap;
    for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] * inv) * cap;
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        out[i] = (g / (1.0f + std::exp(-g))) * up[i];
    }
}

namespace {
float gelu_tanh(float x) {
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    constexpr float kCoef = 0.044715f;
    return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

// ggml evaluates GELU through a 65536-entry table indexed by the input rounded
// to fp16, holding fp16-rounded outputs; inputs beyond +-10 bypass it. We do
// the same so gemma's FFN matches llama.cpp instead of drifting by fp16 steps.
const std::vector<uint16_t>& gelu_fp16_table() {
    static const std::vector<uint16_t> table = [] {
        std::vector<uint16_t> t(65536);
        for (uint32_t i = 0; i < 65536; ++i) t[i] = fp32_to_fp16(gelu_tanh(fp16_to_fp32((uint16_t)i)));
        return t;
    }();
    return table;
}
}  // namespace

void gelu_mul(const float* gate, const float* up, float* out, int64_t n) {
    const std::vector<uint16_t>& table = gelu_fp16_table();
    for (int64_t i = 0; i < n; ++i) {
        const float x = gate[i];
        float g;
        if (x <= -10.0f) {
            g = 0.0f;
        } else if (x >= 10.0f) {
            g = x;
        } else {
            g = fp16_to_fp32(table[fp32_to_fp16(x)]);
        }
        out[i] = g * up[i];
    }
}

void add_inplace(float* y, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void scale_inplace(float* y, float s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] *= s;
}

}  // namespace specdec::kernels
