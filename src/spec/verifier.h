// Lossless verification of a draft tree against the target's logits.
//
// Greedy: walk from the root, accepting the child whose token is the target's
// argmax (ties to the lowest id, as in plain decoding); the bonus is the argmax
// at the last accepted node. Output equals target-only greedy decoding.
//
// Sampling (the target distribution p is sample::distribution with the request's
// processors, exactly as plain decoding computes it):
//   - deterministic drafts (top-k, n-gram; q a point mass): children tried in
//     order, child x accepted with probability p(x); on rejection p(x) = 0 and
//     p is renormalised; sampling without replacement, emits exactly p;
//   - sampled drafts (chain or tree, each child drawn from its recorded q):
//     recursive rejection: accept x with min(1, p(x)/q(x)); on rejection
//     p <- norm(max(p - q, 0)) and the next sibling is tested against it.
// When every child of the current node is rejected, or it has none, the bonus
// is drawn from the current (residual) p.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/rng.h"
#include "sample/sampler.h"
#include "spec/draft_tree.h"
#include "spec/tree_tensors.h"

namespace specdec::spec {

// Where an emitted token came from, as the verifier decided it: an accepted
// draft token, or the target's own (a round's bonus or corrected token, and
// the first token after the prefill). `specdec serve` streams it on request
// (the chat page colours the two apart).
enum class TokenSource : uint8_t { Target, Draft };

struct VerifyResult {
    std::vector<int> path;          // accepted node ids, starting with the root (0)
    std::vector<int32_t> emitted;   // accepted draft tokens then the bonus token
    int n_accepted() const { return (int)path.size() - 1; }
    // The source of emitted[j].
    TokenSource source(size_t j) const { return (int)j < n_accepted() ? TokenSource::Draft : TokenSource::Target; }
};

class Verifier {
public:
    // logits: (T, n_vocab) target logits of the tree's rows in node order.
    // history: every token before the root (prompt and generated); the
    // processors see history + root + accepted drafts, like plain decoding.
    void verify(const DraftTree& tree, const float* logits, int n_vocab, std::span<const int32_t> history,
                const sample::SamplingParams& params, Rng& rng, VerifyResult& out);

private:
    TreeChildren children_;
    std::vector<int32_t> hist_;  // history + path so far
    std::vector<float> p_;       // (n_vocab) current target (residual) distribution
    std::vector<float> scratch_; // (n_vocab)
};

}  // namespace specdec::spec
