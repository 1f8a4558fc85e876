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
    // Multiplies cos and sin (ggml's attn_factor / mscale): phi3 LongRoPE.
    float attn_factor = 1.0f;
    bool neox = false;
};
void rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p);

// In-place softmax over n values; -inf entries get probability 0.
void softmax(float* x, int64_t n);

// ggml_soft_max (no mask, scale 1) as ggml's CPU backend computes it when
// built with AVX-512: max; e = ggml_v_expf(x - max) over 16-value chunks,
// each chunk's sum a 16-lane tree added to a double, the tail with expf;
// then x *= (float)(1 / sum). For decisions taken on the probabilities
// themselves (an MoE router's top-k), where llama.cpp's order matters.
void softmax_ggml(float* x, int64_t n);

// x[i] = cap * tanh(x[i] / cap), as ggml's scale, tanh, scale: gemma2's
// soft-capping of attention scores and logits. cap > 0.
void softcap_inplace(float* x, float cap, int64_t n);

// out[i] = silu(gate[i]) * up[i]
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// out[i] = gelu_tanh(gate[i]) * up[i]   (gemma's GELU, tanh approximation)
void gelu_mul(const float* gate, const float* up, float* out, int64_t n);

// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);
// y[i] *= s
void scale_inplace(float* y, float s, int64_t n);

}  // namespace specdec::kernels
