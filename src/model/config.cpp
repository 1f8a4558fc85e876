#include "model/config.h"

#include <cmath>

#include "core/error.h"
#include "io/gguf.h"

namespace specdec::model {

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
    } else if (a == "gemma3") {
        c.arch = Arch::Gemma3;
    } else if (a == "smollm3") {
        c.arch = Arch::SmolLM3;
    } else if (a == "olmo2") {
        c.arch = Arch::Olmo2;
    } else {
        throw Error("model '" + f.path() + "': architecture '" + a +
                    "' is not supported (supported: llama, qwen2, qwen3, gemma3, smollm3, olmo2)");
    }
    c.name = f.get_string("general.name", a);
    c.n_layer = (int)f.get_int(a + ".block_count");
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

    const auto& tokens = f.get_string_array("tokenizer.ggml.tokens");
    c.n_vocab = (int)f.get_int(a + ".vocab_size", (int64_t)tokens.size());

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
        case Arch::Gemma3:
            c.rope_neox = true;
            c.qk_norm = QkNorm::PerHead;
            c.post_norms = true;
            c.gelu_ffn = true;
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
