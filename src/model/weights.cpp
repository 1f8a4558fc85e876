#include "model/weights.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "io/gguf.h"

namespace specdec::model {
namespace {

class Binder {
public:
    Binder(const io::GgufFile& f, ModelWeights& w) : f_(f), w_(w) {}

    kernels::WeightMatrix matrix(const std::string& name, int64_t n_in, int64_t n_out) {
        const io::GgufTensor& t = f_.tensor(name);
        check_shape(t, {n_in, n_out});
        SPECDEC_CHECK(kernels::is_supported_weight_type(t.type), "model '", f_.path(), "': tensor '", name,
                      "' has type ", tensor_type_name(t.type), " which has no matmul kernel");
        kernels::WeightMatrix m;
        m.type = t.type;
        m.data = t.data;
        m.n_in = n_in;
        m.n_out = n_out;
        m.row_bytes = tensor_row_bytes(t.type, n_in);
        return m;
    }

    const float* vec(const std::string& name, int64_t n, bool required = true) {
        const io::GgufTensor* t = f_.find_tensor(name);
        if (!t) {
            SPECDEC_CHECK(!required, "model '", f_.path(), "': missing tensor '", name, "'");
            return nullptr;
        }
        check_shape(*t, {n});
        if (t->type == TensorType::F32) return reinterpret_cast<const float*>(t->data);
        // Rare: a norm or bias stored as F16/BF16/quantized; keep a float copy.
        SPECDEC_CHECK(kernels::is_supported_weight_type(t->type), "model '", f_.path(), "': tensor '",
                      name, "' has unsupported type ", tensor_type_name(t->type));
        auto buf = std::make_unique<float[]>(n);
        kernels::dequantize_row(t->type, t->data, buf.get(), n);
        w_.owned.push_back(std::move(buf));
        return w_.owned.back().get();
    }

private:
    void check_shape(const io::GgufTensor& t, std::vector<int64_t> want) {
        // GGUF may carry trailing unit dimensions.
        std::vector<int64_t> got = t.dims;
        while (got.size() > want.size() && got.back() == 1) got.pop_back();
        if (got != want) {
            std::string g, e;
            for (auto d : t.dims) g += std::to_string(d) + " ";
            for (auto d : want) e += std::to_string(d) + " ";
            throw Error("model '" + f_.path() + "': tensor '" + t.name + "' has shape [ " + g +
                        "], expected [ " + e + "]");
        }
    }
    const io::GgufFile& f_;
    ModelWeights& w_;
};

}  // namespace

ModelWeights bind_weights(const io::GgufFile& f, const ModelConfig& c) {
    ModelWeights w;
    Binder b(f, w);
    w.tok_embd = b.matrix("token_embd.weight", c.n_embd, c.n_vocab);
    w.output_norm = b.vec("output_norm.weight", c.n_embd);
    // Llama 3.1+ ship their "llama3" RoPE scaling as per-pair factors.
    w.rope_freqs = b.vec("rope_freqs.weight", c.n_rot / 2, false);
    w.output = f.find_tensor("output.weight") ? b.matrix("output.weight", c.n_embd, c.n_vocab) : w.tok_embd;
    w.layers.resize(c.n_layer);
    for (int il = 0; il < c.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        LayerWeights& L = w.layers[il];
        if (c.pre_norms) L.attn_norm = b.vec(p + "attn_norm.weight", c.n_embd);
        L.wq = b.matrix(p + "attn_q.weight", c.n_embd, c.q_dim());
        L.wk = b.matrix(p + "attn_k.weight", c.n_embd, c.kv_dim());
        L.wv = b.matrix(p + "attn_v.weight", c.n_embd, c.v_dim());
        L.wo = b.matrix(p + "attn_output.weight", c.q_dim(), c.n_embd);
        if (c.qkv_bias) {
            L.bq = b.vec(p + "attn_q.bias", c.q_dim());
            L.bk = b.vec(p + "attn_k.bias", c.kv_dim());
            L.bv = b.vec(p + "attn_v.bias", c.v_dim());
        }
        if (c.qk_norm != QkNorm::None) {
            const bool full = c.qk_norm == QkNorm::Full;
            L.q_norm = b.vec(p + "attn_q_norm.weight", full ? c.q_dim() : c.head_dim_k);
            L.k_norm = b.vec(p + "attn_k_norm.weight", full ? c.kv_dim() : c.head_dim_k);
        }
        if (c.post_norms) {
            L.post_attn_norm = b.vec(p + "post_attention_norm.weight", c.n_embd);
            L.post_ffn_norm = b.vec(p + "post_ffw_norm.weight", c.n_embd);
        }
        if (c.pre_norms) L.ffn_norm = b.vec(p + "ffn_norm.weight", c.n_embd);
        L.w_gate = b.matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff);
        L.w_up = b.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);
        L.w_down = b.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);
    }
    return w;
}

size_t weight_bytes_per_token(const ModelWeights& w) {
    auto bytes = [](const kernels::WeightMatrix& m) { return (size_t)m.n_out * m.row_bytes; };
    size_t total = bytes(w.output) + w.tok_embd.row_bytes;
    for (const LayerWeights& l : w.layers)
        for (const kernels::WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
            total += bytes(*m);
    return total;
}

std::vector<TensorType> matmul_weight_types(const ModelWeights& w) {
    std::vector<TensorType> out;
    auto add = [&](const kernels::WeightMatrix& m) {
        if (m.data && std::find(out.begin(), out.end(), m.type) == out.end()) out.push_back(m.type);
    };
    for (const LayerWeights& l : w.layers)
        for (const kernels::WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) add(*m);
    add(w.output);
    return out;
}

}  // namespace specdec::model
