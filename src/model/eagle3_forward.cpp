#include "model/eagle3_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/ops.h"

namespace specdec::model {

void Eagle3Batch::clear() {
    tokens.clear();
    positions.clear();
    seq_ids.clear();
    slots.clear();
    vis_begin.assign(1, 0);
    vis.clear();
    want_logits.clear();
    g.clear();
}

int Eagle3Batch::add(int32_t token, int32_t pos, int32_t seq, int32_t slot, std::span<const int32_t> ancestors,
                     bool logits, const float* g_row, int H) {
    if (vis_begin.empty()) vis_begin.push_back(0);
    tokens.push_back(token);
    positions.push_back(pos);
    seq_ids.push_back(seq);
    slots.push_back(slot);
    vis.insert(vis.end(), ancestors.begin(), ancestors.end());
    vis.push_back(slot);
    vis_begin.push_back((int32_t)vis.size());
    want_logits.push_back(logits ? 1 : 0);
    g.insert(g.end(), g_row, g_row + H);
    return size() - 1;
}

Eagle3Forward::Eagle3Forward(const Eagle3Head& head, const kernels::WeightMatrix& tok_embd)
    : head_(head), tok_embd_(tok_embd) {
    SPECDEC_CHECK(tok_embd.n_in == head.config().hidden, "EAGLE-3: the target's embeddings are ", tok_embd.n_in,
                  " wide, the head's hidden size is ", head.config().hidden);
}

kv::KvCacheOptions Eagle3Forward::kv_options(int n_ctx, int n_seq) const {
    kv::KvCacheOptions o;
    o.n_layer = 1;
    o.kv_dim = head_.config().kv_dim();
    o.n_ctx = n_ctx;
    o.n_seq = n_seq;
    return o;
}

void Eagle3Forward::fuse(const float* features, int n, float* g, ThreadPool& pool) {
    if (n > 0) kernels::matmul(head_.weights().fc, features, n, g, pool);
}

void Eagle3Forward::forward(const Eagle3Batch& b, kv::KvCache& cache, ThreadPool& pool, Eagle3Output& out) {
    const Eagle3Config& c = head_.config();
    const Eagle3Weights& w = head_.weights();
    const int n = b.size();
    const int H = c.hidden;
    SPECDEC_CHECK(n > 0, "EAGLE-3 forward: empty batch");
    SPECDEC_CHECK((int)b.positions.size() == n && (int)b.seq_ids.size() == n && (int)b.slots.size() == n &&
                      (int)b.vis_begin.size() == n + 1 && (int)b.want_logits.size() == n &&
                      b.g.size() == (size_t)n * H,
                  "EAGLE-3 forward: batch arrays have different lengths");
    SPECDEC_CHECK(cache.n_layer() == 1 && cache.kv_dim() == c.kv_dim(), "EAGLE-3 forward: the cache is not the head's");
    for (int i = 0; i < n; ++i) {
        const int s = b.seq_ids[i];
        SPECDEC_CHECK(s >= 0 && s < cache.n_seq(), "EAGLE-3 forward: row ", i, " has sequence ", s);
        SPECDEC_CHECK(b.tokens[i] >= 0 && b.tokens[i] < tok_embd_.n_out, "EAGLE-3 forward: row ", i, " has token ",
                      b.tokens[i], " outside the vocabulary of ", tok_embd_.n_out);
        for (int j = b.vis_begin[i]; j < b.vis_begin[i + 1]; ++j)
            SPECDEC_CHECK(b.vis[j] >= 0 && cache.committed(s) + b.vis[j] < cache.n_ctx(),
                          "EAGLE-3 forward: row ", i, " sees slot ", b.vis[j], " past the head's context of ",
                          cache.n_ctx(), " (", cache.committed(s), " committed)");
        SPECDEC_CHECK(b.vis_begin[i + 1] > b.vis_begin[i] && b.vis[b.vis_begin[i + 1] - 1] == b.slots[i],
                      "EAGLE-3 forward: row ", i, " must see its own slot last");
        SPECDEC_CHECK(b.positions[i] == cache.committed(s) + (b.vis_begin[i + 1] - b.vis_begin[i]) - 1,
                      "EAGLE-3 forward: row ", i, " at position ", b.positions[i],
                      " does not continue its ancestors after ", cache.committed(s), " committed rows");
    }
    const int q_dim = c.q_dim(), kv_dim = c.kv_dim();
    x_.resize((size_t)n * 2 * H);
    q_.resize((size_t)n * q_dim);
    k_.resize((size_t)n * kv_dim);
    v_.resize((size_t)n * kv_dim);
    att_.resize((size_t)n * q_dim);
    h_.resize((size_t)n * H);
    hn_.resize((size_t)n * H);
    gate_.resize((size_t)n * c.n_ff);
    up_.resize((size_t)n * c.n_ff);
    out.prenorm.resize((size_t)n * H);

    auto rows = [&](auto&& fn) {
        pool.parallel_for(n, 1, [&](int64_t b0, int64_t e0, int) {
            for (int64_t i = b0; i < e0; ++i) fn((int)i);
        });
    };
    // x = [input_norm(embed(token)); hidden_norm(g)]
    rows([&](int i) {
        float* xi = x_.data() + (size_t)i * 2 * H;
        kernels::dequantize_row(tok_embd_.type,
                                static_cast<const uint8_t*>(tok_embd_.data) + (size_t)b.tokens[i] * tok_embd_.row_bytes,
                                xi + H, H);
        kernels::rmsnorm(xi + H, w.input_norm, xi, H, c.norm_eps);
        kernels::rmsnorm(b.g.data() + (size_t)i * H, w.hidden_norm, xi + H, H, c.norm_eps);
    });
    {
        const kernels::WeightMatrix* ws[] = {&w.wq, &w.wk, &w.wv};
        float* ys[] = {q_.data(), k_.data(), v_.data()};
        kernels::matmul_group(ws, ys, 3, x_.data(), n, pool);
    }
    // Hugging Face llama RoPE (rotate_half): pairs (i, i + head_dim/2); a
    // GGUF head's q/k rows are permuted for pairs (2i, 2i + 1).
    kernels::RopeParams rp;
    rp.n_rot = c.head_dim;
    rp.neox = c.rope_neox;
    rp.freq_base = c.rope_theta;
    rows([&](int i) {
        float* qi = q_.data() + (size_t)i * q_dim;
        float* ki = k_.data() + (size_t)i * kv_dim;
        const float* vi = v_.data() + (size_t)i * kv_dim;
        kernels::rope(qi, c.n_head, c.head_dim, b.positions[i], rp);
        kernels::rope(ki, c.n_head_kv, c.head_dim, b.positions[i], rp);
        const int s = b.seq_ids[i];
        const int slot = cache.committed(s) + b.slots[i];
        uint16_t* kd = cache.k(0, s, slot);
        uint16_t* vd = cache.v(0, s, slot);
        for (int d = 0; d < kv_dim; ++d) kd[d] = fp32_to_fp16(ki[d]);
        for (int d = 0; d < kv_dim; ++d) vd[d] = fp32_to_fp16(vi[d]);
        cache.set_pos(s, slot, b.positions[i]);
    });
    // Attention: one work item per row and KV head (its GQA group of query heads).
    const int group = c.n_head / c.n_head_kv;
    const float scale = 1.0f / std::sqrt((float)c.head_dim);
    const int n_ctx = cache.n_ctx();
    scores_.resize((size_t)pool.size() * group * n_ctx);
    pool.parallel_for((int64_t)n * c.n_head_kv, 1, [&](int64_t begin, int64_t end, int worker) {
        float* scores = scores_.data() + (size_t)worker * group * n_ctx;
        std::vector<int> extra;
        for (int64_t t = begin; t < end; ++t) {
            const int i = (int)(t / c.n_head_kv);
            const int gk = (int)(t % c.n_head_kv);
            const int s = b.seq_ids[i];
            const int base = cache.committed(s);
            extra.clear();
            for (int j = b.vis_begin[i]; j < b.vis_begin[i + 1]; ++j) extra.push_back(base + b.vis[j]);
            kernels::VisibleSlots vis;
            vis.begin = 0;
            vis.end = base;
            vis.extra = extra.data();
            vis.n_extra = (int)extra.size();
            vis.batch_rows = 1;  // a row's result does not depend on its batch
            vis.extra_pos0 = b.positions[i] - vis.n_extra + 1;
            kernels::attention_heads(q_.data() + (size_t)i * q_dim + (size_t)gk * group * c.head_dim, c.head_dim,
                                     group, cache.k(0, s, 0) + (size_t)gk * c.head_dim,
                                     cache.v(0, s, 0) + (size_t)gk * c.head_dim, kv_dim, c.head_dim, scale, vis,
                                     scores, att_.data() + (size_t)i * q_dim + (size_t)gk * group * c.head_dim,
                                     c.head_dim);
        }
    });
    kernels::matmul(w.wo, att_.data(), n, h_.data(), pool);
    rows([&](int i) {
        float* hi = h_.data() + (size_t)i * H;
        // The residual: g itself, or (speculators' norm_before_residual) its normed copy in x.
        const float* res = c.norm_before_residual ? x_.data() + (size_t)i * 2 * H + H : b.g.data() + (size_t)i * H;
        kernels::add_inplace(hi, res, H);
        kernels::rmsnorm(hi, w.post_attn_norm, hn_.data() + (size_t)i * H, H, c.norm_eps);
    });
    {
        const kernels::WeightMatrix* ws[] = {&w.w_gate, &w.w_up};
        float* ys[] = {gate_.data(), up_.data()};
        kernels::matmul_group(ws, ys, 2, hn_.data(), n, pool);
    }
    rows([&](int i) {
        float* gi = gate_.data() + (size_t)i * c.n_ff;
        kernels::silu_mul(gi, up_.data() + (size_t)i * c.n_ff, gi, c.n_ff);
    });
    kernels::matmul(w.w_down, gate_.data(), n, out.prenorm.data(), pool);
    rows([&](int i) { kernels::add_inplace(out.prenorm.data() + (size_t)i * H, h_.data() + (size_t)i * H, H); });

    out.logit_rows.clear();
    for (int i = 0; i < n; ++i)
        if (b.want_logits[i]) out.logit_rows.push_back(i);
    const int m = (int)out.logit_rows.size();
    out.logits.resize((size_t)m * c.draft_vocab);
    if (m == 0) return;
    for (int k = 0; k < m; ++k)
        kernels::rmsnorm(out.prenorm.data() + (size_t)out.logit_rows[k] * H, w.out_norm, hn_.data() + (size_t)k * H, H,
                         c.norm_eps);
    kernels::matmul(w.lm_head, hn_.data(), m, out.logits.data(), pool);
}

}  // namespace specdec::model
