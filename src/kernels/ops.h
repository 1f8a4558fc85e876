// Element-wise and row-wise operations of a transformer layer. Each has a
// plain scalar definition here (ops.cpp) that is the reference; vectorised
// variants must match it (see tests/unit/test_ops.cpp).
#pragma once

#include <cstdint>

namespace specdec {
class ThreadPool;
}

namespace specdec::kernels {

// y = x / sqrt(mean(x^2) + eps) * w   (w may be null: no scale). y may alias x.
void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps);

// Rotary position embedding applied in place to n_heads heads of head_dim
// floats (contiguous), rotating the first n_rot dims of each head.
// neox=false: pairs (2i, 2i+1) (llama); neox=true: pairs (i, i + n_rot/2) (qwen2, gemma3).
struct RopeParams {
    int n_rot = 0;
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;  // linear position scaling
    // Per rotated pair i < n_rot / 2, the angle is divided by freq_factors[i]
    // (Llama 3's "llama3" RoPE scaling, stored precomputed as the GGUF tensor
    // rope_freqs.weight); null: no factors.
    const float* freq_factors = nullptr;
    bool neox = false;
};
void rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p);

// In-place softmax over n values; -inf entries get probability 0.
void softmax(float* x, int64_t n);

// out[i] = silu(gate[i]) * up[i]
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// out[i] = gelu_tanh(gate[i]) * up[i]   (gemma's GELU, tanh approximation)
void gelu_mul(const float* gate, const float* up, float* out, int64_t n);

// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);
// y[i] *= s
void scale_inplace(float* y, float s, int64_t n);

}  // namespace specdec::kernels
