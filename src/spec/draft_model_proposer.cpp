#include "spec/draft_model_proposer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "sample/fast_select.h"

namespace specdec::spec {

namespace {
using Clock = std::chrono::steady_clock;

// Indices of the k largest values of q that are > 0, best first, ties to the
// lower id (the same tie rule as argmax): one partial-selection pass.
std::vector<int32_t> top_k_ids(const std::vector<float>& q, int k) {
    std::vector<int32_t> ids(std::max(0, k));
    const int n = sample::top_k_select(q.data(), (int)q.size(), k, ids.data());
    ids.resize(n);
    while (!ids.empty() && !(q[ids.back()] > 0)) ids.pop_back();
    return ids;
}
}  // namespace

DraftModelProposer::DraftModelProposer(model::Transformer& model, kv::KvCache& cache, ThreadPool& pool,
                                       const DraftModelOptions& opts)
    : model_(model), cache_(cache), pool_(pool), opts_(opts) {
    SPECDEC_CHECK(opts.target_n_vocab > 0, "draft proposer: target vocabulary size not set");
    SPECDEC_CHECK(opts.chain_k >= 1, "draft proposer: --draft-k must be >= 1");
    SPECDEC_CHECK(opts.tree_topk >= 1 && opts.tree_depth >= 1 && opts.tree_budget >= 2,
                  "draft proposer: tree needs topk >= 1, depth >= 1, budget >= 2");
    SPECDEC_CHECK(opts.tree_width >= 0, "draft proposer: tree width must be >= 0");
    SPECDEC_CHECK(opts.chain_min_prob >= 0.0f && opts.chain_min_prob < 1.0f,
                  "draft proposer: chain min prob must be in [0, 1)");
    SPECDEC_CHECK(opts.window == 0 || opts.window >= 8, "draft proposer: window must be 0 (off) or >= 8");
    SPECDEC_CHECK(!opts.subset || opts.subset->n_target_vocab() == opts.target_n_vocab,
                  "draft proposer: vocabulary subset made for another vocabulary");
    deterministic_ = opts.params.greedy() || !opts.sampled;
    const auto& p = opts.params;
    fast_top_ = deterministic_ && (p.greedy() || (p.top_k == 0 && p.top_p >= 1.0f && p.min_p <= 0.0f));
    if (opts.subset) {
        const int bound = std::min(model.config().n_vocab, opts.target_n_vocab);
        for (int32_t t : opts.subset->ids())
            if (t < bound) allowed_.push_back(t);
        if (opts.subset_lm_head && !allowed_.empty()) {
            head_ = std::make_unique<model::LmHeadSubset>(model, allowed_);  // allowed_ ascending (d2t is)
            col_of_.assign(opts.target_n_vocab, head_->size());
            for (int j = 0; j < head_->size(); ++j) col_of_[allowed_[j]] = j;
        }
    }
    known_.resize(cache.n_seq());
    wstart_.assign(cache.n_seq(), 0);
}

void DraftModelProposer::begin(int seq) {
    known_[seq].clear();
    wstart_[seq] = 0;
    cache_.clear(seq);
}

// The draft cache already holds the prefix: remember it so prefill() and the
// first propose read only what follows. Windowed drafts re-read their window
// themselves, so they start empty.
void DraftModelProposer::begin_with_prefix(int seq, std::span<const int32_t> prefix) {
    if (opts_.window > 0 || cache_.committed(seq) < (int)prefix.size()) {
        begin(seq);
        return;
    }
    known_[seq].assign(prefix.begin(), prefix.end());
    wstart_[seq] = 0;
    cache_.truncate(seq, (int)prefix.size());
}

// Reads history[0, H-1) into the draft cache in chunks (the root is fed by
// the first propose, with the drafts). Windowed drafts leave it to propose.
void DraftModelProposer::prefill(int seq, std::span<const int32_t> history) {
    if (opts_.window > 0 || history.size() < 2) return;
    const int chunk = std::max(1, opts_.prefill_chunk);
    auto& known = known_[seq];
    const int H = (int)history.size();
    if (H - 1 > cache_.n_ctx()) return;  // cannot happen: the target holds it
    int common = 0;
    while (common < (int)known.size() && common < H - 1 && known[common] == history[common]) ++common;
    cache_.truncate(seq, common);
    known.resize(common);
    while ((int)known.size() < H - 1) {
        const int from = (int)known.size();
        const int n = std::min(chunk, H - 1 - from);
        batch_.clear();
        batch_.add_chain({history.begin() + from, history.begin() + from + n}, from, seq, false);
        forward();
        cache_.commit_length(seq, n);
        known.insert(known.end(), history.begin() + from, history.begin() + from + n);
    }
}

void DraftModelProposer::forward() {
    const auto t0 = Clock::now();
    if (!head_) {
        model_.forward(batch_, cache_, pool_, result_);
    } else {
        head_->forward(model_, batch_, cache_, pool_, result_);  // logits over the subset only
    }
    forward_s_ += std::chrono::duration<double>(Clock::now() - t0).count();
}

std::span<const int32_t> DraftModelProposer::to_columns(std::span<const int32_t> ids) {
    cols_.resize(ids.size());
    for (size_t i = 0; i < ids.size(); ++i)
        cols_[i] = ids[i] >= 0 && ids[i] < (int32_t)col_of_.size() ? col_of_[ids[i]] : head_->size();
    return cols_;
}

// Brings the draft cache to hold hist[0, H-1) and feeds the root, all
// sequences in one forward: rolls back to the longest prefix the draft already
// holds (it may have seen drafts the target rejected), then reads the rest.
void DraftModelProposer::sync_caches(std::vector<Work>& work) {
    const int chunk = std::max(1, opts_.prefill_chunk);
    for (Work& w : work) {
        auto& known = known_[w.seq];
        const int H = (int)w.hist.size();
        int common = 0;
        while (common < (int)known.size() && common < H - 1 && known[common] == w.hist[common]) ++common;
        cache_.truncate(w.seq, common);
        known.resize(common);
        // A long catch-up (the prompt) is read in chunks of its own first.
        while (H - (int)known.size() > chunk) {
            const int from = (int)known.size();
            batch_.clear();
            batch_.add_chain({w.hist.begin() + from, w.hist.begin() + from + chunk}, from, w.seq, false);
            forward();
            cache_.commit_length(w.seq, chunk);
            known.insert(known.end(), w.hist.begin() + from, w.hist.begin() + from + chunk);
        }
    }
    batch_.clear();
    for (Work& w : work) {
        const int from = (int)known_[w.seq].size();
        batch_.add_chain({w.hist.begin() + from, w.hist.end()}, from, w.seq, false);
        w.root_row = batch_.size() - 1;
    }
    forward();
    for (Work& w : work) {
        auto& known = known_[w.seq];
        cache_.commit_length(w.seq, (int)w.hist.size() - (int)known.size());
        known.assign(w.hist.begin(), w.hist.end());
    }
}

std::vector<int32_t> DraftModelProposer::node_history(const Work& w, int node) const {
    std::vector<int32_t> path;
    for (int c = node; c >= 0; c = w.cands[c].parent) path.push_back(w.cands[c].token);
    std::vector<int32_t> h(w.hist.begin(), w.hist.end());
    h.insert(h.end(), path.rbegin(), path.rend());
    return h;
}

void DraftModelProposer::draft_dist(int batch_row, const Work& w, int node, std::vector<float>& q) {
    const auto it = std::lower_bound(result_.logit_rows.begin(), result_.logit_rows.end(), batch_row);
    SPECDEC_CHECK(it != result_.logit_rows.end() && *it == batch_row, "draft: no logits for row ", batch_row);
    const int nv = result_.n_vocab;
    const float* src = result_.row_logits((size_t)(it - result_.logit_rows.begin()));
    // Greedy requests still rank tree candidates by a real distribution.
    sample::SamplingParams qp = opts_.params;
    if (qp.greedy()) qp.temperature = 1.0f;
    if (head_) {
        // Columns are the allowed ids: nothing to mask; q scattered back to ids.
        const std::span<const int32_t> h =
            to_columns(qp.repeat_penalty != 1.0f ? std::span<const int32_t>(node_history(w, node)) : w.hist);
        sample::distribution(src, nv, h, qp, q_);
        q.assign(opts_.target_n_vocab, 0.0f);
        for (int j = 0; j < nv; ++j) q[allowed_[j]] = q_[j];
        return;
    }
    row_.assign(src, src + nv);
    // Drafts must be valid target ids (and inside the subset when one is set).
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int v = opts_.target_n_vocab; v < nv; ++v) row_[v] = ninf;
    if (opts_.subset)
        for (int v = 0; v < std::min(nv, opts_.target_n_vocab); ++v)
            if (!opts_.subset->contains(v)) row_[v] = ninf;
    if (qp.repeat_penalty != 1.0f) {
        const std::vector<int32_t> h = node_history(w, node);
        sample::distribution(row_.data(), nv, h, qp, q_);
    } else {
        sample::distribution(row_.data(), nv, w.hist, qp, q_);
    }
    q.assign(opts_.target_n_vocab, 0.0f);
    std::copy(q_.begin(), q_.begin() + std::min(nv, opts_.target_n_vocab), q.begin());
}

const float* DraftModelProposer::row_logits(int batch_row) const {
    const auto it = std::lower_bound(result_.logit_rows.begin(), result_.logit_rows.end(), batch_row);
    SPECDEC_CHECK(it != result_.logit_rows.end() && *it == batch_row, "draft: no logits for row ", batch_row);
    return result_.row_logits((size_t)(it - result_.logit_rows.begin()));
}

void DraftModelProposer::draft_top(int batch_row, const Work& w, int node, int k, bool with_scores) {
    const int nv = result_.n_vocab;
    const float* x = row_logits(batch_row);
    if (opts_.params.repeat_penalty != 1.0f) {
        row_.assign(x, x + nv);
        const std::vector<int32_t> h = node_history(w, node);
        sample::apply_repetition_penalty(row_.data(), nv, head_ ? to_columns(h) : std::span<const int32_t>(h),
                                         opts_.params);
        x = row_.data();
    }
    const int bound = std::min(nv, opts_.target_n_vocab);  // drafts are target ids
    int32_t ids[64];
    k = std::min(k, 64);
    // Subset head: every column is an allowed id, in ascending id order (so
    // ties still go to the lower id).
    const int n = head_             ? sample::top_k_select(x, nv, k, ids)
                  : opts_.subset    ? sample::top_k_select_ids(x, allowed_, k, ids)
                                    : sample::top_k_select(x, bound, k, ids);
    picks_.resize(n);
    if (n == 0) return;
    const float mx = x[ids[0]];
    const float inv_t = opts_.params.greedy() ? 1.0f : 1.0f / opts_.params.temperature;
    const double lse = !with_scores ? 0.0
                       : head_        ? sample::log_sum_exp(x, nv, mx, inv_t)
                       : opts_.subset ? sample::log_sum_exp_ids(x, allowed_, mx, inv_t)
                                      : sample::log_sum_exp(x, bound, mx, inv_t);
    for (int j = 0; j < n; ++j)
        picks_[j] = {head_ ? allowed_[ids[j]] : ids[j],
                     with_scores ? (float)((double)(x[ids[j]] - mx) * inv_t - lse) : 0.0f};
}

void DraftModelProposer::expand_top(Work& w, int node) {
    const float base = node < 0 ? 0.0f : w.cands[node].score;
    const int depth = node < 0 ? 1 : w.cands[node].depth + 1;
    for (const Pick& p : picks_) w.cands.push_back({p.token, node, base + p.logq, depth, -1, false});
}

// Adds the children of `node` (-1: root) drawn from its draft distribution q.
void DraftModelProposer::expand(Work& w, int node, const std::vector<float>& q, Rng& rng) {
    const float base = node < 0 ? 0.0f : w.cands[node].score;
    const int depth = node < 0 ? 1 : w.cands[node].depth + 1;
    const int k = opts_.shape == DraftShape::Chain ? 1 : opts_.tree_topk;
    if (deterministic_) {
        for (int32_t t : top_k_ids(q, k)) w.cands.push_back({t, node, base + std::log(q[t]), depth, -1, false});
        return;
    }
    // Sampled: the number of children depends on the room left only, never on
    // their values, which keeps recursive rejection exact.
    const int room = w.cap - 1 - (int)w.cands.size();
    const int m = std::min(k, room);
    if (m <= 0) return;
    DraftTree& t = *w.out;
    const int qrow = (int)(t.q_pool.size() / opts_.target_n_vocab);
    t.q_pool.insert(t.q_pool.end(), q.begin(), q.end());
    for (int j = 0; j < m; ++j) {
        const int32_t x = sample::sample_from(q, rng);
        w.cands.push_back({x, node, base + std::log(std::max(q[x], 1e-30f)), depth, qrow, false});
    }
}

void DraftModelProposer::propose_chain(std::vector<Work>& work, Rng& rng) {
    std::vector<float> q;
    std::vector<int> rows(work.size());
    for (size_t i = 0; i < work.size(); ++i) rows[i] = work[i].root_row;
    const int K = opts_.chain_k;
    for (int j = 1; j <= K; ++j) {
        std::vector<size_t> fed;
        std::vector<int> next_rows(work.size(), -1);
        model::ForwardBatch next;
        for (size_t i = 0; i < work.size(); ++i) {
            Work& w = work[i];
            const int kw = w.chain_len;
            if (j > kw || rows[i] < 0) continue;
            const int prev = w.tip;  // -1: root
            const size_t before = w.cands.size();
            // At the first `siblings` depths the second choice too, added after
            // the chain's node (a leaf: the chain goes on from the first).
            const int want = j <= w.siblings ? 2 : 1;
            bool stop = false;
            if (fast_top_) {
                const bool adaptive = opts_.chain_min_prob > 0.0f;
                draft_top(rows[i], w, prev, want, adaptive);  // otherwise a chain's scores rank nothing
                expand_top(w, prev);
                stop = adaptive && !picks_.empty() && std::exp(picks_[0].logq) < opts_.chain_min_prob;
            } else {
                draft_dist(rows[i], w, prev, q);
                if (want == 2) {  // deterministic only (Work::siblings is 0 for sampled drafts)
                    const float base = prev < 0 ? 0.0f : w.cands[prev].score;
                    for (int32_t t : top_k_ids(q, 2)) w.cands.push_back({t, prev, base + std::log(q[t]), j, -1, false});
                } else {
                    expand(w, prev, q, rng);
                }
            }
            if (w.cands.size() == before) {  // q empty (cannot happen for a sane model)
                rows[i] = -1;
                continue;
            }
            w.tip = (int)before;
            if (j < kw && !stop) {
                const int pos = (int)known_[w.seq].size();
                next_rows[i] = next.add(w.cands[w.tip].token, pos, w.seq, -1, true);
                fed.push_back(i);
            }
        }
        if (fed.empty()) break;
        batch_ = std::move(next);
        forward();
        for (size_t i : fed) {
            cache_.commit_length(work[i].seq, 1);
            known_[work[i].seq].push_back(work[i].cands[work[i].tip].token);
        }
        rows = next_rows;
    }
}

// Commits into the draft cache the chain of candidates that is an ancestor of
// every node of the (next) frontier: each was a row of the forward just run,
// and every later row of this propose descends from all of them, so they can
// be read from the prefix instead of being fed again.
void DraftModelProposer::commit_shared_chain(Work& w) {
    if (w.frontier.empty()) return;
    // Ancestors of the first frontier node, deepest first, down to the committed end.
    std::vector<int> chain;
    for (int c = w.cands[w.frontier[0]].parent; c >= 0 && !w.cands[c].committed; c = w.cands[c].parent)
        chain.push_back(c);
    std::reverse(chain.begin(), chain.end());  // shallowest first
    size_t shared = chain.size();
    for (size_t fi = 1; fi < w.frontier.size() && shared > 0; ++fi) {
        // Depth of the deepest chain node that is an ancestor of this frontier node.
        size_t m = 0;
        for (int c = w.cands[w.frontier[fi]].parent; c >= 0 && !w.cands[c].committed; c = w.cands[c].parent) {
            const size_t d = (size_t)(w.cands[c].depth - (chain.empty() ? 0 : w.cands[chain[0]].depth)) + 1;
            if (d <= shared && chain[d - 1] == c) {
                m = d;
                break;
            }
        }
        shared = std::min(shared, m);
    }
    if (shared == 0) return;
    std::vector<int> idx;
    for (size_t j = 0; j < shared; ++j) {
        const int c = chain[j];
        if (w.row_of[c] < 0) return;  // not written by the last forward: nothing to keep
        idx.push_back(w.row_of[c] - w.first_row);
    }
    cache_.commit_path(w.seq, idx);
    for (size_t j = 0; j < shared; ++j) {
        w.cands[chain[j]].committed = true;
        known_[w.seq].push_back(w.cands[chain[j]].token);
    }
}

void DraftModelProposer::propose_tree(std::vector<Work>& work, Rng& rng) {
    std::vector<float> q;
    const int k = opts_.tree_topk;
    const int width = opts_.tree_width > 0 ? opts_.tree_width : k;
    std::vector<int> fresh;
    std::vector<uint8_t> need;
    auto next_frontier = [&](Work& w, size_t from) {
        fresh.resize(w.cands.size() - from);
        std::iota(fresh.begin(), fresh.end(), (int)from);
        std::stable_sort(fresh.begin(), fresh.end(),
                         [&](int a, int b) { return w.cands[a].score > w.cands[b].score; });
        if ((int)fresh.size() > width) fresh.resize(width);
        std::sort(fresh.begin(), fresh.end());
        w.frontier.assign(fresh.begin(), fresh.end());
    };
    auto expand_node = [&](Work& w, int row, int node) {
        if (fast_top_) {
            draft_top(row, w, node, k, true);
            expand_top(w, node);
        } else {
            draft_dist(row, w, node, q);
            expand(w, node, q, rng);
        }
    };
    for (Work& w : work) {
        expand_node(w, w.root_row, -1);
        next_frontier(w, 0);
    }
    for (int depth = 2; depth <= opts_.tree_depth; ++depth) {
        batch_.clear();
        bool any = false;
        for (Work& w : work) {
            w.row_of.assign(w.cands.size(), -1);
            if (w.frontier.empty() || (!deterministic_ && (int)w.cands.size() >= w.cap - 1)) {
                w.frontier.clear();
                continue;
            }
            // Deterministic trees are pruned to cap - 1 candidates by score at
            // the end, and a child never outscores its parent: once the
            // frontier's best is below the cap-th best candidate, nothing it
            // makes can be kept.
            if (deterministic_ && (int)w.cands.size() >= w.cap - 1) {
                fresh.resize(w.cands.size());
                std::iota(fresh.begin(), fresh.end(), 0);
                std::nth_element(fresh.begin(), fresh.begin() + (w.cap - 2), fresh.end(),
                                 [&](int a, int b) { return w.cands[a].score > w.cands[b].score; });
                const float bar = w.cands[fresh[w.cap - 2]].score;
                float best = -std::numeric_limits<float>::infinity();
                for (int f : w.frontier) best = std::max(best, w.cands[f].score);
                if (!(best > bar)) {
                    w.frontier.clear();
                    continue;
                }
            }
            // The frontier's ancestor paths below the committed chain, in index
            // order (parents first); logits for the frontier only.
            need.assign(w.cands.size(), 0);
            int n_rows = 0;
            for (int f : w.frontier)
                for (int c = f; c >= 0 && !need[c] && !w.cands[c].committed; c = w.cands[c].parent)
                    need[c] = 1, ++n_rows;
            if (cache_.committed(w.seq) + n_rows > cache_.n_ctx()) {  // no room to write the rows
                w.frontier.clear();
                continue;
            }
            for (int f : w.frontier) need[f] = 2;
            const int base_pos = (int)w.hist.size() - 1;  // the root's position
            w.first_row = batch_.size();
            for (size_t c = 0; c < w.cands.size(); ++c) {
                if (!need[c]) continue;
                const Cand& cd = w.cands[c];
                const int parent_row = cd.parent < 0 ? -1 : w.row_of[cd.parent];  // -1: committed
                w.row_of[c] = batch_.add(cd.token, base_pos + cd.depth, w.seq, parent_row, need[c] == 2);
            }
            any = true;
        }
        if (!any) break;
        forward();
        for (Work& w : work) {
            if (w.frontier.empty()) continue;
            const size_t from = w.cands.size();
            for (int f : w.frontier) expand_node(w, w.row_of[f], f);
            next_frontier(w, from);
            if (depth < opts_.tree_depth) commit_shared_chain(w);
        }
    }
}

void DraftModelProposer::finish_tree(Work& w) {
    DraftTree& t = *w.out;
    const int n = (int)w.cands.size();
    std::vector<uint8_t> keep(n, 1);
    if (deterministic_ && n > w.cap - 1) {
        std::vector<int> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int a, int b) { return w.cands[a].score > w.cands[b].score; });
        std::fill(keep.begin(), keep.end(), 0);
        for (int j = 0; j < w.cap - 1; ++j) keep[order[j]] = 1;
    }
    std::vector<int> node_of(n, -1);
    for (int c = 0; c < n; ++c) {
        const Cand& cd = w.cands[c];
        // A child never outranks its parent, except with NaN scores: drop orphans.
        if (!keep[c] || (cd.parent >= 0 && node_of[cd.parent] < 0)) continue;
        node_of[c] = t.add(cd.token, cd.parent < 0 ? 0 : node_of[cd.parent], cd.score, cd.q_row);
    }
}

void DraftModelProposer::propose(std::span<const ProposeInput> in, std::span<DraftTree> out, Rng& rng) {
    forward_s_ = 0;
    std::vector<Work> work;
    for (size_t i = 0; i < in.size(); ++i) {
        out[i].reset(in[i].history.back());
        if (!deterministic_) {
            out[i].kind = DraftKind::Sampled;
            out[i].n_vocab = opts_.target_n_vocab;
        }
        const bool chain = opts_.shape == DraftShape::Chain;
        const int siblings = chain && deterministic_ ? std::max(0, in[i].siblings) : 0;
        const int cap = chain ? std::min(in[i].max_nodes, opts_.chain_k + 1 + siblings)
                              : std::min(in[i].max_nodes, opts_.tree_budget);
        if (cap <= 1) continue;
        Work w;
        w.seq = in[i].seq;
        const int H = (int)in[i].history.size();
        int& ws = wstart_[w.seq];
        if (opts_.window > 0 && H - ws > opts_.window) {
            // Slide by half a window at a time so the draft re-reads its context
            // once per window/2 tokens, not every round.
            ws = std::max(0, H - opts_.window / 2);
            known_[w.seq].clear();
            cache_.clear(w.seq);
        }
        w.hist = in[i].history.subspan(opts_.window > 0 ? ws : 0);
        // Room in the draft cache: the root plus the deepest draft row.
        const int depth_room = cache_.n_ctx() - (int)w.hist.size() - 1;
        w.cap = std::min(cap, std::max(1, depth_room + 1));
        if (w.cap <= 1) continue;
        // The chain first; siblings take only the room left beside it.
        w.chain_len = std::min(opts_.chain_k, w.cap - 1);
        w.siblings = std::min(siblings, std::min(w.chain_len, w.cap - 1 - w.chain_len));
        w.out = &out[i];
        work.push_back(std::move(w));
    }
    if (work.empty()) return;
    sync_caches(work);
    if (opts_.shape == DraftShape::Chain)
        propose_chain(work, rng);
    else
        propose_tree(work, rng);
    for (Work& w : work) finish_tree(w);
}

}  // namespace specdec::spec
