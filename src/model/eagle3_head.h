// An EAGLE-3 draft head as released, loaded for one target model.
//
// Formats (see docs and design/eagle3-training.md):
//  - Hugging Face layout: a directory with config.json (architectures
//    ["LlamaForCausalLMEagle3"], draft_vocab_size, optional target_hidden_size)
//    and model.safetensors (fc.weight, midlayer.*, norm.weight, lm_head.weight,
//    d2t, t2d);
//  - vllm speculators: config.json with speculators_model_type "eagle3",
//    transformer_layer_config (the layer's llama config),
//    eagle_aux_hidden_state_layer_ids, norm_before_residual; tensors layers.0.*;
//  - llama.cpp's `eagle3` GGUF (what its convert_hf_to_gguf.py writes):
//    eagle3.target_layers, eagle3.target_hidden_size, fc / blk.0.* /
//    output_norm / output tensors, d2t as absolute target ids, and q/k rows
//    permuted for llama.cpp's interleaved RoPE (so the forward rotates pairs
//    (2i, 2i + 1) for it instead of (i, i + head_dim/2)).
// A pickle checkpoint (pytorch_model.bin) is refused with the command that
// converts it. Everything the head reads from the target (feature width,
// embedding width, vocabulary, layer ids) is checked against the target here,
// so a head made for another model is refused with both sizes named.
//
// Tensors stay in the mapped file (safetensors: F32, F16 or BF16 matrices;
// GGUF: any type the engine has a matmul kernel for) and run on the engine's
// matmul as they are; norm vectors and d2t are copied.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "kernels/matmul.h"

namespace specdec::model {

// What the head must fit.
struct Eagle3Target {
    std::string path;   // for messages
    int n_layer = 0;
    int n_embd = 0;
    int n_vocab = 0;
};

// The target layers whose inputs a head reads when its config names none:
// 2, L/2 and L-3, low to high (EAGLE-3's choice, and what training dumps).
inline std::vector<int> eagle3_default_feature_layers(int n_layer) { return {2, n_layer / 2, n_layer - 3}; }

struct Eagle3Config {
    std::string format;        // "hf", "speculators" or "gguf"
    int hidden = 0;            // H: the head's width
    int target_hidden = 0;     // width of one feature row (the target's n_embd)
    int n_head = 0, n_head_kv = 0, head_dim = 0;
    int n_ff = 0;
    int vocab = 0;             // target vocabulary the head was made for
    int draft_vocab = 0;
    float norm_eps = 1e-6f;
    float rope_theta = 10000.0f;
    // Residual after attention: hidden_norm(g) instead of g (speculators option).
    bool norm_before_residual = false;
    // RoPE pairs (i, i + head_dim/2) as Hugging Face's rotate_half (true), or
    // (2i, 2i + 1) for q/k rows permuted as llama.cpp's GGUF stores them.
    bool rope_neox = true;
    // Target layers whose input residual stream is read, low -> high (default
    // 2, L/2, L-3); L means the last layer's output (the final norm's input).
    std::vector<int> feature_layers;
    int q_dim() const { return n_head * head_dim; }
    int kv_dim() const { return n_head_kv * head_dim; }
};

struct Eagle3Weights {
    kernels::WeightMatrix fc;                // (H, 3 * target_hidden)
    const float* input_norm = nullptr;       // (H) on the token embedding
    const float* hidden_norm = nullptr;      // (H) on g
    kernels::WeightMatrix wq, wk, wv;        // (q_dim | kv_dim, 2H)
    kernels::WeightMatrix wo;                // (H, q_dim)
    const float* post_attn_norm = nullptr;   // (H)
    kernels::WeightMatrix w_gate, w_up;      // (n_ff, H)
    kernels::WeightMatrix w_down;            // (H, n_ff)
    const float* out_norm = nullptr;         // (H) "norm"
    kernels::WeightMatrix lm_head;           // (draft_vocab, H)
};

class Eagle3Head {
public:
    // path: the head's directory, its config.json or its model.safetensors,
    // or an eagle3 GGUF file.
    // Throws specdec::Error on a bad, foreign or mismatched head.
    static std::unique_ptr<Eagle3Head> load(const std::string& path, const Eagle3Target& target);

    const Eagle3Config& config() const { return cfg_; }
    const Eagle3Weights& weights() const { return w_; }
    const std::string& dir() const { return dir_; }
    // (draft_vocab) target id of each draft id (d2t offsets applied).
    const std::vector<int32_t>& draft_to_target() const { return d2t_; }
    int32_t d2t_token(int32_t draft_id) const { return d2t_[(size_t)draft_id]; }

private:
    Eagle3Config cfg_;
    Eagle3Weights w_;
    std::string dir_;
    std::unique_ptr<io::SafetensorsFile> file_;  // the Hugging Face and speculators layouts
    std::unique_ptr<io::GgufFile> gguf_;         // llama.cpp's eagle3 GGUF
    std::vector<int32_t> d2t_;
    std::vector<std::unique_ptr<float[]>> owned_;  // norm vectors as float; misaligned matrices
    // Shared by every format once its config and weights are read: the
    // checks against the target, and d2t from absolute target ids.
    void check_fit(const Eagle3Target& target, const std::string& where) const;
    void set_draft_to_target(const std::vector<int64_t>& ids, const Eagle3Target& target, const std::string& where);
    static std::unique_ptr<Eagle3Head> load_gguf(const std::string& path, const Eagle3Target& target);
    friend struct Eagle3Binder;
    friend struct Eagle3GgufBinder;
};

}  // namespace specdec::model
