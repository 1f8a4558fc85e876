#include "spec/verifier.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace specdec::spec {

namespace {
// Rescales p to sum 1; returns false when nothing is left (all mass removed,
// which exact arithmetic never reaches but rounding can).
bool normalise(std::vector<float>& p) {
    double sum = 0;
    for (float v : p) sum += v;
    if (!(sum > 0)) return false;
    const float inv = (float)(1.0 / sum);
    for (float& v : p) v *= inv;
    return true;
}
}  // namespace

void Verifier::verify(const DraftTree& tree, const float* logits, int n_vocab, std::span<const int32_t> history,
                      const sample::SamplingParams& params, Rng& rng, VerifyResult& out) {
    build_children(tree.parents, children_);
    out.path.assign(1, 0);
    out.emitted.clear();
    hist_.assign(history.begin(), history.end());
    hist_.push_back(tree.tokens[0]);
    const bool penalty = params.repeat_penalty != 1.0f;
    int cur = 0;
    for (;;) {
        const float* row = logits + (size_t)cur * n_vocab;
        const int c0 = children_.first[cur], c1 = children_.first[cur + 1];
        if (params.greedy()) {
            int32_t best;
            if (penalty) {
                scratch_.assign(row, row + n_vocab);
                sample::apply_repetition_penalty(scratch_.data(), n_vocab, hist_, params);
                best = sample::argmax(scratch_.data(), n_vocab);
            } else {
                best = sample::argmax(row, n_vocab);
            }
            int next = -1;
            for (int c = c0; c < c1 && next < 0; ++c)
                if (tree.tokens[children_.child[c]] == best) next = children_.child[c];
            if (next < 0) {
                out.emitted.push_back(best);
                return;
            }
            out.path.push_back(next);
            out.emitted.push_back(best);
            hist_.push_back(best);
            cur = next;
            continue;
        }
        sample::distribution(row, n_vocab, hist_, params, p_);
        int next = -1;
        for (int c = c0; c < c1 && next < 0; ++c) {
            const int node = children_.child[c];
            const int32_t x = tree.tokens[node];
            if (tree.kind == DraftKind::Deterministic) {
                if (rng.uniform() < (double)p_[x]) {
                    next = node;
                } else {
                    p_[x] = 0.0f;
                    if (!normalise(p_)) sample::distribution(row, n_vocab, hist_, params, p_);
                }
            } else {
                SPECDEC_CHECK(tree.q_of[node] >= 0 && tree.n_vocab == n_vocab,
                              "sampled draft node ", node, " has no draft distribution");
                const float* q = tree.q(node);
                const double ratio = q[x] > 0 ? (double)p_[x] / q[x] : 1.0;
                if (rng.uniform() < std::min(1.0, ratio)) {
                    next = node;
                } else {
                    scratch_ = p_;
                    for (int v = 0; v < n_vocab; ++v) p_[v] = std::max(0.0f, p_[v] - q[v]);
                    if (!normalise(p_)) p_ = scratch_;
                }
            }
        }
        if (next < 0) {
            const int32_t bonus = sample::sample_from(p_, rng);
            out.emitted.push_back(bonus);
            return;
        }
        out.path.push_back(next);
        out.emitted.push_back(tree.tokens[next]);
        hist_.push_back(tree.tokens[next]);
        cur = next;
    }
}

}  // namespace specdec::spec
