#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "kernels/attention.h"
#include "kernels/ops.h"
#include "model/layer_list.h"

namespace specdec::model {

namespace {

// Runs fn(i) for every row i in [0, n) on the pool. The per-row elementwise
// steps (norms, RoPE, SiLU, residuals) are independent across rows; run on
// the calling thread alone they were the serial part that kept a 2-thread
// prefill from scaling. A row is computed the same way wherever it runs, and
// a single row (decode) stays on the caller with no pool round trip.
template <class Fn>
void for_rows(ThreadPool& pool, int n, Fn&& fn) {
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) fn((int)i);
    });
}

// Sizes a scratch vector to n elements, allocating exactly what is asked when
// it grows (no doubling, and no copy: every caller overwrites the contents),
// and giving memory back when it holds far more than this call needs: the
// buffers of a 256-row prefill chunk, or a 64-row forward's logits, would
// otherwise stay resident through every 1-row decode that follows them.
template <class T>
void fit(std::vector<T>& v, size_t n) {
    const size_t cap = v.capacity();
    if (n > cap || (cap > 4 * n && (cap - n) * sizeof(T) >= (size_t(1) << 20))) {
        std::vector<T>().swap(v);
        v.reserve(n);
    }
    v.resize(n);
}

// Rows per FFN block (see forward): at 64 rows the block's matmuls are still
// compute-bound, and a 256-row prefill chunk's gate/up buffers shrink 4x
// (Qwen2.5 1.5B: 17.5 MiB -> 4.4 MiB).
constexpr int kFfnBlockRows = 64;

// Floats of LM-head output held at once in argmax_only mode (over all rows).
constexpr int64_t kArgmaxSliceFloats = int64_t(1) << 18;  // 1 MiB

}  // namespace

Transformer::Transformer(const io::GgufFile& file, int layer_limit)
    : Transformer(file, std::vector<int>{}) {
    SPECDEC_CHECK(layer_limit >= 0 && layer_limit <= config_.n_layer, "model '", file.path(), "' has ",
                  config_.n_layer, " layers; cannot keep ", layer_limit);
    if (layer_limit > 0) layers_ = first_layers(layer_limit);
    place_states();
}

void Transformer::place_states() {
    state_offset_.assign(config_.n_layer, 0);
    state_floats_ = 0;
    for (int il : layers_)
        if (config_.layer_is_recurrent[il]) {
            state_offset_[il] = state_floats_;
            state_floats_ += config_.ssm_state_floats();
        }
}

Transformer::Transformer(const io::GgufFile& file, const std::vector<int>& keep_layers)
    : file_(file), config_(read_model_config(file)), weights_(bind_weights(file, config_)) {
    if (keep_layers.empty()) {
        layers_ = first_layers(config_.n_layer);
    } else {
        validate_layer_list(keep_layers, config_.n_layer, file.path());
        layers_ = keep_layers;
    }
    SPECDEC_CHECK(config_.head_dim_k <= 1024, "model '", file.path(), "': head size ", config_.head_dim_k,
                  " is larger than supported (1024)");
    place_states();
}

kv::KvCacheOptions Transformer::kv_options(int n_ctx, int n_seq) const {
    kv::KvCacheOptions o;
    o.n_layer = n_layers_run();  // a shallow copy keeps K/V for its own layers only
    o.kv_dim = config_.kv_dim();
    o.n_ctx = n_ctx;
    o.n_seq = n_seq;
    // One state per speculative row up to this many rows of a sequence in one
    // forward (trees and chains of verification); a longer chain (a prefill
    // chunk) keeps its last row's state. Page-mapped: rows never written cost no RAM.
    o.recurrent_floats = state_floats_;
    o.recurrent_spec_rows = state_floats_ > 0 ? 65 : 0;
    return o;
}

void Transformer::plan_rows(const ForwardBatch& b, const kv::KvCache& cache) {
    const int n = b.size();
    SPECDEC_CHECK(n > 0, "forward: empty batch");
    SPECDEC_CHECK((int)b.positions.size() == n && (int)b.seq_ids.size() == n && (int)b.parents.size() == n &&
                      (int)b.want_logits.size() == n,
                  "forward: batch arrays have different lengths");
    plan_.resize(n);
    std::vector<int> rank(cache.n_seq(), 0);
    for (int i = 0; i < n; ++i) {
        const int s = b.seq_ids[i];
        SPECDEC_CHECK(s >= 0 && s < cache.n_seq(), "forward: row ", i, " has sequence id ", s, " outside [0, ",
                      cache.n_seq(), ")");
        SPECDEC_CHECK(b.tokens[i] >= 0 && b.tokens[i] < config_.n_vocab, "forward: row ", i, " has token id ",
                      b.tokens[i], " outside the vocabulary of ", config_.n_vocab);
        const int p = b.parents[i];
        SPECDEC_CHECK(p >= 0 && p <= i, "forward: row ", i, " has parent ", p, " (must be < row or itself)");
        SPECDEC_CHECK(p == i || b.seq_ids[p] == s, "forward: row ", i, " and its parent ", p,
                      " belong to different sequences");
        RowPlan& r = plan_[i];
        r.seq = s;
        r.slot = cache.committed(s) + rank[s]++;
        if (r.slot >= cache.n_ctx())
            throw Error(detail::concat("context length exceeded: sequence ", s, " needs more than ",
                                       cache.n_ctx(), " tokens (prompt plus generated)"));
        r.spec_slots.clear();
        if (p != i) r.spec_slots = plan_[p].spec_slots;  // parent's ancestors, already in order
        r.spec_slots.push_back(r.slot);
    }
}

void Transformer::attention_layer(int il, int cl, const ForwardBatch& b, kv::KvCache& cache, ThreadPool& pool) {
    const ModelConfig& c = config_;
    const int n = b.size();
    const int group = c.n_head / c.n_head_kv;
    const bool swa = c.layer_is_swa[il];
    // Gemma and Phi-3 scale q before the product (and rounding); others scale scores.
    const float score_scale = c.q_prescaled ? 1.0f : c.attn_scale;
    const int n_ctx = cache.n_ctx();
    // Work item: one row and a block of the query heads of one KV head. The
    // heads of a block share every K/V load (kernels::attention_heads); blocks
    // are split only when rows x KV heads alone would leave workers idle
    // (decode: 1 row). A head's result does not depend on its block.
    int blocks = 1;
    while (blocks < group && (int64_t)n * c.n_head_kv * blocks < 4 * (int64_t)pool.size()) ++blocks;
    const int per_block = (group + blocks - 1) / blocks;
    blocks = (group + per_block - 1) / per_block;
    const int64_t per_row = (int64_t)c.n_head_kv * blocks;
    scores_.resize((size_t)pool.size() * per_block * n_ctx);
    pool.parallel_for((int64_t)n * per_row, 1, [&](int64_t begin, int64_t end, int worker) {
        float* scores = scores_.data() + (size_t)worker * per_block * n_ctx;
        std::vector<int> extra;
        for (int64_t t = begin; t < end; ++t) {
            // Last rows first: in a causal batch they see the most cells, and
            // claiming the heavy items early balances the workers.
            const int i = n - 1 - (int)(t / per_row);
            const int g = (int)(t % per_row) / blocks;
            const int h0 = g * group + (int)(t % blocks) * per_block;
            const int n_q = std::min(per_block, (g + 1) * group - h0);
            const RowPlan& r = plan_[i];
            kernels::VisibleSlots vis;
            vis.begin = 0;
            vis.end = cache.committed(r.seq);
            const int32_t qpos = b.positions[i];
            extra.clear();
            if (swa) {
                // Committed slot j holds position j (KvCache enforces it).
                vis.begin = std::clamp(qpos - c.sliding_window + 1, 0, vis.end);
                for (int s : r.spec_slots)
                    if (qpos - cache.pos(r.seq, s) < c.sliding_window) extra.push_back(s);
            } else {
                extra = r.spec_slots;
            }
            vis.extra = extra.data();
            vis.n_extra = (int)extra.size();
            vis.softcap = c.attn_softcap;
            // Always llama.cpp's single-token (decode) summation order, even in a batch:
            // llama.cpp itself sums differently for batches, but a row's result must not
            // depend on its batch, or verification would disagree with plain decoding
            // at near-ties and speculation would stop being lossless.
            vis.batch_rows = 1;
            vis.extra_pos0 = qpos - vis.n_extra + 1;  // extras: the ancestor chain ending at this row
            kernels::attention_heads(q_.data() + (size_t)i * c.q_dim() + (size_t)h0 * c.head_dim_k, c.head_dim_k, n_q,
                                     cache.k(cl, r.seq, 0) + (size_t)g * c.head_dim_k,
                                     cache.v(cl, r.seq, 0) + (size_t)g * c.head_dim_v, c.kv_dim(), c.head_dim_k,
                                     score_scale, vis, scores,
                                     att_.data() + (size_t)i * c.q_dim() + (size_t)h0 * c.head_dim_v, c.head_dim_v);
        }
    });
}

void Transformer::mixing_block(int il, int cl, const float* block_in, const ForwardBatch& b, kv::KvCache& cache,
                               ThreadPool& pool) {
    const ModelConfig& c = config_;
    const LayerWeights& L = weights_.layers[il];
    const int n = b.size();
    if (c.layer_is_recurrent[il]) {
        delta_net_.forward(L, c, block_in, rec_rows_, state_offset_[il], cache.recurrent(), o_.data(), pool);
        return;
    }
    {
        // Q, K and V in one dispatch (one activation quantization per type).
        // With an output gate (qwen35) wq gives each head's query, then its gate.
        const kernels::WeightMatrix* ws[] = {&L.wq, &L.wk, &L.wv};
        float* ys[] = {c.attn_out_gate ? q_gate_.data() : q_.data(), k_.data(), v_.data()};
        kernels::matmul_group(ws, ys, 3, block_in, n, pool);
    }
    kernels::RopeParams rp;
    rp.n_rot = c.n_rot;
    rp.neox = c.rope_neox;
    rp.freq_base = c.layer_is_swa[il] ? c.rope_freq_base_swa : c.rope_freq_base;
    rp.freq_scale = c.layer_is_swa[il] ? c.rope_freq_scale_swa : c.rope_freq_scale;
    rp.freq_factors = weights_.rope_freqs;
    rp.attn_factor = c.rope_attn_factor;
    if (weights_.rope_factors_long)  // LongRoPE: chosen by the context size, as llama.cpp does
        rp.freq_factors = cache.n_ctx() > c.n_ctx_orig ? weights_.rope_factors_long : weights_.rope_factors_short;
    for_rows(pool, n, [&](int i) {
        float* qi = q_.data() + (size_t)i * c.q_dim();
        float* ki = k_.data() + (size_t)i * c.kv_dim();
        float* vi = v_.data() + (size_t)i * c.v_dim();
        if (c.attn_out_gate) {
            const int hd = c.head_dim_k;
            const float* qg = q_gate_.data() + (size_t)i * 2 * c.q_dim();
            float* gi = gate_q_.data() + (size_t)i * c.q_dim();
            for (int h = 0; h < c.n_head; ++h) {
                std::memcpy(qi + (size_t)h * hd, qg + (size_t)2 * h * hd, hd * sizeof(float));
                std::memcpy(gi + (size_t)h * hd, qg + (size_t)(2 * h + 1) * hd, hd * sizeof(float));
            }
        }
        if (c.qkv_bias) {
            kernels::add_inplace(qi, L.bq, c.q_dim());
            kernels::add_inplace(ki, L.bk, c.kv_dim());
            kernels::add_inplace(vi, L.bv, c.v_dim());
        }
        if (c.qk_norm == QkNorm::PerHead) {
            for (int h = 0; h < c.n_head; ++h)
                kernels::rmsnorm(qi + h * c.head_dim_k, L.q_norm, qi + h * c.head_dim_k, c.head_dim_k, c.norm_eps);
            for (int h = 0; h < c.n_head_kv; ++h)
                kernels::rmsnorm(ki + h * c.head_dim_k, L.k_norm, ki + h * c.head_dim_k, c.head_dim_k, c.norm_eps);
        } else if (c.qk_norm == QkNorm::Full) {
            kernels::rmsnorm(qi, L.q_norm, qi, c.q_dim(), c.norm_eps);
            kernels::rmsnorm(ki, L.k_norm, ki, c.kv_dim(), c.norm_eps);
        }
        if (!c.layer_no_rope[il]) {
            kernels::rope(qi, c.n_head, c.head_dim_k, b.positions[i], rp);
            kernels::rope(ki, c.n_head_kv, c.head_dim_k, b.positions[i], rp);
        }
        if (c.q_prescaled) kernels::scale_inplace(qi, c.attn_scale, c.q_dim());
        // Store this row's key and value in its speculative slot.
        const RowPlan& r = plan_[i];
        uint16_t* kd = cache.k(cl, r.seq, r.slot);
        uint16_t* vd = cache.v(cl, r.seq, r.slot);
        for (int d = 0; d < c.kv_dim(); ++d) kd[d] = fp32_to_fp16(ki[d]);
        for (int d = 0; d < c.v_dim(); ++d) vd[d] = fp32_to_fp16(vi[d]);
    });
    attention_layer(il, cl, b, cache, pool);
    if (c.attn_out_gate)
        for_rows(pool, n, [&](int i) {
            float* ai = att_.data() + (size_t)i * c.q_dim();
            const float* gi = gate_q_.data() + (size_t)i * c.q_dim();
            for (int d = 0; d < c.q_dim(); ++d) ai[d] *= 1.0f / (1.0f + std::exp(-gi[d]));
        });
    kernels::matmul(L.wo, att_.data(), n, o_.data(), pool);
}

void Transformer::forward(const ForwardBatch& b, kv::KvCache& cache, ThreadPool& pool, ForwardResult& out) {
    const ModelConfig& c = config_;
    plan_rows(b, cache);
    const int n = b.size();
    const int E = c.n_embd;
    fit(x_, (size_t)n * E);
    fit(h_, (size_t)n * E);
    fit(q_, (size_t)n * c.q_dim());
    fit(k_, (size_t)n * c.kv_dim());
    fit(v_, (size_t)n * c.v_dim());
    fit(att_, (size_t)n * c.q_dim());
    fit(o_, (size_t)n * E);
    fit(q_gate_, c.attn_out_gate ? (size_t)n * 2 * c.q_dim() : 0);
    fit(gate_q_, c.attn_out_gate ? (size_t)n * c.q_dim() : 0);
    for (int i = 0; i < n; ++i) cache.set_pos(plan_[i].seq, plan_[i].slot, b.positions[i]);  // distinct slots per row
    if (state_floats_ > 0) {
        SPECDEC_CHECK(cache.recurrent().floats() == state_floats_, "forward: the cache holds recurrent states of ",
                      cache.recurrent().floats(), " floats, the model needs ", state_floats_);
        // Which rows keep a state of their own (kv/recurrent_states.h): the
        // ones a commit can end at (a row with logits, the last row of its
        // sequence) and the ones with a child other than the next row.
        kv::RecurrentStates& rs = cache.recurrent();
        std::vector<int> children(n, 0), last_row(cache.n_seq(), -1);
        for (int i = 0; i < n; ++i) {
            if (b.parents[i] != i) ++children[b.parents[i]];
            last_row[plan_[i].seq] = i;
        }
        for (int i = 0; i < n; ++i)
            if (plan_[i].slot == cache.committed(plan_[i].seq)) rs.start_forward(plan_[i].seq);  // its first row
        rec_rows_.resize(n);
        for (int i = 0; i < n; ++i) {
            const int s = plan_[i].seq, p = b.parents[i];
            const bool next_is_child = i + 1 < n && b.parents[i + 1] == i;
            const bool keep = b.want_logits[i] || last_row[s] == i || children[i] > (next_is_child ? 1 : 0);
            rec_rows_[i] = {s, plan_[i].slot - cache.committed(s)};
            rs.place_row(s, rec_rows_[i].rank, p == i ? -1 : rec_rows_[p].rank, keep);
        }
    }
    const int ffn_rows = std::min(n, kFfnBlockRows);
    fit(gate_, c.n_expert > 0 ? 0 : (size_t)ffn_rows * c.n_ff);
    fit(up_, c.n_expert > 0 ? 0 : (size_t)ffn_rows * c.n_ff);
    // Capture indices count the layers this instance runs (the model's own
    // layer numbers unless layers are skipped): n_layers_run() - 1 is the last.
    for (int cap : b.capture_layers)
        SPECDEC_CHECK(cap >= 0 && cap < n_layers_run(), "forward: capture layer ", cap, " out of range");
    out.hidden.assign(b.capture_layers.size(), {});

    const auto& emb = weights_.tok_embd;
    for (int i = 0; i < n; ++i) {
        float* xi = x_.data() + (size_t)i * E;
        kernels::dequantize_row(emb.type, static_cast<const uint8_t*>(emb.data) + (size_t)b.tokens[i] * emb.row_bytes,
                                xi, E);
        if (c.embd_scale != 1.0f) kernels::scale_inplace(xi, c.embd_scale, E);
    }

    const int n_run = n_layers_run();
    SPECDEC_CHECK(cache.n_layer() == n_run, "forward: KV cache has ", cache.n_layer(), " layers, model runs ", n_run);
    for (int cl = 0; cl < n_run; ++cl) {
        const int il = layers_[cl];  // model layer; cl is its layer in the cache
        const LayerWeights& L = weights_.layers[il];
        // Without pre-norms (olmo2) attention and FFN read the residual stream itself.
        const float* block_in = c.pre_norms ? h_.data() : x_.data();
        if (c.pre_norms) {
            for_rows(pool, n, [&](int i) {
                kernels::rmsnorm(x_.data() + (size_t)i * E, L.attn_norm, h_.data() + (size_t)i * E, E, c.norm_eps);
            });
        }
        mixing_block(il, cl, block_in, b, cache, pool);
        for_rows(pool, n, [&](int i) {
            float* oi = o_.data() + (size_t)i * E;
            if (c.post_norms) kernels::rmsnorm(oi, L.post_attn_norm, oi, E, c.norm_eps);
            kernels::add_inplace(x_.data() + (size_t)i * E, oi, E);
            if (c.pre_norms)
                kernels::rmsnorm(x_.data() + (size_t)i * E, L.ffn_norm, h_.data() + (size_t)i * E, E, c.norm_eps);
        });
        // The FFN in blocks of rows: gate_ and up_ (n_ff wide, the widest
        // scratch) hold one block, not a whole prefill chunk. A row's result
        // does not depend on the rows it is computed with.
        for (int r0 = 0; r0 < n; r0 += ffn_rows) {
            const int nr = std::min(ffn_rows, n - r0);
            if (c.n_expert > 0) {
                moe_.forward(L, c, block_in + (size_t)r0 * E, nr, o_.data() + (size_t)r0 * E, pool);
                continue;
            }
            const kernels::WeightMatrix* ws[] = {&L.w_gate, &L.w_up};
            float* ys[] = {gate_.data(), up_.data()};
            kernels::matmul_group(ws, ys, 2, block_in + (size_t)r0 * E, nr, pool);
            for_rows(pool, nr, [&](int i) {
                float* gi = gate_.data() + (size_t)i * c.n_ff;
                const float* ui = up_.data() + (size_t)i * c.n_ff;
                if (c.gelu_ffn) {
                    kernels::gelu_mul(gi, ui, gi, c.n_ff);
                } else {
                    kernels::silu_mul(gi, ui, gi, c.n_ff);
                }
            });
            kernels::matmul(L.w_down, gate_.data(), nr, o_.data() + (size_t)r0 * E, pool);
        }
        for_rows(pool, n, [&](int i) {
            float* oi = o_.data() + (size_t)i * E;
            if (c.post_norms) kernels::rmsnorm(oi, L.post_ffn_norm, oi, E, c.norm_eps);
            kernels::add_inplace(x_.data() + (size_t)i * E, oi, E);
        });
        for (size_t ci = 0; ci < b.capture_layers.size(); ++ci)
            if (b.capture_layers[ci] == cl) out.hidden[ci].assign(x_.begin(), x_.begin() + (size_t)n * E);
    }

    // Final norm and LM head for the rows that asked only.
    out.logit_rows.clear();
    for (int i = 0; i < n; ++i)
        if (b.want_logits[i]) out.logit_rows.push_back(i);
    const int m = (int)out.logit_rows.size();
    out.n_vocab = c.n_vocab;
    fit(out.logits, b.argmax_only ? 0 : (size_t)m * c.n_vocab);
    out.argmax.assign(b.argmax_only ? m : 0, 0);
    out.max_logit.assign(b.argmax_only ? m : 0, 0.0f);
    if (m == 0) return;
    for (int k = 0; k < m; ++k)
        kernels::rmsnorm(x_.data() + (size_t)out.logit_rows[k] * E, weights_.output_norm, h_.data() + (size_t)k * E, E,
                         c.norm_eps);
    if (b.argmax_only) {
        lm_head_argmax(m, pool, out);
    } else {
        kernels::matmul(weights_.output, h_.data(), m, out.logits.data(), pool);
        if (c.final_softcap > 0.0f)
            for_rows(pool, m, [&](int k) {
                kernels::softcap_inplace(out.logits.data() + (size_t)k * c.n_vocab, c.final_softcap, c.n_vocab);
            });
    }
}

void Transformer::lm_head_argmax(int m, ThreadPool& pool, ForwardResult& out) {
    // The output matrix in slices of whole rows (vocabulary entries): each slice
    // gives every row's logits for those tokens, folded into a running argmax.
    // The matrix is still read once (a slice serves all m rows), and a logit is
    // the same dot product whatever slice it is in (matmul's result per output
    // does not depend on how its rows are split; the tests compare bit for bit).
    const int64_t V = config_.n_vocab;
    const int64_t w = std::min(V, std::max<int64_t>(64, (kArgmaxSliceFloats / m) & ~int64_t(63)));
    fit(slice_, (size_t)m * (size_t)w);
    kernels::WeightMatrix part = weights_.output;
    for (int64_t v0 = 0; v0 < V; v0 += w) {
        const int64_t nw = std::min(w, V - v0);
        part.data = static_cast<const uint8_t*>(weights_.output.data) + (size_t)v0 * weights_.output.row_bytes;
        part.n_out = nw;
        kernels::matmul(part, h_.data(), m, slice_.data(), pool);
        if (config_.final_softcap > 0.0f) kernels::softcap_inplace(slice_.data(), config_.final_softcap, (int64_t)m * nw);
        for (int k = 0; k < m; ++k) {
            const float* y = slice_.data() + (size_t)k * nw;
            // sample::argmax's scan (first index of the largest, strict >),
            // continued across slices.
            int64_t j = 0;
            if (v0 == 0) {
                out.argmax[k] = 0;
                out.max_logit[k] = y[0];
                j = 1;
            }
            int32_t best = out.argmax[k];
            float bv = out.max_logit[k];
            for (; j < nw; ++j)
                if (y[j] > bv) {
                    bv = y[j];
                    best = (int32_t)(v0 + j);
                }
            out.argmax[k] = best;
            out.max_logit[k] = bv;
        }
    }
}

}  // namespace specdec::model
