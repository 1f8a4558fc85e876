#include "spec/eagle3_proposer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/clock.h"
#include "core/error.h"

namespace specdec::spec {

namespace {
// Feature rows a sequence holds that are not yet in the head's cache.
int pending_rows(const std::vector<float>& feats, int width) { return (int)(feats.size() / (size_t)width); }
}  // namespace

Eagle3Proposer::Eagle3Proposer(model::Eagle3Forward& fwd, kv::KvCache& cache, ThreadPool& pool,
                               const Eagle3ProposerOptions& opts)
    : fwd_(fwd), cache_(cache), pool_(pool), opts_(opts) {
    const model::Eagle3Config& c = fwd_.head().config();
    feat_width_ = 3 * c.target_hidden;
    SPECDEC_CHECK(opts.chain_k >= 1 && opts.tree_topk >= 1 && opts.tree_depth >= 1 && opts.tree_budget >= 2 &&
                      opts.catch_up_chunk >= 1,
                  "EAGLE-3 proposer: chain length, tree top-k and depth must be >= 1 and the budget >= 2");
    SPECDEC_CHECK(cache.n_layer() == 1 && cache.kv_dim() == c.kv_dim(), "EAGLE-3 proposer: the cache is not the head's");
    seqs_.resize(cache.n_seq());
}

void Eagle3Proposer::begin(int seq) {
    SPECDEC_CHECK(seq >= 0 && seq < (int)seqs_.size(), "EAGLE-3 proposer: sequence ", seq, " outside the head's ",
                  seqs_.size());
    cache_.clear(seq);
    seqs_[seq] = SeqState{};
}

void Eagle3Proposer::observe_features(const TargetFeatures& f) {
    SPECDEC_CHECK(f.seq >= 0 && f.seq < (int)seqs_.size(), "EAGLE-3 proposer: features of sequence ", f.seq);
    SPECDEC_CHECK(f.layers.size() == 3 && 3 * f.n_embd == feat_width_, "EAGLE-3 proposer: features of ",
                  f.layers.size(), " layers of width ", f.n_embd, ", the head reads 3 of ", feat_width_ / 3);
    SeqState& s = seqs_[f.seq];
    const int have = pending_rows(s.feats, feat_width_);
    SPECDEC_CHECK(f.pos0 == s.pos0 + have, "EAGLE-3 proposer: sequence ", f.seq, " got features from position ",
                  f.pos0, ", expected ", s.pos0 + have, " (every committed token's features, in order)");
    const int E = f.n_embd;
    const size_t base = s.feats.size();
    s.feats.resize(base + f.rows.size() * (size_t)feat_width_);
    for (size_t j = 0; j < f.rows.size(); ++j) {
        float* dst = s.feats.data() + base + j * (size_t)feat_width_;
        for (int l = 0; l < 3; ++l) {
            SPECDEC_CHECK((size_t)(f.rows[j] + 1) * E <= f.layers[l]->size(), "EAGLE-3 proposer: feature row ",
                          f.rows[j], " outside the captured rows");
            std::memcpy(dst + (size_t)l * E, f.layers[l]->data() + (size_t)f.rows[j] * E, sizeof(float) * E);
        }
    }
}

void Eagle3Proposer::add_catch_up_rows(int seq, std::span<const int32_t> hist, int upto, bool logits) {
    SeqState& s = seqs_[seq];
    const int n = upto - s.pos0;
    const int H = fwd_.head().config().hidden;
    SPECDEC_CHECK(cache_.committed(seq) == s.pos0, "EAGLE-3 proposer: head cache of sequence ", seq, " holds ",
                  cache_.committed(seq), " rows, expected ", s.pos0);
    SPECDEC_CHECK(s.pos0 + n < cache_.n_ctx(), "EAGLE-3 proposer: sequence ", seq, " exceeds the head's context");
    g_.resize((size_t)n * H);
    fwd_.fuse(s.feats.data(), n, g_.data(), pool_);
    anc_.clear();
    for (int j = 0; j < n; ++j) {
        const int p = s.pos0 + j;
        batch_.add(hist[(size_t)p + 1], p, seq, j, anc_, logits && j + 1 == n, g_.data() + (size_t)j * H, H);
        anc_.push_back(j);
    }
}

void Eagle3Proposer::run_forward() {
    const double t0 = now_s();
    fwd_.forward(batch_, cache_, pool_, result_);
    forward_s_ += now_s() - t0;
    ++forwards_;
    rows_ += batch_.size();
}

void Eagle3Proposer::prefill(int seq, std::span<const int32_t> history) {
    // Every prompt row but the last goes into the head's cache now (the
    // prefill phase); the last one's logits start the first draft.
    SeqState& s = seqs_[seq];
    const int upto = (int)history.size() - 2;
    while (s.pos0 < upto && pending_rows(s.feats, feat_width_) >= upto - s.pos0) {
        const int take = std::min(opts_.catch_up_chunk, upto - s.pos0);
        batch_.clear();
        add_catch_up_rows(seq, history, s.pos0 + take, false);
        run_forward();
        cache_.commit_length(seq, take);
        s.feats.erase(s.feats.begin(), s.feats.begin() + (size_t)take * feat_width_);
        s.pos0 += take;
    }
}

void Eagle3Proposer::top_children(const float* logits, int k, std::vector<std::pair<float, int32_t>>& out) {
    const int V = fwd_.head().config().draft_vocab;
    logq_.resize((size_t)V);
    float mx = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < V; ++i) {
        const float x = std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i];
        logq_[(size_t)i] = x;
        mx = std::max(mx, x);
    }
    double sum = 0;
    for (int i = 0; i < V; ++i) sum += std::exp((double)logq_[(size_t)i] - mx);
    const float lse = mx + (float)std::log(sum);
    k = std::min(k, V);
    idx_.resize((size_t)V);
    for (int i = 0; i < V; ++i) idx_[(size_t)i] = i;
    std::partial_sort(idx_.begin(), idx_.begin() + k, idx_.end(), [&](int32_t a, int32_t b) {
        return logq_[(size_t)a] > logq_[(size_t)b] || (logq_[(size_t)a] == logq_[(size_t)b] && a < b);
    });
    out.clear();
    for (int j = 0; j < k; ++j) out.push_back({logq_[(size_t)idx_[(size_t)j]] - lse, idx_[(size_t)j]});
}

void Eagle3Proposer::propose(std::span<const ProposeInput> in, std::span<DraftTree> out, Rng&) {
    forward_s_ = 0;
    forwards_ = rows_ = 0;
    const int H = fwd_.head().config().hidden;
    std::vector<Work> works(in.size());
    for (size_t k = 0; k < in.size(); ++k) {
        Work& w = works[k];
        w.seq = in[k].seq;
        w.root = in[k].history.back();
        w.root_pos = (int)in[k].history.size() - 1;
        w.out = &out[k];
        if (opts_.tree) {
            w.budget = std::min(opts_.tree_budget, in[k].max_nodes);
            w.depth = std::min(opts_.tree_depth, w.budget - 1);
            w.topk = opts_.tree_topk;
        } else {
            // The chain first; sibling leaves (ProposeInput::siblings) take the room left.
            const int sib = std::max(0, in[k].siblings);
            w.budget = std::min(opts_.chain_k + 1 + sib, in[k].max_nodes);
            w.depth = std::min(opts_.chain_k, w.budget - 1);
            w.topk = 1;
            w.siblings = std::min(sib, std::min(w.depth, w.budget - 1 - w.depth));
        }
        const SeqState& s = seqs_[w.seq];
        SPECDEC_CHECK(w.root_pos > s.pos0 && pending_rows(s.feats, feat_width_) == w.root_pos - s.pos0,
                      "EAGLE-3 proposer: sequence ", w.seq, " has target features up to position ",
                      s.pos0 + pending_rows(s.feats, feat_width_), ", the root is at ", w.root_pos,
                      " (a head needs the features of every committed token, captured by the target's forwards)");
    }

    // Catch-up: the rows whose features arrived, in chunks; the last row of
    // each sequence predicts the root's children.
    std::vector<std::pair<float, int32_t>> kids;
    std::vector<int> final_row(works.size());
    for (;;) {
        batch_.clear();
        std::vector<int> took(works.size(), 0);
        std::fill(final_row.begin(), final_row.end(), -1);
        for (size_t k = 0; k < works.size(); ++k) {
            Work& w = works[k];
            SeqState& s = seqs_[w.seq];
            const int remaining = w.root_pos - s.pos0;
            if (remaining <= 0) continue;
            took[k] = std::min(remaining, opts_.catch_up_chunk);
            const bool last = took[k] == remaining;
            add_catch_up_rows(w.seq, in[k].history, s.pos0 + took[k], last);
            if (last) final_row[k] = batch_.size() - 1;
        }
        if (batch_.size() == 0) break;
        run_forward();
        for (size_t k = 0; k < works.size(); ++k) {
            if (took[k] == 0) continue;
            Work& w = works[k];
            SeqState& s = seqs_[w.seq];
            cache_.commit_length(w.seq, took[k]);
            s.feats.erase(s.feats.begin(), s.feats.begin() + (size_t)took[k] * feat_width_);
            s.pos0 += took[k];
            if (final_row[k] < 0) continue;
            const int r = final_row[k];
            w.root_g.assign(result_.prenorm.begin() + (size_t)r * H, result_.prenorm.begin() + (size_t)(r + 1) * H);
            const size_t li = (size_t)(std::find(result_.logit_rows.begin(), result_.logit_rows.end(), r) -
                                       result_.logit_rows.begin());
            if (w.budget < 2) continue;
            top_children(result_.logits.data() + li * fwd_.head().config().draft_vocab,
                         std::min(w.children(1), w.budget - 1), kids);
            for (const auto& [lq, id] : kids) {
                // A sibling leaf (beyond topk) is never expanded.
                if ((int)w.frontier.size() < w.topk) w.frontier.push_back((int)w.cands.size());
                w.cands.push_back({id, -1, lq, 1, -1, -1});
            }
        }
    }

    // One forward per depth over every sequence's frontier.
    for (int d = 1;; ++d) {
        batch_.clear();
        bool any = false;
        for (Work& w : works) {
            if (d >= w.depth) {
                w.frontier.clear();
                continue;
            }
            for (int ci : w.frontier) {
                if (cache_.committed(w.seq) + w.next_slot >= cache_.n_ctx()) break;  // no room: stop growing
                anc_.clear();
                for (int a = w.cands[ci].parent; a >= 0; a = w.cands[a].parent) anc_.push_back(w.cands[a].slot);
                std::reverse(anc_.begin(), anc_.end());
                Cand& c = w.cands[ci];
                c.slot = w.next_slot++;
                const float* g = c.parent < 0 ? w.root_g.data() : w.prenorm.data() + (size_t)c.parent * H;
                c.out_row = batch_.add(fwd_.head().d2t_token(c.draft_id), w.root_pos + d - 1, w.seq, c.slot, anc_,
                                       true, g, H);
                any = true;
            }
        }
        if (!any) break;
        run_forward();
        const int V = fwd_.head().config().draft_vocab;
        for (Work& w : works) {
            std::vector<int> fresh;
            for (int ci : w.frontier) {
                const int r = w.cands[ci].out_row;
                if (r < 0) continue;  // not fed (no room)
                w.prenorm.resize(w.cands.size() * (size_t)H);
                std::memcpy(w.prenorm.data() + (size_t)ci * H, result_.prenorm.data() + (size_t)r * H,
                            sizeof(float) * H);
                // Every fed row wanted logits: logits row == batch row.
                top_children(result_.logits.data() + (size_t)r * V, w.children(d + 1), kids);
                const float base = w.cands[ci].score;
                for (const auto& [lq, id] : kids) {
                    fresh.push_back((int)w.cands.size());
                    w.cands.push_back({id, ci, base + lq, d + 1, -1, -1});
                }
                w.cands[ci].out_row = -1;
            }
            // Next frontier: the best topk of the new candidates (earlier index on ties).
            std::stable_sort(fresh.begin(), fresh.end(),
                             [&](int a, int b) { return w.cands[a].score > w.cands[b].score; });
            if ((int)fresh.size() > w.topk) fresh.resize((size_t)w.topk);
            std::sort(fresh.begin(), fresh.end());
            w.frontier = std::move(fresh);
        }
    }
    for (Work& w : works) finish(w);
}

void Eagle3Proposer::finish(Work& w) {
    DraftTree& t = *w.out;
    t.reset(w.root);
    const int n = (int)w.cands.size();
    if (n == 0 || w.budget < 2) return;
    // Rerank: the best budget - 1 by cumulative score (earlier index on ties),
    // then drop any whose parent fell out (only NaN scores could cause it).
    std::vector<int> order((size_t)n);
    for (int i = 0; i < n; ++i) order[(size_t)i] = i;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return w.cands[a].score > w.cands[b].score; });
    std::vector<uint8_t> keep((size_t)n, 0);
    for (int j = 0; j < std::min(n, w.budget - 1); ++j) keep[(size_t)order[(size_t)j]] = 1;
    std::vector<int> node_of((size_t)n, -1);
    for (int i = 0; i < n; ++i) {
        if (!keep[(size_t)i]) continue;
        const Cand& c = w.cands[(size_t)i];
        if (c.parent >= 0 && node_of[(size_t)c.parent] < 0) continue;
        node_of[(size_t)i] =
            t.add(fwd_.head().d2t_token(c.draft_id), c.parent < 0 ? 0 : node_of[(size_t)c.parent], c.score);
    }
}

}  // namespace specdec::spec
