// Hyper-parameters of a transformer, read from GGUF metadata. One struct for
// every supported architecture; the per-architecture switches are plain fields
// so the forward pass reads as data, not as a class hierarchy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace specdec::io {
class GgufFile;
}

namespace specdec::model {

enum class Arch { Llama, Qwen2, Qwen3, Qwen3Moe, Qwen35, Qwen35Moe, Gemma2, Gemma3, Phi3, SmolLM3, Olmo2 };

// RMS norms of q and k (after the projections, before RoPE).
enum class QkNorm {
    None,
    PerHead,  // gemma3, qwen3: each head on its own, one (head_dim) weight shared by the heads
    Full,     // olmo2: all of q (q_dim weight) and all of k (kv_dim weight) at once
};

struct ModelConfig {
    Arch arch = Arch::Llama;
    std::string arch_name;     // as in general.architecture
    std::string name;          // general.name
    int n_layer = 0;
    int n_embd = 0;
    int n_ff = 0;
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim_k = 0;        // key/query head size
    int head_dim_v = 0;        // value head size
    int n_vocab = 0;
    int n_ctx_train = 0;
    float norm_eps = 1e-5f;
    // RoPE
    int n_rot = 0;
    bool rope_neox = false;
    float rope_freq_base = 10000.0f;
    float rope_freq_scale = 1.0f;
    float rope_freq_base_swa = 10000.0f;  // gemma2/3 local layers
    float rope_freq_scale_swa = 1.0f;     // gemma2/3 local layers
    // Multiplies the rotated cos/sin, so q and k (phi3's LongRoPE: its
    // rope.scaling.attn_factor, sqrt(1 + ln(ctx / orig_ctx) / ln(orig_ctx))).
    float rope_attn_factor = 1.0f;
    // phi3 LongRoPE: the model's pre-extension context. A KV cache longer than
    // this uses rope_factors_long, else rope_factors_short (llama.cpp decides
    // the same way, by its context size per sequence).
    int n_ctx_orig = 0;
    // Attention
    float attn_scale = 0.0f;   // multiplier on q.k (1/sqrt(head_dim) by default)
    bool q_prescaled = false;  // gemma2/3, phi3: q is multiplied by attn_scale before the product, not the scores
    float attn_softcap = 0.0f; // gemma2: scores become cap * tanh(score / cap) before the softmax; 0: none
    float final_softcap = 0.0f;  // gemma2: the same on the logits
    int sliding_window = 0;    // 0: none
    std::vector<bool> layer_is_swa;  // (n_layer) true: sliding-window layer
    std::vector<bool> layer_no_rope; // (n_layer) true: no RoPE in this layer (smollm3's NoPE layers)
    // Architecture switches
    bool qkv_bias = false;         // qwen2
    QkNorm qk_norm = QkNorm::None;
    bool pre_norms = true;         // norm before attention and FFN (all but olmo2)
    bool post_norms = false;       // gemma3, olmo2: norm after attention and FFN outputs
    bool gelu_ffn = false;         // gemma2/3: GELU gate instead of SiLU
    float embd_scale = 1.0f;       // gemma2/3: sqrt(n_embd)
    // Mixture of experts (qwen3moe): every layer's FFN is n_expert experts of
    // width n_ff_exp, of which each row uses the n_expert_used its router
    // ranks first (softmax over the router logits, top-k, weights renormalised
    // to sum 1). n_expert == 0: a dense FFN of width n_ff.
    int n_expert = 0;
    int n_expert_used = 0;
    int n_ff_exp = 0;
    // qwen35moe: a shared expert beside the routed ones, in every layer, whose
    // output is scaled by a sigmoid gate of its own. 0: none.
    int n_ff_shexp = 0;
    // Qwen3.5: gated DeltaNet (linear attention) layers between the
    // full-attention ones. A recurrent layer's state per sequence is a causal
    // convolution window over its q/k/v inputs and, per value head, a
    // (ssm_d_state x ssm_d_state) matrix (model/delta_net.h). Its full-attention
    // layers project a gate beside each query head (attn_out_gate).
    std::vector<bool> layer_is_recurrent;  // (n_layer)
    int ssm_d_conv = 0;      // convolution width
    int ssm_d_state = 0;     // head size of q, k and v
    int ssm_n_k_heads = 0;   // q/k heads (ssm.group_count)
    int ssm_n_v_heads = 0;   // v heads (ssm.time_step_rank), a multiple of the q/k heads
    bool attn_out_gate = false;

    int ssm_key_dim() const { return ssm_n_k_heads * ssm_d_state; }
    int ssm_value_dim() const { return ssm_n_v_heads * ssm_d_state; }
    int ssm_conv_dim() const { return 2 * ssm_key_dim() + ssm_value_dim(); }
    // Floats of one recurrent layer's state: the window, then the matrices.
    size_t ssm_state_floats() const {
        return (size_t)(ssm_d_conv - 1) * ssm_conv_dim() + (size_t)ssm_n_v_heads * ssm_d_state * ssm_d_state;
    }
    bool has_recurrent_layers() const { return ssm_d_state > 0; }

    int kv_dim() const { return n_head_kv * head_dim_k; }
    int v_dim() const { return n_head_kv * head_dim_v; }
    int q_dim() const { return n_head * head_dim_k; }
};

// Reads and validates the config; throws specdec::Error naming the file and key.
ModelConfig read_model_config(const io::GgufFile& f);

}  // namespace specdec::model
