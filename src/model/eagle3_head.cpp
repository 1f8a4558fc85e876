#include "model/eagle3_head.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/fp16.h"

namespace specdec::model {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// How a pickle checkpoint becomes a safetensors file (torch needed once, by
// the user; pickle is never read here because unpickling runs code).
const char* kConvertHint =
    "convert it once with: python -c \"import torch; from safetensors.torch import save_file; "
    "save_file({k: v.contiguous() for k, v in torch.load('pytorch_model.bin', map_location='cpu').items()}, "
    "'model.safetensors')\" (in the head's directory)";

json read_json(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    SPECDEC_CHECK(in, "cannot read '", p.string(), "'");
    json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
    SPECDEC_CHECK(!j.is_discarded() && j.is_object(), "'", p.string(), "' is not a JSON object");
    return j;
}

int get_int(const json& j, const char* key, const std::string& where, int def = -1) {
    if (!j.contains(key) || j[key].is_null()) {
        SPECDEC_CHECK(def >= 0, where, ": config has no '", key, "'");
        return def;
    }
    SPECDEC_CHECK(j[key].is_number_integer() && j[key].get<int64_t>() > 0 && j[key].get<int64_t>() < (1 << 30),
                  where, ": config '", key, "' must be a positive integer");
    return (int)j[key].get<int64_t>();
}

float get_float(const json& j, const char* key, float def) {
    if (!j.contains(key) || j[key].is_null()) return def;
    SPECDEC_CHECK(j[key].is_number(), "config '", key, "' must be a number");
    return j[key].get<float>();
}

}  // namespace

// Binds tensors of the safetensors file into Eagle3Weights, checking names,
// shapes and dtypes (a friend of Eagle3Head: it fills the head's fields).
struct Eagle3Binder {
    Eagle3Head& h;
    std::string prefix;  // "midlayer." or "layers.0."

    const io::StTensor& tensor(const std::string& name) const { return h.file_->get(name); }
    std::string where() const { return "EAGLE-3 head '" + h.dir_ + "'"; }

    kernels::WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols) {
        const io::StTensor& t = tensor(name);
        SPECDEC_CHECK(t.shape.size() == 2 && t.shape[0] == rows && t.shape[1] == cols, where(), ": tensor '", name,
                      "' has shape ", shape_str(t), ", expected [", rows, ", ", cols, "]");
        kernels::WeightMatrix m;
        switch (t.dtype) {
            case io::StDtype::F32: m.type = TensorType::F32; break;
            case io::StDtype::F16: m.type = TensorType::F16; break;
            case io::StDtype::BF16: m.type = TensorType::BF16; break;
            default:
                throw Error(detail::concat(where(), ": tensor '", name, "' is ", io::st_dtype_name(t.dtype),
                                           "; matrices must be F32, F16 or BF16"));
        }
        const size_t esz = io::st_dtype_size(t.dtype);
        m.data = t.data;
        if (reinterpret_cast<uintptr_t>(t.data) % esz != 0) {
            // The format does not promise aligned tensors: copy the rare misaligned one.
            auto buf = std::make_unique<float[]>((t.n_bytes + sizeof(float) - 1) / sizeof(float));
            std::memcpy(buf.get(), t.data, t.n_bytes);
            m.data = buf.get();
            h.owned_.push_back(std::move(buf));
        }
        m.n_in = cols;
        m.n_out = rows;
        m.row_bytes = (size_t)cols * esz;
        return m;
    }

    const float* vec(const std::string& name, int64_t n) {
        const io::StTensor& t = tensor(name);
        SPECDEC_CHECK(t.shape.size() == 1 && t.shape[0] == n, where(), ": tensor '", name, "' has shape ",
                      shape_str(t), ", expected [", n, "]");
        auto buf = std::make_unique<float[]>((size_t)n);
        for (int64_t i = 0; i < n; ++i) {
            switch (t.dtype) {
                case io::StDtype::F32: std::memcpy(&buf[i], t.data + 4 * i, 4); break;
                case io::StDtype::F16:
                case io::StDtype::BF16: {
                    uint16_t u;
                    std::memcpy(&u, t.data + 2 * i, 2);
                    buf[i] = t.dtype == io::StDtype::F16 ? fp16_to_fp32(u) : bf16_to_fp32(u);
                    break;
                }
                default:
                    throw Error(detail::concat(where(), ": tensor '", name, "' is ", io::st_dtype_name(t.dtype),
                                               "; norms must be F32, F16 or BF16"));
            }
        }
        const float* p = buf.get();
        h.owned_.push_back(std::move(buf));
        return p;
    }

    static std::string shape_str(const io::StTensor& t) {
        std::string s = "[";
        for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
        return s + "]";
    }
};

std::unique_ptr<Eagle3Head> Eagle3Head::load(const std::string& path, const Eagle3Target& target) {
    SPECDEC_CHECK(target.n_layer >= 4 && target.n_embd > 0 && target.n_vocab > 0, "EAGLE-3: target '", target.path,
                  "' has ", target.n_layer, " layers; a head needs at least 4");
    fs::path p(path);
    std::error_code ec;
    SPECDEC_CHECK(fs::exists(p, ec), "EAGLE-3 head '", path, "' does not exist");
    fs::path dir = fs::is_directory(p, ec) ? p : p.parent_path();
    if (dir.empty()) dir = ".";
    const std::string ext = p.extension().string();
    if (ext == ".gguf") return load_gguf(path, target);
    const bool is_pickle = ext == ".bin" || ext == ".pt" || ext == ".pth" ||
                           (fs::is_directory(p, ec) && !fs::exists(dir / "model.safetensors", ec) &&
                            fs::exists(dir / "pytorch_model.bin", ec));
    SPECDEC_CHECK(!is_pickle, "EAGLE-3 head '", path, "' is a PyTorch pickle (pytorch_model.bin), which specdec ",
                  "does not load; ", kConvertHint);
    const fs::path st_path = ext == ".safetensors" ? p : dir / "model.safetensors";
    SPECDEC_CHECK(fs::exists(st_path, ec), "EAGLE-3 head '", path, "' has no model.safetensors");
    const fs::path cfg_path = dir / "config.json";
    SPECDEC_CHECK(fs::exists(cfg_path, ec), "EAGLE-3 head '", path, "' has no config.json next to its weights");

    auto head = std::unique_ptr<Eagle3Head>(new Eagle3Head());
    head->dir_ = dir.string();
    const std::string where = "EAGLE-3 head '" + head->dir_ + "'";
    const json root = read_json(cfg_path);
    Eagle3Config& c = head->cfg_;
    json layer = root;  // the decoder layer's llama config
    std::string prefix = "midlayer.";
    if (root.contains("speculators_model_type")) {
        SPECDEC_CHECK(root["speculators_model_type"] == "eagle3", where, ": speculators_model_type is ",
                      root["speculators_model_type"].dump(), ", not \"eagle3\"");
        c.format = "speculators";
        SPECDEC_CHECK(root.contains("transformer_layer_config") && root["transformer_layer_config"].is_object(), where,
                      ": a speculators config needs transformer_layer_config");
        layer = root["transformer_layer_config"];
        prefix = "layers.0.";
        if (root.contains("norm_before_residual") && !root["norm_before_residual"].is_null()) {
            SPECDEC_CHECK(root["norm_before_residual"].is_boolean(), where, ": norm_before_residual must be a bool");
            c.norm_before_residual = root["norm_before_residual"].get<bool>();
        }
    } else {
        std::string arch;
        if (root.contains("architectures") && root["architectures"].is_array() && !root["architectures"].empty() &&
            root["architectures"][0].is_string())
            arch = root["architectures"][0].get<std::string>();
        SPECDEC_CHECK(arch == "LlamaForCausalLMEagle3" || arch == "Eagle3LlamaForCausalLM", where,
                      ": config.json architectures[0] is '", arch,
                      "', not LlamaForCausalLMEagle3 (nor a speculators eagle3 config)");
        c.format = "hf";
    }
    c.hidden = get_int(layer, "hidden_size", where);
    c.n_head = get_int(layer, "num_attention_heads", where);
    c.n_head_kv = get_int(layer, "num_key_value_heads", where, c.n_head);
    c.head_dim = get_int(layer, "head_dim", where, c.hidden / c.n_head);
    c.n_ff = get_int(layer, "intermediate_size", where);
    c.vocab = get_int(layer, "vocab_size", where);
    c.draft_vocab = get_int(root, "draft_vocab_size", where, get_int(layer, "draft_vocab_size", where, c.vocab));
    c.target_hidden = get_int(root, "target_hidden_size", where, get_int(layer, "target_hidden_size", where, c.hidden));
    c.norm_eps = get_float(layer, "rms_norm_eps", 1e-6f);
    c.rope_theta = get_float(layer, "rope_theta", 10000.0f);
    if (layer.contains("num_hidden_layers"))
        SPECDEC_CHECK(layer["num_hidden_layers"] == 1, where, ": num_hidden_layers is ",
                      layer["num_hidden_layers"].dump(), "; an EAGLE-3 head has one decoder layer");
    if (layer.contains("hidden_act"))
        SPECDEC_CHECK(layer["hidden_act"] == "silu", where, ": hidden_act ", layer["hidden_act"].dump(),
                      " unsupported (silu only)");
    SPECDEC_CHECK(!layer.contains("rope_scaling") || layer["rope_scaling"].is_null(), where,
                  ": rope_scaling is not supported yet (", layer["rope_scaling"].dump(), ")");

    if (root.contains("eagle_aux_hidden_state_layer_ids") && !root["eagle_aux_hidden_state_layer_ids"].is_null()) {
        const json& ids = root["eagle_aux_hidden_state_layer_ids"];
        SPECDEC_CHECK(ids.is_array() && ids.size() == 3, where, ": eagle_aux_hidden_state_layer_ids must list 3 layers");
        for (const json& v : ids) {
            SPECDEC_CHECK(v.is_number_integer(), where, ": eagle_aux_hidden_state_layer_ids must be integers");
            c.feature_layers.push_back((int)v.get<int64_t>());
        }
    } else {
        c.feature_layers = eagle3_default_feature_layers(target.n_layer);
    }
    head->check_fit(target, where);

    head->file_ = io::SafetensorsFile::open(st_path.string());
    Eagle3Binder b{*head, prefix};
    Eagle3Weights& w = head->w_;
    const int H = c.hidden;
    w.fc = b.matrix("fc.weight", H, 3 * (int64_t)c.target_hidden);
    w.input_norm = b.vec(prefix + "input_layernorm.weight", H);
    w.hidden_norm = b.vec(prefix + "hidden_norm.weight", H);
    w.wq = b.matrix(prefix + "self_attn.q_proj.weight", c.q_dim(), 2 * (int64_t)H);
    w.wk = b.matrix(prefix + "self_attn.k_proj.weight", c.kv_dim(), 2 * (int64_t)H);
    w.wv = b.matrix(prefix + "self_attn.v_proj.weight", c.kv_dim(), 2 * (int64_t)H);
    w.wo = b.matrix(prefix + "self_attn.o_proj.weight", H, c.q_dim());
    w.post_attn_norm = b.vec(prefix + "post_attention_layernorm.weight", H);
    w.w_gate = b.matrix(prefix + "mlp.gate_proj.weight", c.n_ff, H);
    w.w_up = b.matrix(prefix + "mlp.up_proj.weight", c.n_ff, H);
    w.w_down = b.matrix(prefix + "mlp.down_proj.weight", H, c.n_ff);
    w.out_norm = b.vec("norm.weight", H);
    w.lm_head = b.matrix("lm_head.weight", c.draft_vocab, H);

    // d2t: target id = i + d2t[i].
    if (const io::StTensor* t = head->file_->find("d2t")) {
        SPECDEC_CHECK(t->dtype == io::StDtype::I64 && t->shape.size() == 1 && t->shape[0] == c.draft_vocab, where,
                      ": d2t must be I64 of shape [", c.draft_vocab, "] (draft_vocab_size), got ",
                      io::st_dtype_name(t->dtype), " ", Eagle3Binder::shape_str(*t));
        std::vector<int64_t> ids((size_t)c.draft_vocab);
        for (int i = 0; i < c.draft_vocab; ++i) {
            int64_t off;
            std::memcpy(&off, t->data + 8 * (size_t)i, 8);
            ids[(size_t)i] = (int64_t)i + off;
        }
        head->set_draft_to_target(ids, target, where);
    } else {
        SPECDEC_CHECK(c.draft_vocab == c.vocab, where, ": no d2t tensor, but draft_vocab_size ", c.draft_vocab,
                      " differs from vocab_size ", c.vocab);
        std::vector<int64_t> ids((size_t)c.draft_vocab);
        for (int i = 0; i < c.draft_vocab; ++i) ids[(size_t)i] = i;
        head->set_draft_to_target(ids, target, where);
    }
    auto& d2t = head->d2t_;
    // t2d is only a mask (the verifier works in target ids); when present it
    // must cover the target's vocabulary and agree with d2t.
    if (const io::StTensor* t = head->file_->find("t2d")) {
        SPECDEC_CHECK(t->dtype == io::StDtype::BOOL && t->shape.size() == 1, where, ": t2d must be a BOOL vector, got ",
                      io::st_dtype_name(t->dtype), " ", Eagle3Binder::shape_str(*t));
        SPECDEC_CHECK(t->shape[0] == target.n_vocab, where, ": t2d covers ", t->shape[0],
                      " tokens, but target '", target.path, "' has a vocabulary of ", target.n_vocab);
        int64_t n = 0;
        for (int64_t i = 0; i < t->shape[0]; ++i) n += t->data[i] != 0;
        SPECDEC_CHECK(n == c.draft_vocab, where, ": t2d marks ", n, " tokens, draft_vocab_size is ", c.draft_vocab);
        for (int32_t id : d2t)
            SPECDEC_CHECK(t->data[id] != 0, where, ": d2t maps to target id ", id, ", which t2d does not mark");
    }
    return head;
}

void Eagle3Head::check_fit(const Eagle3Target& target, const std::string& where) const {
    const Eagle3Config& c = cfg_;
    // Does it fit the target? Name both sides.
    SPECDEC_CHECK(c.target_hidden == target.n_embd, where, " reads target features of width ", c.target_hidden,
                  " (target_hidden_size), but target '", target.path, "' has hidden size ", target.n_embd);
    SPECDEC_CHECK(c.hidden == target.n_embd, where, " has hidden size ", c.hidden, " but embeds tokens with target '",
                  target.path, "', whose hidden size is ", target.n_embd);
    SPECDEC_CHECK(c.vocab == target.n_vocab, where, " was made for a vocabulary of ", c.vocab,
                  " tokens (vocab_size), but target '", target.path, "' has ", target.n_vocab);
    SPECDEC_CHECK(c.n_head % c.n_head_kv == 0, where, ": ", c.n_head, " heads do not group over ", c.n_head_kv,
                  " KV heads");
    SPECDEC_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0 && c.head_dim <= 1024, where, ": head size ", c.head_dim, " unsupported");
    SPECDEC_CHECK(c.draft_vocab <= c.vocab, where, ": draft_vocab_size ", c.draft_vocab, " exceeds vocab_size ",
                  c.vocab);
    SPECDEC_CHECK(c.feature_layers.size() == 3, where, " reads ", c.feature_layers.size(),
                  " target layers; an EAGLE-3 head reads 3");
    for (size_t i = 0; i < c.feature_layers.size(); ++i) {
        const int l = c.feature_layers[i];
        SPECDEC_CHECK(l >= 1 && l <= target.n_layer, where, " reads target layer ", l, ", but target '", target.path,
                      "' has layers 0..", target.n_layer - 1, " (features are a layer's input, 1..", target.n_layer,
                      ")");
        SPECDEC_CHECK(i == 0 || l > c.feature_layers[i - 1], where, ": feature layers must ascend (low -> high)");
    }
}

// Each draft id's target id within the target's vocabulary, no two the same
// (siblings of a draft tree must differ).
void Eagle3Head::set_draft_to_target(const std::vector<int64_t>& ids, const Eagle3Target& target,
                                     const std::string& where) {
    d2t_.resize(ids.size());
    std::vector<uint8_t> seen((size_t)target.n_vocab, 0);
    for (size_t i = 0; i < ids.size(); ++i) {
        const int64_t id = ids[i];
        SPECDEC_CHECK(id >= 0 && id < target.n_vocab, where, ": d2t maps draft id ", i, " to target id ", id,
                      ", outside target '", target.path, "''s vocabulary of ", target.n_vocab);
        SPECDEC_CHECK(!seen[(size_t)id], where, ": d2t maps two draft ids to target id ", id);
        seen[(size_t)id] = 1;
        d2t_[i] = (int32_t)id;
    }
}

// Binds tensors of an eagle3 GGUF (llama.cpp's names; dims innermost first).
struct Eagle3GgufBinder {
    Eagle3Head& h;
    std::string where;

    const io::GgufTensor& tensor(const std::string& name) const {
        const io::GgufTensor* t = h.gguf_->find_tensor(name);
        SPECDEC_CHECK(t, where, ": missing tensor '", name, "'");
        return *t;
    }
    static std::string dims_str(const io::GgufTensor& t) {
        std::string s = "[";
        for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? ", " : "") + std::to_string(t.dims[i]);
        return s + "]";
    }
    void check_dims(const io::GgufTensor& t, std::vector<int64_t> want) const {
        std::vector<int64_t> got = t.dims;
        while (got.size() > want.size() && got.back() == 1) got.pop_back();  // trailing unit dimensions
        std::string w = "[";
        for (size_t i = 0; i < want.size(); ++i) w += (i ? ", " : "") + std::to_string(want[i]);
        SPECDEC_CHECK(got == want, where, ": tensor '", t.name, "' has shape ", dims_str(t), ", expected ", w, "]");
    }

    // A (rows, cols) matrix, stored as GGUF dims {cols, rows}.
    kernels::WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols) const {
        const io::GgufTensor& t = tensor(name);
        check_dims(t, {cols, rows});
        SPECDEC_CHECK(kernels::is_supported_weight_type(t.type), where, ": tensor '", name, "' has type ",
                      tensor_type_name(t.type), ", which has no matmul kernel");
        kernels::WeightMatrix m;
        m.type = t.type;
        m.data = t.data;
        m.n_in = cols;
        m.n_out = rows;
        m.row_bytes = tensor_row_bytes(t.type, cols);
        return m;
    }

    const float* vec(const std::string& name, int64_t n) {
        const io::GgufTensor& t = tensor(name);
        check_dims(t, {n});
        SPECDEC_CHECK(kernels::is_supported_weight_type(t.type), where, ": tensor '", name, "' has type ",
                      tensor_type_name(t.type));
        auto buf = std::make_unique<float[]>((size_t)n);
        kernels::dequantize_row(t.type, t.data, buf.get(), n);
        const float* p = buf.get();
        h.owned_.push_back(std::move(buf));
        return p;
    }
};

std::unique_ptr<Eagle3Head> Eagle3Head::load_gguf(const std::string& path, const Eagle3Target& target) {
    auto head = std::unique_ptr<Eagle3Head>(new Eagle3Head());
    head->dir_ = path;
    const std::string where = "EAGLE-3 head '" + path + "'";
    head->gguf_ = io::GgufFile::open(path);
    const io::GgufFile& f = *head->gguf_;
    const std::string arch = f.get_string("general.architecture", "");
    SPECDEC_CHECK(arch == "eagle3", where, ": general.architecture is '", arch,
                  "', not eagle3 (a GGUF head is llama.cpp's eagle3 architecture)");
    const auto key_int = [&](const std::string& k, int64_t def = -1) -> int {
        const int64_t v = f.has(k) || def < 0 ? f.get_int(k) : def;
        SPECDEC_CHECK(v > 0 && v < (1 << 30), where, ": ", k, " must be a positive integer, got ", v);
        return (int)v;
    };
    Eagle3Config& c = head->cfg_;
    c.format = "gguf";
    c.rope_neox = false;
    SPECDEC_CHECK(key_int("eagle3.block_count") == 1, where, ": eagle3.block_count is ",
                  f.get_int("eagle3.block_count"), "; an EAGLE-3 head has one decoder layer");
    c.hidden = key_int("eagle3.embedding_length");
    c.n_head = key_int("eagle3.attention.head_count");
    c.n_head_kv = key_int("eagle3.attention.head_count_kv", c.n_head);
    c.head_dim = key_int("eagle3.attention.key_length", c.hidden / std::max(1, c.n_head));
    SPECDEC_CHECK(key_int("eagle3.attention.value_length", c.head_dim) == c.head_dim, where,
                  ": value and key head sizes differ");
    SPECDEC_CHECK(key_int("eagle3.rope.dimension_count", c.head_dim) == c.head_dim, where,
                  ": RoPE over part of a head (rope.dimension_count ", f.get_int("eagle3.rope.dimension_count"),
                  " of ", c.head_dim, ") is not supported");
    c.n_ff = key_int("eagle3.feed_forward_length");
    c.norm_eps = (float)f.get_float("eagle3.attention.layer_norm_rms_epsilon", 1e-6);
    c.rope_theta = (float)f.get_float("eagle3.rope.freq_base", 10000.0);
    c.target_hidden = key_int("eagle3.target_hidden_size");
    c.norm_before_residual = f.get_bool("eagle3.norm_before_residual", false);
    SPECDEC_CHECK(!f.get_bool("eagle3.norm_before_fc", false), where,
                  ": norm_before_fc (EAGLE-3.1 heads) is not supported yet");
    const std::string scaling = f.get_string("eagle3.rope.scaling.type", "none");
    SPECDEC_CHECK((scaling == "none" || scaling.empty()) && !f.find_tensor("rope_freqs.weight") &&
                      !f.find_tensor("blk.0.rope_freqs.weight"),
                  where, ": RoPE scaling is not supported yet");
    SPECDEC_CHECK(!f.find_tensor("token_embd.weight"), where,
                  ": the head has token embeddings of its own, which specdec does not use yet (it embeds with the "
                  "target's)");
    SPECDEC_CHECK(f.has("eagle3.target_layers"), where, ": no eagle3.target_layers (the target layers it reads)");
    for (int64_t l : f.get_int_array("eagle3.target_layers")) c.feature_layers.push_back((int)l);
    // The vocabulary it was made for: its tokenizer's, when it carries one.
    c.vocab = f.has("tokenizer.ggml.tokens") ? (int)f.get_string_array("tokenizer.ggml.tokens").size() : target.n_vocab;
    const io::GgufTensor* d2t = f.find_tensor("d2t");
    if (d2t) {
        SPECDEC_CHECK(d2t->type == TensorType::I64 && d2t->dims.size() == 1 && d2t->dims[0] > 0, where,
                      ": d2t must be an I64 vector, got ", tensor_type_name(d2t->type), " ",
                      Eagle3GgufBinder::dims_str(*d2t));
        c.draft_vocab = (int)d2t->dims[0];
    } else {
        c.draft_vocab = c.vocab;
    }
    head->check_fit(target, where);

    Eagle3GgufBinder b{*head, where};
    Eagle3Weights& w = head->w_;
    const int H = c.hidden;
    w.fc = b.matrix("fc.weight", H, 3 * (int64_t)c.target_hidden);
    w.input_norm = b.vec("blk.0.attn_norm.weight", H);
    w.hidden_norm = b.vec("blk.0.attn_norm_2.weight", H);
    w.wq = b.matrix("blk.0.attn_q.weight", c.q_dim(), 2 * (int64_t)H);
    w.wk = b.matrix("blk.0.attn_k.weight", c.kv_dim(), 2 * (int64_t)H);
    w.wv = b.matrix("blk.0.attn_v.weight", c.kv_dim(), 2 * (int64_t)H);
    w.wo = b.matrix("blk.0.attn_output.weight", H, c.q_dim());
    w.post_attn_norm = b.vec("blk.0.ffn_norm.weight", H);
    w.w_gate = b.matrix("blk.0.ffn_gate.weight", c.n_ff, H);
    w.w_up = b.matrix("blk.0.ffn_up.weight", c.n_ff, H);
    w.w_down = b.matrix("blk.0.ffn_down.weight", H, c.n_ff);
    w.out_norm = b.vec("output_norm.weight", H);
    w.lm_head = b.matrix("output.weight", c.draft_vocab, H);

    // d2t holds absolute target ids here (the converter adds each index).
    std::vector<int64_t> ids((size_t)c.draft_vocab);
    for (int i = 0; i < c.draft_vocab; ++i) {
        if (d2t)
            std::memcpy(&ids[(size_t)i], d2t->data + 8 * (size_t)i, 8);
        else
            ids[(size_t)i] = i;
    }
    head->set_draft_to_target(ids, target, where);
    return head;
}

}  // namespace specdec::model
