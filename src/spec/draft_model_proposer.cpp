#include "spec/draft_model_proposer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace specdec::spec {

namespace {
using Clock = std::chrono::steady_clock;

// Indices of the k largest values of q that are > 0, best first, ties to the
// lower id (the same tie rule as argmax).
std::vector<int32_t> top_k_ids(const std::vector<float>& q, int k) {
    std::vector<int32_t> ids;
    ids.reserve(256);
    for (int32_t v = 0; v < (int32_t)q.size(); ++v)
        if (q[v] > 0) ids.push_back(v);
    auto better = [&](int32_t a, int32_t b) { return q[a] > q[b] || (q[a] == q[b] && a < b); };
    const size_t kk = std::min<size_t>(k, ids.size());
    std::partial_sort(ids.begin(), ids.begin() + kk, ids.end(), better);
    ids.resize(kk);
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
    SPECDEC_CHECK(opts.window == 0 || opts.window >= 8, "draft proposer: window must be 0 (off) or >= 8");
    SPECDEC_CHECK(!opts.subset || opts.subset->n_target_vocab() == opts.target_n_vocab,
                  "draft proposer: vocabulary subset made for another vocabulary");
    deterministic_ = opts.params.greedy() || !opts.sampled;
    known_.resize(cache.n_seq());
    wstart_.assign(cache.n_seq(), 0);
}

void DraftModelProposer::begin(int seq) {
    known_[seq].clear();
    wstart_[seq] = 0;
    cache_.clear(seq);
}

void DraftModelProposer::forward() {
    const auto t0 = Clock::now();
    model_.forward(batch_, cache_, pool_, result_);
    forward_s_ += std::chrono::duration<double>(Clock::now() - t0).count();
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
    row_.assign(src, src + nv);
    // Drafts must be valid target ids (and inside the subset when one is set).
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int v = opts_.target_n_vocab; v < nv; ++v) row_[v] = ninf;
    if (opts_.subset)
        for (int v = 0; v < std::min(nv, opts_.target_n_vocab); ++v)
            if (!opts_.subset->contains(v)) row_[v] = ninf;
    // Greedy requests still rank tree candidates by a real distribution.
    sample::SamplingParams qp = opts_.params;
    if (qp.greedy()) qp.temperature = 1.0f;
    if (qp.repeat_penalty != 1.0f) {
        const std::vector<int32_t> h = node_history(w, node);
        sample::distribution(row_.data(), nv, h, qp, q_);
    } else {
        sample::distribution(row_.data(), nv, w.hist, qp, q_);
    }
    q.assign(opts_.target_n_vocab, 0.0f);
    std::copy(q_.begin(), q_.begin() + std::min(nv, opts_.target_n_vocab), q.begin());
}

// Adds the children of `node` (-1: root) drawn from its draft distribution q.
void DraftModelProposer::expand(Work& w, int node, const std::vector<float>& q, Rng& rng) {
    const float base = node < 0 ? 0.0f : w.cands[node].score;
    const int depth = node < 0 ? 1 : w.cands[node].depth + 1;
    const int k = opts_.shape == DraftShape::Chain ? 1 : opts_.tree_topk;
    if (deterministic_) {
        for (int32_t t : top_k_ids(q, k)) w.cands.push_back({t, node, base + std::log(q[t]), depth, -1});
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
        w.cands.push_back({x, node, base + std::log(std::max(q[x], 1e-30f)), depth, qrow});
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
            const int kw = std::min(K, w.cap - 1);
            if (j > kw || rows[i] < 0) continue;
            const int prev = (int)w.cands.size() - 1;  // -1: root
            draft_dist(rows[i], w, prev, q);
            const size_t before = w.cands.size();
            expand(w, prev, q, rng);
            if (w.cands.size() == before) {  // q empty (cannot happen for a sane model)
                rows[i] = -1;
                continue;
            }
            if (j < kw) {
                const int pos = (int)known_[w.seq].size();
                next_rows[i] = next.add(w.cands.back().token, pos, w.seq, -1, true);
                fed.push_back(i);
            }
        }
        if (fed.empty()) break;
        batch_ = std::move(next);
        forward();
        for (size_t i : fed) {
            cache_.commit_length(work[i].seq, 1);
            known_[work[i].seq].push_back(work[i].cands.back().token);
        }
        rows = next_rows;
    }
}

void DraftModelProposer::propose_tree(std::vector<Work>& work, Rng& rng) {
    std::vector<float> q;
    const int k = opts_.tree_topk;
    auto next_frontier = [&](Work& w, size_t from) {
        std::vector<int> fresh(w.cands.size() - from);
        std::iota(fresh.begin(), fresh.end(), (int)from);
        std::stable_sort(fresh.begin(), fresh.end(),
                         [&](int a, int b) { return w.cands[a].score > w.cands[b].score; });
        if ((int)fresh.size() > k) fresh.resize(k);
        std::sort(fresh.begin(), fresh.end());
        w.frontier = std::move(fresh);
    };
    for (Work& w : work) {
        draft_dist(w.root_row, w, -1, q);
        expand(w, -1, q, rng);
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
            // The frontier's ancestor paths, in index order (parents first).
            std::vector<uint8_t> need(w.cands.size(), 0);
            int n_rows = 0;
            for (int f : w.frontier)
                for (int c = f; c >= 0 && !need[c]; c = w.cands[c].parent) need[c] = 1, ++n_rows;
            if (cache_.committed(w.seq) + n_rows > cache_.n_ctx()) {  // no room to write the rows
                w.frontier.clear();
                continue;
            }
            const int base_pos = (int)w.hist.size() - 1;  // the root's position
            for (size_t c = 0; c < w.cands.size(); ++c) {
                if (!need[c]) continue;
                const Cand& cd = w.cands[c];
                const int parent_row = cd.parent < 0 ? -1 : w.row_of[cd.parent];
                w.row_of[c] = batch_.add(cd.token, base_pos + cd.depth, w.seq, parent_row, true);
            }
            any = true;
        }
        if (!any) break;
        forward();
        for (Work& w : work) {
            if (w.frontier.empty()) continue;
            const size_t from = w.cands.size();
            for (int f : w.frontier) {
                draft_dist(w.row_of[f], w, f, q);
                expand(w, f, q, rng);
            }
            next_frontier(w, from);
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
        const int cap = opts_.shape == DraftShape::Chain ? std::min(in[i].max_nodes, opts_.chain_k + 1)
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
