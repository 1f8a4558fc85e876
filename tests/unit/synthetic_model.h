// Test support: a tiny random llama-architecture model written as a GGUF file
// in memory (F32 weights), for tests that need a real forward pass but no real
// model: forward-contract checks, speculative sampling distribution tests with
// a small vocabulary.
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "unit/gguf_writer.h"

namespace specdec::test {

struct SyntheticModelSpec {
    // llama, qwen2 (q/k/v biases), qwen3 (per-head q/k norms), smollm3 (no
    // RoPE in every fourth layer) or olmo2 (norms after the blocks only, q/k
    // norms over all heads) or qwen35 (gated DeltaNet layers, then a gated
    // full-attention layer every fourth)
    std::string arch = "llama";
    int n_vocab = 64;
    int n_embd = 32;
    int n_ff = 64;
    int n_head = 4;
    int n_head_kv = 2;
    int n_layer = 2;
    float weight_scale = 0.3f;   // larger: sharper distributions
    uint32_t seed = 7;
    // Loadable through runtime::Engine::load (a file on disk, as draft-serve
    // loads it): the tokenizer then needs a merges list (empty here).
    bool with_merges = false;
};

inline std::vector<uint8_t> synthetic_model_gguf(const SyntheticModelSpec& s) {
    GgufWriter w;
    std::mt19937 rng(s.seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto rnd = [&](size_t n, float scale) {
        std::vector<float> v(n);
        for (auto& x : v) x = nd(rng) * scale;
        return v;
    };
    auto ones = [](size_t n) { return std::vector<float>(n, 1.0f); };
    const std::string a = s.arch;
    w.kv_str("general.architecture", a);
    w.kv_str("general.name", "synthetic");
    w.kv_u32(a + ".block_count", s.n_layer);
    w.kv_u32(a + ".embedding_length", s.n_embd);
    w.kv_u32(a + ".feed_forward_length", s.n_ff);
    w.kv_u32(a + ".attention.head_count", s.n_head);
    w.kv_u32(a + ".attention.head_count_kv", s.n_head_kv);
    w.kv_u32(a + ".context_length", 512);
    w.kv_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
    w.kv_f32(a + ".rope.freq_base", 10000.0f);
    std::vector<std::string> tokens;
    for (int i = 0; i < s.n_vocab; ++i) tokens.push_back("t" + std::to_string(i));
    w.kv_str("tokenizer.ggml.model", "gpt2");
    w.kv_str_array("tokenizer.ggml.tokens", tokens);
    if (s.with_merges) w.kv_str_array("tokenizer.ggml.merges", {});
    const int hd = s.n_embd / s.n_head;
    const int kv = s.n_head_kv * hd;
    const float ws = s.weight_scale;
    // qwen35's DeltaNet: q/k heads of hd, twice as many value heads.
    const int ds = hd, nk = 2, nv = 4, dconv = 4, conv = (2 * nk + nv) * ds;
    if (a == "qwen35") {
        w.kv_u32(a + ".ssm.conv_kernel", dconv);
        w.kv_u32(a + ".ssm.state_size", ds);
        w.kv_u32(a + ".ssm.group_count", nk);
        w.kv_u32(a + ".ssm.time_step_rank", nv);
        w.kv_u32(a + ".ssm.inner_size", nv * ds);
        w.kv_u32(a + ".full_attention_interval", 4);
        w.kv_u32(a + ".rope.dimension_count", hd / 2);
    }
    w.tensor_f32("token_embd.weight", {s.n_embd, s.n_vocab}, rnd((size_t)s.n_embd * s.n_vocab, 1.0f));
    w.tensor_f32("output_norm.weight", {s.n_embd}, ones(s.n_embd));
    w.tensor_f32("output.weight", {s.n_embd, s.n_vocab}, rnd((size_t)s.n_embd * s.n_vocab, ws));
    for (int l = 0; l < s.n_layer; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        const bool olmo2 = a == "olmo2";
        if (a == "qwen35") {
            w.tensor_f32(p + "attn_norm.weight", {s.n_embd}, ones(s.n_embd));
            if ((l + 1) % 4 != 0) {
                w.tensor_f32(p + "attn_qkv.weight", {s.n_embd, conv}, rnd((size_t)s.n_embd * conv, ws));
                w.tensor_f32(p + "attn_gate.weight", {s.n_embd, nv * ds}, rnd((size_t)s.n_embd * nv * ds, ws));
                w.tensor_f32(p + "ssm_beta.weight", {s.n_embd, nv}, rnd((size_t)s.n_embd * nv, ws));
                w.tensor_f32(p + "ssm_alpha.weight", {s.n_embd, nv}, rnd((size_t)s.n_embd * nv, ws));
                w.tensor_f32(p + "ssm_out.weight", {nv * ds, s.n_embd}, rnd((size_t)nv * ds * s.n_embd, ws));
                w.tensor_f32(p + "ssm_conv1d.weight", {dconv, conv}, rnd((size_t)dconv * conv, 0.5f));
                w.tensor_f32(p + "ssm_dt.bias", {nv}, rnd(nv, 1.0f));
                auto a_neg = rnd(nv, 0.3f);
                for (auto& x : a_neg) x = -std::exp(x);
                w.tensor_f32(p + "ssm_a", {nv}, a_neg);
                w.tensor_f32(p + "ssm_norm.weight", {ds}, ones(ds));
            } else {
                w.tensor_f32(p + "attn_q.weight", {s.n_embd, 2 * s.n_embd}, rnd((size_t)s.n_embd * 2 * s.n_embd, ws));
                w.tensor_f32(p + "attn_k.weight", {s.n_embd, kv}, rnd((size_t)s.n_embd * kv, ws));
                w.tensor_f32(p + "attn_v.weight", {s.n_embd, kv}, rnd((size_t)s.n_embd * kv, ws));
                w.tensor_f32(p + "attn_q_norm.weight", {hd}, ones(hd));
                w.tensor_f32(p + "attn_k_norm.weight", {hd}, ones(hd));
                w.tensor_f32(p + "attn_output.weight", {s.n_embd, s.n_embd}, rnd((size_t)s.n_embd * s.n_embd, ws));
            }
            w.tensor_f32(p + "post_attention_norm.weight", {s.n_embd}, ones(s.n_embd));
            w.tensor_f32(p + "ffn_gate.weight", {s.n_embd, s.n_ff}, rnd((size_t)s.n_embd * s.n_ff, ws));
            w.tensor_f32(p + "ffn_up.weight", {s.n_embd, s.n_ff}, rnd((size_t)s.n_embd * s.n_ff, ws));
            w.tensor_f32(p + "ffn_down.weight", {s.n_ff, s.n_embd}, rnd((size_t)s.n_ff * s.n_embd, ws));
            continue;
        }
        if (!olmo2) w.tensor_f32(p + "attn_norm.weight", {s.n_embd}, ones(s.n_embd));
        w.tensor_f32(p + "attn_q.weight", {s.n_embd, s.n_embd}, rnd((size_t)s.n_embd * s.n_embd, ws));
        w.tensor_f32(p + "attn_k.weight", {s.n_embd, kv}, rnd((size_t)s.n_embd * kv, ws));
        w.tensor_f32(p + "attn_v.weight", {s.n_embd, kv}, rnd((size_t)s.n_embd * kv, ws));
        if (a == "qwen2") {
            w.tensor_f32(p + "attn_q.bias", {s.n_embd}, rnd(s.n_embd, 0.1f));
            w.tensor_f32(p + "attn_k.bias", {kv}, rnd(kv, 0.1f));
            w.tensor_f32(p + "attn_v.bias", {kv}, rnd(kv, 0.1f));
        }
        if (a == "qwen3" || olmo2) {
            // Away from 1 so that a norm applied to the wrong head shows.
            const int nq = olmo2 ? s.n_embd : hd, nk = olmo2 ? kv : hd;
            auto norm = rnd(nq, 0.2f);
            for (auto& x : norm) x += 1.0f;
            w.tensor_f32(p + "attn_q_norm.weight", {nq}, norm);
            norm = rnd(nk, 0.2f);
            for (auto& x : norm) x += 1.0f;
            w.tensor_f32(p + "attn_k_norm.weight", {nk}, norm);
        }
        if (olmo2) w.tensor_f32(p + "post_attention_norm.weight", {s.n_embd}, ones(s.n_embd));
        w.tensor_f32(p + "attn_output.weight", {s.n_embd, s.n_embd}, rnd((size_t)s.n_embd * s.n_embd, ws));
        if (!olmo2) w.tensor_f32(p + "ffn_norm.weight", {s.n_embd}, ones(s.n_embd));
        w.tensor_f32(p + "ffn_gate.weight", {s.n_embd, s.n_ff}, rnd((size_t)s.n_embd * s.n_ff, ws));
        w.tensor_f32(p + "ffn_up.weight", {s.n_embd, s.n_ff}, rnd((size_t)s.n_embd * s.n_ff, ws));
        w.tensor_f32(p + "ffn_down.weight", {s.n_ff, s.n_embd}, rnd((size_t)s.n_ff * s.n_embd, ws));
        if (olmo2) w.tensor_f32(p + "post_ffw_norm.weight", {s.n_embd}, ones(s.n_embd));
    }
    return w.bytes();
}

}  // namespace specdec::test
