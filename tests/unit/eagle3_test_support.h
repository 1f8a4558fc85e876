// Test support: safetensors files and EAGLE-3 heads with random weights,
// written by the tests themselves (Hugging Face or vllm speculators layout).
#pragma once

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace specdec::test {

// One tensor of a safetensors file: dtype name, shape, raw little-endian bytes.
struct StEntry {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
};

inline StEntry st_f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
    StEntry e{name, "F32", std::move(shape), std::vector<uint8_t>(v.size() * 4)};
    std::memcpy(e.bytes.data(), v.data(), e.bytes.size());
    return e;
}
inline StEntry st_i64(const std::string& name, const std::vector<int64_t>& v) {
    StEntry e{name, "I64", {(int64_t)v.size()}, std::vector<uint8_t>(v.size() * 8)};
    std::memcpy(e.bytes.data(), v.data(), e.bytes.size());
    return e;
}
inline StEntry st_bool(const std::string& name, const std::vector<uint8_t>& v) {
    return StEntry{name, "BOOL", {(int64_t)v.size()}, v};
}

// The file: 8-byte header length, JSON header (padded with spaces to 8
// bytes, as the safetensors package writes it), data.
inline std::vector<uint8_t> safetensors_bytes(const std::vector<StEntry>& ts) {
    nlohmann::json h = nlohmann::json::object();
    uint64_t off = 0;
    for (const auto& t : ts) {
        h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
        off += t.bytes.size();
    }
    h["__metadata__"] = {{"format", "pt"}};
    std::string hs = h.dump();
    while (hs.size() % 8) hs.push_back(' ');
    std::vector<uint8_t> out(8);
    const uint64_t n = hs.size();
    for (int i = 0; i < 8; ++i) out[i] = (uint8_t)(n >> (8 * i));
    out.insert(out.end(), hs.begin(), hs.end());
    for (const auto& t : ts) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
    return out;
}

struct HeadSpec {
    std::string format = "hf";  // "hf" or "speculators"
    int hidden = 32;
    int target_hidden = 32;
    int n_head = 4, n_head_kv = 2, n_ff = 48;
    int vocab = 64;
    int draft_vocab = 48;
    std::vector<int> layer_ids;  // speculators: eagle_aux_hidden_state_layer_ids
    float scale = 0.3f;
    float lm_scale = 1.0f;  // lm_head: smaller spreads the draft distribution
    uint32_t seed = 11;
    bool write_t2d = true;
};

// Writes config.json and model.safetensors into dir (created). The draft
// vocabulary is every other target id then the rest, so d2t offsets vary.
inline void write_eagle3_head(const std::string& dir, const HeadSpec& s) {
    namespace fs = std::filesystem;
    fs::create_directories(dir);
    std::mt19937 rng(s.seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto rnd = [&](size_t n, float sc) {
        std::vector<float> v(n);
        for (auto& x : v) x = nd(rng) * sc;
        return v;
    };
    auto near_one = [&](size_t n) {
        std::vector<float> v(n);
        for (auto& x : v) x = 1.0f + 0.1f * nd(rng);
        return v;
    };
    const int H = s.hidden, hd = H / s.n_head;
    const std::string p = s.format == "hf" ? "midlayer." : "layers.0.";
    std::vector<StEntry> ts;
    ts.push_back(st_f32("fc.weight", {H, 3 * s.target_hidden}, rnd((size_t)H * 3 * s.target_hidden, s.scale / 4)));
    ts.push_back(st_f32(p + "hidden_norm.weight", {H}, near_one(H)));
    ts.push_back(st_f32(p + "input_layernorm.weight", {H}, near_one(H)));
    ts.push_back(st_f32(p + "post_attention_layernorm.weight", {H}, near_one(H)));
    ts.push_back(st_f32(p + "self_attn.q_proj.weight", {s.n_head * hd, 2 * H}, rnd((size_t)s.n_head * hd * 2 * H, s.scale)));
    ts.push_back(st_f32(p + "self_attn.k_proj.weight", {s.n_head_kv * hd, 2 * H},
                        rnd((size_t)s.n_head_kv * hd * 2 * H, s.scale)));
    ts.push_back(st_f32(p + "self_attn.v_proj.weight", {s.n_head_kv * hd, 2 * H},
                        rnd((size_t)s.n_head_kv * hd * 2 * H, s.scale)));
    ts.push_back(st_f32(p + "self_attn.o_proj.weight", {H, s.n_head * hd}, rnd((size_t)H * s.n_head * hd, s.scale)));
    ts.push_back(st_f32(p + "mlp.gate_proj.weight", {s.n_ff, H}, rnd((size_t)s.n_ff * H, s.scale)));
    ts.push_back(st_f32(p + "mlp.up_proj.weight", {s.n_ff, H}, rnd((size_t)s.n_ff * H, s.scale)));
    ts.push_back(st_f32(p + "mlp.down_proj.weight", {H, s.n_ff}, rnd((size_t)H * s.n_ff, s.scale)));
    ts.push_back(st_f32("norm.weight", {H}, near_one(H)));
    ts.push_back(st_f32("lm_head.weight", {s.draft_vocab, H}, rnd((size_t)s.draft_vocab * H, s.lm_scale)));
    std::vector<int64_t> ids;
    for (int i = 0; i < s.vocab && (int)ids.size() < s.draft_vocab; i += 2) ids.push_back(i);
    for (int i = 1; i < s.vocab && (int)ids.size() < s.draft_vocab; i += 2) ids.push_back(i);
    std::sort(ids.begin(), ids.end());
    std::vector<int64_t> d2t(ids.size());
    std::vector<uint8_t> t2d((size_t)s.vocab, 0);
    for (size_t i = 0; i < ids.size(); ++i) {
        d2t[i] = ids[i] - (int64_t)i;
        t2d[(size_t)ids[i]] = 1;
    }
    ts.push_back(st_i64("d2t", d2t));
    if (s.write_t2d) ts.push_back(st_bool("t2d", t2d));
    const std::vector<uint8_t> bytes = safetensors_bytes(ts);
    std::ofstream(dir + "/model.safetensors", std::ios::binary).write((const char*)bytes.data(), (std::streamsize)bytes.size());

    nlohmann::json layer = {{"hidden_size", H},       {"num_attention_heads", s.n_head},
                            {"num_key_value_heads", s.n_head_kv}, {"intermediate_size", s.n_ff},
                            {"vocab_size", s.vocab},  {"rms_norm_eps", 1e-5},
                            {"rope_theta", 10000.0},  {"num_hidden_layers", 1},
                            {"hidden_act", "silu"}};
    nlohmann::json cfg;
    if (s.format == "hf") {
        cfg = layer;
        cfg["architectures"] = {"LlamaForCausalLMEagle3"};
        cfg["draft_vocab_size"] = s.draft_vocab;
        cfg["target_hidden_size"] = s.target_hidden;
    } else {
        cfg = {{"speculators_model_type", "eagle3"},
               {"architectures", {"Eagle3Speculator"}},
               {"transformer_layer_config", layer},
               {"draft_vocab_size", s.draft_vocab},
               {"target_hidden_size", s.target_hidden},
               {"norm_before_residual", false}};
        if (!s.layer_ids.empty()) cfg["eagle_aux_hidden_state_layer_ids"] = s.layer_ids;
    }
    std::ofstream(dir + "/config.json") << cfg.dump(2);
}

}  // namespace specdec::test
