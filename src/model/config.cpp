#include "model/config.h"

#include <cmath>

#include "core/error.h"
#include "io/gguf.h"

namespace specdec::model {

namespace {

// A mixture-of-experts FFN in every layer (qwen3moe, qwen35moe).
void read_experts(const io::GgufFile& f, ModelConfig& c) {
    const std::string& a = c.arch_name;
    c.n_expert = (int)f.get_int(a + ".expert_count");
    c.n_expert_used = (int)f.get_int(a + ".expert_used_count");
    SPECDEC_CHECK(c.n_expert > 0 && c.n_expert_used > 0 && c.n_expert_used <= c.n_expert, "model '", f.path(), "': ",
                  c.n_expert_used, " of ", c.n_expert, " experts per token is not valid");
    // llama.cpp's fallback when the file does not give the expert width.
    c.n_ff_exp = (int)f.get_int(a + ".expert_feed_forward_length", c.n_ff / c.n_expert_used);
    SPECDEC_CHECK(c.n_ff_exp > 0, "model '", f.path(), "': non-positive expert_feed_forward_length");
}

// Qwen3.5 (llama.cpp's qwen35): three gated DeltaNet layers, then one gated
// full-attention layer (per-head q/k norms, partial NeoX-type rotation).
void read_qwen35(const io::GgufFile& f, ModelConfig& c) {
    const std::string& a = c.arch_name;
    c.rope_neox = true;
    c.qk_norm = QkNorm::PerHead;
    c.attn_out_gate = true;
    c.ssm_d_conv = (int)f.get_int(a + ".ssm.conv_kernel");
    c.ssm_d_state = (int)f.get_int(a + ".ssm.state_size");
    c.ssm_n_k_heads = (int)f.get_int(a + ".ssm.group_count");
    c.ssm_n_v_heads = (int)f.get_int(a + ".ssm.time_step_rank");
    const int64_t d_inner = f.get_int(a + ".ssm.inner_size");
    SPECDEC_CHECK(c.ssm_d_conv >= 2 && c.ssm_d_state > 0 && c.ssm_n_k_heads > 0 && c.ssm_n_v_heads > 0 &&
                      c.ssm_n_v_heads % c.ssm_n_k_heads == 0 && d_inner == c.ssm_value_dim(),
                  "model '", f.path(), "': inconsistent ssm metadata (conv_kernel ", c.ssm_d_conv, ", state_size ",
                  c.ssm_d_state, ", group_count ", c.ssm_n_k_heads, ", time_step_rank ", c.ssm_n_v_heads,
                  ", inner_size ", d_inner, ")");
    if (const io::GgufValue* rec = f.find(a + ".attention.recurrent_layers")) {
        SPECDEC_CHECK(rec->type == io::GgufType::ARRAY && (int)rec->ints.size() >= c.n_layer, "model '", f.path(),
                      "': ", a, ".attention.recurrent_layers must hold one flag per layer");
        for (int il = 0; il < c.n_layer; ++il) c.layer_is_recurrent[il] = rec->ints[il] != 0;
    } else {
        const int64_t interval = f.get_int(a + ".full_attention_interval", 4);
        SPECDEC_CHECK(interval > 0, "model '", f.path(), "': invalid full_attention_interval ", interval);
        for (int il = 0; il < c.n_layer; ++il) c.layer_is_recurrent[il] = (il + 1) % interval != 0;
    }
    // M-RoPE in llama.cpp's interleaved layout: each rotated pair takes its
    // angle from one of the time, height, width and extra positions. A text
    // token has the same time, height and width position, so every pair those
    // sections cover rotates as plain NeoX RoPE; a pair left to the extra
    // section would not, and is refused rather than guessed.
    if (const io::GgufValue* sec = f.find(a + ".rope.dimension_sections")) {
        SPECDEC_CHECK(sec->type == io::GgufType::ARRAY && sec->ints.size() >= 3, "model '", f.path(), "': ", a,
                      ".rope.dimension_sections must hold 4 sizes");
        const int64_t s0 = sec->ints[0], s1 = sec->ints[1], s2 = sec->ints[2];
        const int64_t s3 = sec->ints.size() > 3 ? sec->ints[3] : 0;
        const int64_t dims = s0 + s1 + s2 + s3;
        for (int pair = 0; dims > 0 && pair < c.n_rot / 2; ++pair) {
            const int64_t sector = pair % dims;
            const bool thw = (sector % 3 == 0 && sector < 3 * s0) || (sector % 3 == 1 && sector < 3 * s1) ||
                             (sector % 3 == 2 && sector < 3 * s2);
            SPECDEC_CHECK(thw, "model '", f.path(), "': rope.dimension_sections [", s0, ", ", s1, ", ", s2, ", ", s3,
                          "] leave rotated pair ", pair, " to the extra position, which text input does not have");
        }
    }
}

}  // namespace

ModelConfig read_model_config(const io::GgufFile& f) {
    ModelConfig c;
    c.arch_name = f.get_string("general.architecture");
    const std::string& a = c.arch_name;
    if (a == "llama") {
        c.arch = Arch::Llama;
    } else if (a == "qwen2") {
        c.arch = Arch::Qwen2;
    } else if (a == "qwen3") {
        c.arch = Arch::Qwen3;
    } else if (a == "qwen3moe") {
        c.arch = Arch::Qwen3Moe;
    } else if (a == "qwen35") {
        c.arch = Arch::Qwen35;
    } else if (a == "qwen35moe") {
        c.arch = Arch::Qwen35Moe;
    } else if (a == "gemma2") {
        c.arch = Arch::Gemma2;
    } else if (a == "gemma3") {
        c.arch = Arch::Gemma3;
    } else if (a == "phi3") {
        c.arch = Arch::Phi3;
    } else if (a == "smollm3") {
        c.arch = Arch::SmolLM3;
    } else if (a == "olmo2") {
        c.arch = Arch::Olmo2;
    } else {
        throw Error("model '" + f.path() + "': architecture '" + a +
                    "' is not supported (supported: llama, qwen2, qwen3, qwen3moe, qwen35, qwen35moe, gemma2, gemma3, phi3, smollm3, olmo2)");
    }
    c.name = f.get_string("general.name", a);
    c.n_layer = (int)f.get_int(a + ".block_count");
    // Multi-token-prediction blocks (Qwen3.5's MTP head) are stored after the
    // model's own layers and are not part of its forward pass.
    c.n_layer -= (int)f.get_int(a + ".nextn_predict_layers", 0);
    c.n_embd = (int)f.get_int(a + ".embedding_length");
    c.n_ff = (int)f.get_int(a + ".feed_forward_length");
    c.n_head = (int)f.get_int(a + ".attention.head_count");
    c.n_head_kv = (int)f.get_int(a + ".attention.head_count_kv", c.n_head);
    SPECDEC_CHECK(c.n_layer > 0 && c.n_embd > 0 && c.n_ff > 0 && c.n_head > 0 && c.n_head_kv > 0,
                  "model '", f.path(), "': non-positive dimensions in metadata");
    SPECDEC_CHECK(c.n_head % c.n_head_kv == 0, "model '", f.path(), "': head_count ", c.n_head,
                  " is not a multiple of head_count_kv ", c.n_head_kv);
    c.head_dim_k = (int)f.get_int(a + ".attention.key_length", c.n_embd / c.n_head);
    c.head_dim_v = (int)f.get_int(a + ".attention.value_length", c.head_dim_k);
    SPECDEC_CHECK(c.head_dim_k == c.head_dim_v, "model '", f.path(),
                  "': different key and value head sizes are not supported");
    c.n_ctx_train = (int)f.get_int(a + ".context_length", 2048);
    c.norm_eps = (float)f.get_float(a + ".attention.layer_norm_rms_epsilon", 1e-5);
    c.n_rot = (int)f.get_int(a + ".rope.dimension_count", c.head_dim_k);
    SPECDEC_CHECK(c.n_rot > 0 && c.n_rot <= c.head_dim_k && c.n_rot % 2 == 0 && c.n_rot <= 1024,
                  "model '", f.path(), "': invalid rope.dimension_count ", c.n_rot);
    c.rope_freq_base = (float)f.get_float(a + ".rope.freq_base", 10000.0);
    const std::string scaling = f.get_string(a + ".rope.scaling.type", "none");
    if (scaling == "linear") {
        const double factor = f.get_float(a + ".rope.scaling.factor", 1.0);
        SPECDEC_CHECK(factor > 0, "model '", f.path(), "': invalid rope scaling factor");
        c.rope_freq_scale = (float)(1.0 / factor);
    } else if (scaling != "none") {
        throw Error("model '" + f.path() + "': rope scaling '" + scaling + "' is not supported");
    }
    c.attn_scale = 1.0f / std::sqrt((float)c.head_dim_k);
    c.layer_is_swa.assign(c.n_layer, false);
    c.layer_no_rope.assign(c.n_layer, false);
    c.layer_is_recurrent.assign(c.n_layer, false);

    c.n_vocab = (int)f.get_int(a + ".vocab_size", (int64_t)f.array_length("tokenizer.ggml.tokens"));

    switch (c.arch) {
        case Arch::Llama:
            break;
        case Arch::Qwen2:
            c.rope_neox = true;
            c.qkv_bias = true;
            break;
        case Arch::Qwen3:
            // Qwen2 without the q/k/v biases, with gemma3's per-head q/k norms.
            c.rope_neox = true;
            c.qk_norm = QkNorm::PerHead;
            break;
        case Arch::Qwen3Moe:
            // Qwen3 whose FFN is a mixture of experts (every layer).
            c.rope_neox = true;
            c.qk_norm = QkNorm::PerHead;
            read_experts(f, c);
            break;
        case Arch::Qwen35:
            read_qwen35(f, c);
            break;
        case Arch::Qwen35Moe:
            // Qwen3.5 whose FFN is routed experts plus a gated shared expert.
            read_qwen35(f, c);
            read_experts(f, c);
            c.n_ff_shexp = (int)f.get_int(a + ".expert_shared_feed_forward_length", c.n_ff);
            SPECDEC_CHECK(c.n_ff_shexp > 0, "model '", f.path(), "': non-positive expert_shared_feed_forward_length");
            break;
        case Arch::Phi3:
            // Fused QKV and gate-up projections (weights.cpp binds views into
            // them), NeoX RoPE, q scaled before the product. LongRoPE files
            // carry two sets of frequency factors and an attention factor.
            // Phi-3's sliding_window key is ignored, as llama.cpp ignores it
            // ("Phi SWA is currently disabled"): attention is global.
            c.rope_neox = true;
            c.q_prescaled = true;
            c.rope_attn_factor = (float)f.get_float(a + ".rope.scaling.attn_factor", 1.0);
            c.n_ctx_orig = (int)f.get_int(a + ".rope.scaling.original_context_length", c.n_ctx_train);
            break;
        case Arch::Gemma2: {
            // Gemma 3's layout without q/k norms, with tanh soft-capping of the
            // attention scores and of the logits, and a sliding window on the
            // even layers (llama.cpp's pattern 2: every layer but each second).
            c.rope_neox = true;
            c.post_norms = true;
            c.gelu_ffn = true;
            c.q_prescaled = true;
            c.embd_scale = std::sqrt((float)c.n_embd);
            c.attn_softcap = (float)f.get_float(a + ".attn_logit_softcapping", 50.0);
            c.final_softcap = (float)f.get_float(a + ".final_logit_softcapping", 30.0);
            SPECDEC_CHECK(c.attn_softcap > 0 && c.final_softcap > 0, "model '", f.path(),
                          "': soft-capping values must be positive");
            c.sliding_window = (int)f.get_int(a + ".attention.sliding_window", 4096);
            SPECDEC_CHECK(c.sliding_window > 0, "model '", f.path(), "': invalid sliding_window ", c.sliding_window);
            if (const io::GgufValue* pat = f.find(a + ".attention.sliding_window_pattern")) {
                // llama.cpp's load_swa_pattern: a per-layer bool array, or a period n
                // (layer il slides when il % n < n - 1; 0: every layer).
                if (pat->type == io::GgufType::ARRAY) {
                    SPECDEC_CHECK((int)pat->ints.size() == c.n_layer, "model '", f.path(), "': ", a,
                                  ".attention.sliding_window_pattern has ", pat->ints.size(), " entries for ",
                                  c.n_layer, " layers");
                    for (int il = 0; il < c.n_layer; ++il) c.layer_is_swa[il] = pat->ints[il] != 0;
                } else {
                    const int64_t n = f.get_int(a + ".attention.sliding_window_pattern");
                    SPECDEC_CHECK(n >= 0, "model '", f.path(), "': invalid sliding_window_pattern ", n);
                    for (int il = 0; il < c.n_layer; ++il) c.layer_is_swa[il] = n == 0 || il % n < n - 1;
                }
            } else {
                for (int il = 0; il < c.n_layer; ++il) c.layer_is_swa[il] = il % 2 == 0;
            }
            c.rope_freq_base_swa = (float)f.get_float(a + ".rope.freq_base_swa", c.rope_freq_base);
            c.rope_freq_scale_swa = c.rope_freq_scale;
            // Gemma 2 27B (46 layers) scales queries by 1/sqrt(n_embd / n_head)
            // (its query_pre_attn_scalar), the others by 1/sqrt(head_dim); the
            // GGUF has no key for it, so llama.cpp tells them apart by depth.
            if (c.n_layer == 46) c.attn_scale = 1.0f / std::sqrt((float)(c.n_embd / c.n_head));
            break;
        }
        case Arch::Gemma3:
            c.rope_neox = true;
            c.qk_norm = QkNorm::PerHead;
            c.post_norms = true;
            c.gelu_ffn = true;
            c.q_prescaled = true;
            c.embd_scale = std::sqrt((float)c.n_embd);
            // Gemma 3: five sliding-window layers, then one global layer; local
            // layers use RoPE base 10k whatever the global base is.
            c.sliding_window = (int)f.get_int(a + ".attention.sliding_window", 0);
            for (int il = 0; il < c.n_layer; ++il) c.layer_is_swa[il] = c.sliding_window > 0 && (il % 6) < 5;
            c.rope_freq_base_swa = 10000.0f;
            break;
        case Arch::SmolLM3:
            // Llama with no RoPE in every fourth layer (llama.cpp's fixed
            // n_no_rope_layer_step = 4; the GGUF carries no key for it).
            for (int il = 0; il < c.n_layer; ++il) c.layer_no_rope[il] = (il + 1) % 4 == 0;
            break;
        case Arch::Olmo2:
            // Norms after attention and FFN only, and q/k norms over all heads.
            c.rope_neox = true;
            c.qk_norm = QkNorm::Full;
            c.pre_norms = false;
            c.post_norms = true;
            // OLMo 3 files use this architecture with sliding-window layers (and
            // YaRN RoPE): refused rather than run as full attention.
            SPECDEC_CHECK(!f.has(a + ".attention.sliding_window"), "model '", f.path(),
                          "': olmo2 with sliding-window attention (OLMo 3) is not supported");
            break;
    }
    return c;
}

}  // namespace specdec::model
