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
        return bind(name, {n_in, n_out}, n_out);
    }

    // A 1-D tensor used as a matrix of one output row (a gate's weights).
    kernels::WeightMatrix row(const std::string& name, int64_t n_in) { return bind(name, {n_in}, 1); }

    // A tensor of several matrices stacked by rows (phi3's attn_qkv, ffn_up):
    // one view per part, n_outs[i] rows each, in order.
    std::vector<kernels::WeightMatrix> stacked(const std::string& name, int64_t n_in,
                                               const std::vector<int64_t>& n_outs) {
        int64_t total = 0;
        for (int64_t n : n_outs) total += n;
        kernels::WeightMatrix all = bind(name, {n_in, total}, total);
        std::vector<kernels::WeightMatrix> parts;
        int64_t row = 0;
        for (int64_t n : n_outs) {
            kernels::WeightMatrix m = all;
            m.data = static_cast<const uint8_t*>(all.data) + (size_t)row * all.row_bytes;
            m.n_out = n;
            parts.push_back(m);
            row += n;
        }
        return parts;
    }

    // A 3-D expert tensor {n_in, n_out, n_expert}.
    ExpertMatrices experts(const std::string& name, int64_t n_in, int64_t n_out, int n_expert) {
        ExpertMatrices e;
        e.first = bind(name, {n_in, n_out, n_expert}, n_out);
        e.n_expert = n_expert;
        return e;
    }

    const float* vec(const std::string& name, int64_t n, bool required = true) {
        return floats(name, {n}, required);
    }

    // A small tensor read as floats (dims innermost first, as GGUF gives them).
    const float* floats(const std::string& name, std::vector<int64_t> dims, bool required = true) {
        const io::GgufTensor* t = f_.find_tensor(name);
        if (!t) {
            SPECDEC_CHECK(!required, "model '", f_.path(), "': missing tensor '", name, "'");
            return nullptr;
        }
        check_shape(*t, dims);
        int64_t n = 1;
        for (int64_t d : dims) n *= d;
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
    // A matrix view of the first n_out rows of tensor `name` of shape `dims`.
    kernels::WeightMatrix bind(const std::string& name, std::vector<int64_t> dims, int64_t n_out) {
        const io::GgufTensor& t = f_.tensor(name);
        check_shape(t, dims);
        SPECDEC_CHECK(kernels::is_supported_weight_type(t.type), "model '", f_.path(), "': tensor '", name,
                      "' has type ", tensor_type_name(t.type), " which has no matmul kernel");
        kernels::WeightMatrix m;
        m.type = t.type;
        m.data = t.data;
        m.n_in = dims[0];
        m.n_out = n_out;
        m.row_bytes = tensor_row_bytes(t.type, dims[0]);
        return m;
    }

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

// Qwen3.5: a gated DeltaNet or a gated full-attention block, then the dense
// FFN, whose pre-norm the file calls post_attention_norm.
void bind_qwen35_layer(Binder& b, const ModelConfig& c, const std::string& p, int il, LayerWeights& L) {
    if (c.layer_is_recurrent[il]) {
        const int conv = c.ssm_conv_dim(), nv = c.ssm_n_v_heads;
        L.ssm_in = b.matrix(p + "attn_qkv.weight", c.n_embd, conv);
        L.ssm_z = b.matrix(p + "attn_gate.weight", c.n_embd, c.ssm_value_dim());
        L.ssm_beta = b.matrix(p + "ssm_beta.weight", c.n_embd, nv);
        L.ssm_alpha = b.matrix(p + "ssm_alpha.weight", c.n_embd, nv);
        L.ssm_out = b.matrix(p + "ssm_out.weight", c.ssm_value_dim(), c.n_embd);
        L.ssm_conv = b.floats(p + "ssm_conv1d.weight", {c.ssm_d_conv, conv});
        L.ssm_dt_bias = b.vec(p + "ssm_dt.bias", nv);
        L.ssm_a = b.vec(p + "ssm_a", nv);
        L.ssm_norm = b.vec(p + "ssm_norm.weight", c.ssm_d_state);
    } else {
        L.wq = b.matrix(p + "attn_q.weight", c.n_embd, 2 * (int64_t)c.q_dim());  // query and gate per head
        L.wk = b.matrix(p + "attn_k.weight", c.n_embd, c.kv_dim());
        L.wv = b.matrix(p + "attn_v.weight", c.n_embd, c.v_dim());
        L.wo = b.matrix(p + "attn_output.weight", c.q_dim(), c.n_embd);
        L.q_norm = b.vec(p + "attn_q_norm.weight", c.head_dim_k);
        L.k_norm = b.vec(p + "attn_k_norm.weight", c.head_dim_k);
    }
    L.ffn_norm = b.vec(p + "post_attention_norm.weight", c.n_embd);
    if (c.n_expert > 0) {  // qwen35moe
        L.router = b.matrix(p + "ffn_gate_inp.weight", c.n_embd, c.n_expert);
        L.gate_exps = b.experts(p + "ffn_gate_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert);
        L.up_exps = b.experts(p + "ffn_up_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert);
        L.down_exps = b.experts(p + "ffn_down_exps.weight", c.n_ff_exp, c.n_embd, c.n_expert);
        L.shexp_gate = b.row(p + "ffn_gate_inp_shexp.weight", c.n_embd);
        L.w_gate_shexp = b.matrix(p + "ffn_gate_shexp.weight", c.n_embd, c.n_ff_shexp);
        L.w_up_shexp = b.matrix(p + "ffn_up_shexp.weight", c.n_embd, c.n_ff_shexp);
        L.w_down_shexp = b.matrix(p + "ffn_down_shexp.weight", c.n_ff_shexp, c.n_embd);
        return;
    }
    L.w_gate = b.matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff);
    L.w_up = b.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);
    L.w_down = b.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);
}

}  // namespace

ModelWeights bind_weights(const io::GgufFile& f, const ModelConfig& c) {
    ModelWeights w;
    Binder b(f, w);
    w.tok_embd = b.matrix("token_embd.weight", c.n_embd, c.n_vocab);
    w.output_norm = b.vec("output_norm.weight", c.n_embd);
    // Llama 3.1+ ship their "llama3" RoPE scaling as per-pair factors.
    w.rope_freqs = b.vec("rope_freqs.weight", c.n_rot / 2, false);
    if (c.arch == Arch::Phi3) {
        // LongRoPE (Phi-3 128k, Phi-3.5, Phi-4-mini): both sets or neither.
        w.rope_factors_long = b.vec("rope_factors_long.weight", c.n_rot / 2, false);
        w.rope_factors_short = b.vec("rope_factors_short.weight", c.n_rot / 2, w.rope_factors_long != nullptr);
        SPECDEC_CHECK(w.rope_factors_long || !f.find_tensor("rope_factors_short.weight"), "model '", f.path(),
                      "': rope_factors_short without rope_factors_long");
    }
    w.output = f.find_tensor("output.weight") ? b.matrix("output.weight", c.n_embd, c.n_vocab) : w.tok_embd;
    w.layers.resize(c.n_layer);
    for (int il = 0; il < c.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        LayerWeights& L = w.layers[il];
        if (c.pre_norms) L.attn_norm = b.vec(p + "attn_norm.weight", c.n_embd);
        if (c.arch == Arch::Qwen35 || c.arch == Arch::Qwen35Moe) {
            bind_qwen35_layer(b, c, p, il, L);
            continue;
        }
        if (f.find_tensor(p + "attn_qkv.weight")) {
            // Fused (phi3): one product of the same rows either way, so views
            // of it give what separate matrices would.
            SPECDEC_CHECK(c.arch == Arch::Phi3, "model '", f.path(), "': a fused attn_qkv in a ", c.arch_name,
                          " model is not supported");
            const auto qkv = b.stacked(p + "attn_qkv.weight", c.n_embd, {c.q_dim(), c.kv_dim(), c.v_dim()});
            L.wq = qkv[0];
            L.wk = qkv[1];
            L.wv = qkv[2];
        } else {
            L.wq = b.matrix(p + "attn_q.weight", c.n_embd, c.q_dim());
            L.wk = b.matrix(p + "attn_k.weight", c.n_embd, c.kv_dim());
            L.wv = b.matrix(p + "attn_v.weight", c.n_embd, c.v_dim());
        }
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
        if (c.n_expert > 0) {
            L.router = b.matrix(p + "ffn_gate_inp.weight", c.n_embd, c.n_expert);
            L.gate_exps = b.experts(p + "ffn_gate_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert);
            L.up_exps = b.experts(p + "ffn_up_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert);
            L.down_exps = b.experts(p + "ffn_down_exps.weight", c.n_ff_exp, c.n_embd, c.n_expert);
            continue;
        }
        if (c.arch == Arch::Phi3) {
            // ffn_up holds gate and up: 2 * n_ff rows, gate first.
            const auto gate_up = b.stacked(p + "ffn_up.weight", c.n_embd, {c.n_ff, c.n_ff});
            L.w_gate = gate_up[0];
            L.w_up = gate_up[1];
        } else {
            L.w_gate = b.matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff);
            L.w_up = b.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);
        }
        L.w_down = b.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);
    }
    return w;
}

size_t weight_bytes_per_token(const ModelWeights& w, const ModelConfig& c) {
    auto bytes = [](const kernels::WeightMatrix& m) { return (size_t)m.n_out * m.row_bytes; };
    size_t total = bytes(w.output) + w.tok_embd.row_bytes;
    for (const LayerWeights& l : w.layers) {
        for (const kernels::WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router,
                                               &l.ssm_in, &l.ssm_z, &l.ssm_beta, &l.ssm_alpha, &l.ssm_out, &l.shexp_gate,
                                               &l.w_gate_shexp, &l.w_up_shexp, &l.w_down_shexp})
            total += bytes(*m);  // unbound matrices (dense vs MoE) have no rows
        for (const ExpertMatrices* e : {&l.gate_exps, &l.up_exps, &l.down_exps})
            total += (size_t)c.n_expert_used * bytes(e->first);
    }
    return total;
}

std::vector<TensorType> matmul_weight_types(const ModelWeights& w) {
    std::vector<TensorType> out;
    auto add = [&](const kernels::WeightMatrix& m) {
        if (m.data && std::find(out.begin(), out.end(), m.type) == out.end()) out.push_back(m.type);
    };
    for (const LayerWeights& l : w.layers) {
        for (const kernels::WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router,
                                               &l.ssm_in, &l.ssm_z, &l.ssm_beta, &l.ssm_alpha, &l.ssm_out, &l.shexp_gate,
                                               &l.w_gate_shexp, &l.w_up_shexp, &l.w_down_shexp})
            add(*m);
        for (const ExpertMatrices* e : {&l.gate_exps, &l.up_exps, &l.down_exps}) add(e->first);
    }
    add(w.output);
    return out;
}

}  // namespace specdec::model
