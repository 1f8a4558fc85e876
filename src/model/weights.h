// Views of a model's weights inside the GGUF file's bytes (io::MappedFile: a
// huge-page copy of the file, or its mapping). Nothing else is copied except
// small norm vectors stored in a non-F32 type.
#pragma once

#include <memory>
#include <vector>

#include "kernels/matmul.h"
#include "model/config.h"

namespace specdec::io {
class GgufFile;
}

namespace specdec::model {

// The experts of one MoE projection, stored as one 3-D GGUF tensor
// {n_in, n_out, n_expert}: expert e's matrix is n_out rows starting
// e * n_out rows in. Only the experts a row selects are ever read.
struct ExpertMatrices {
    kernels::WeightMatrix first;  // expert 0
    int n_expert = 0;
    kernels::WeightMatrix expert(int e) const {
        kernels::WeightMatrix m = first;
        m.data = static_cast<const uint8_t*>(first.data) + (size_t)e * first.n_out * first.row_bytes;
        return m;
    }
};

struct LayerWeights {
    const float* attn_norm = nullptr;       // (n_embd)   null: no pre-norm (olmo2)
    // (q_dim, n_embd) (kv_dim, n_embd) x2 (n_embd, q_dim). phi3: wq, wk, wv
    // are views of the rows of one fused attn_qkv tensor.
    kernels::WeightMatrix wq, wk, wv, wo;
    const float* bq = nullptr;              // (q_dim)   qwen2
    const float* bk = nullptr;              // (kv_dim)  qwen2
    const float* bv = nullptr;              // (v_dim)   qwen2
    const float* q_norm = nullptr;          // (head_dim) gemma3, qwen3; (q_dim) olmo2
    const float* k_norm = nullptr;          // (head_dim) gemma3, qwen3; (kv_dim) olmo2
    const float* post_attn_norm = nullptr;  // (n_embd)  gemma3, olmo2
    const float* ffn_norm = nullptr;        // (n_embd)   null: no pre-norm (olmo2)
    // Dense FFN (n_expert == 0). phi3: w_gate and w_up are the two halves of
    // one ffn_up tensor of 2 * n_ff rows (gate first, as ggml_swiglu splits it).
    kernels::WeightMatrix w_gate, w_up;     // (n_ff, n_embd)
    kernels::WeightMatrix w_down;           // (n_embd, n_ff)
    // MoE FFN (qwen3moe).
    kernels::WeightMatrix router;           // (n_expert, n_embd) ffn_gate_inp
    ExpertMatrices gate_exps, up_exps;      // n_expert x (n_ff_exp, n_embd)
    ExpertMatrices down_exps;               // n_expert x (n_embd, n_ff_exp)
    // Shared expert (qwen35moe): always run, scaled by sigmoid(shexp_gate . x).
    kernels::WeightMatrix shexp_gate;       // (1, n_embd) ffn_gate_inp_shexp
    kernels::WeightMatrix w_gate_shexp, w_up_shexp;  // (n_ff_shexp, n_embd)
    kernels::WeightMatrix w_down_shexp;     // (n_embd, n_ff_shexp)
    const float* post_ffn_norm = nullptr;   // (n_embd)  gemma3, olmo2
    // Gated DeltaNet (qwen35's recurrent layers; wq..wo unbound there).
    kernels::WeightMatrix ssm_in;           // (conv_dim, n_embd) attn_qkv: q, k, v before the convolution
    kernels::WeightMatrix ssm_z;            // (value_dim, n_embd) attn_gate: the output gate
    kernels::WeightMatrix ssm_beta;         // (n_v_heads, n_embd) write strength, before its sigmoid
    kernels::WeightMatrix ssm_alpha;        // (n_v_heads, n_embd) decay, before dt bias and softplus
    kernels::WeightMatrix ssm_out;          // (n_embd, value_dim)
    const float* ssm_conv = nullptr;        // (conv_dim, d_conv) causal convolution, oldest tap first
    const float* ssm_dt_bias = nullptr;     // (n_v_heads)
    const float* ssm_a = nullptr;           // (n_v_heads) -exp(A_log): decay per unit of softplus
    const float* ssm_norm = nullptr;        // (d_state) gated RMS norm of each head's output
};

struct ModelWeights {
    kernels::WeightMatrix tok_embd;   // (n_vocab, n_embd): rows are token embeddings
    const float* output_norm = nullptr;
    kernels::WeightMatrix output;     // (n_vocab, n_embd); tok_embd when tied
    const float* rope_freqs = nullptr;  // (n_rot / 2) RoPE frequency factors (Llama 3.x), or null
    // phi3 LongRoPE (n_rot / 2 each), or null: config.n_ctx_orig picks one.
    const float* rope_factors_long = nullptr;
    const float* rope_factors_short = nullptr;
    std::vector<LayerWeights> layers;
    std::vector<std::unique_ptr<float[]>> owned;  // dequantized small vectors
};

// Binds every tensor the config needs, checking names, shapes and types.
ModelWeights bind_weights(const io::GgufFile& f, const ModelConfig& c);

// Weight bytes one decoded token reads: every layer matrix and the LM head
// once (of an MoE layer, the router and n_expert_used experts), plus its own
// row of the embedding table (norm vectors are noise).
// Over a measured read bandwidth this is the decode roofline.
size_t weight_bytes_per_token(const ModelWeights& w, const ModelConfig& c);
// The distinct types of the matrices matmul runs (layers and LM head), in order of first use.
std::vector<TensorType> matmul_weight_types(const ModelWeights& w);

}  // namespace specdec::model
