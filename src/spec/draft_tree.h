// A speculation for one sequence: a tree of draft tokens rooted at the last
// emitted token. Every proposer produces one (a chain is a tree of width 1,
// plain AR is a tree holding only its root); the verifier consumes it.
//
// Node 0 is the root: the last emitted token, already chosen but not yet in the
// target's KV cache (AR feeds it at the next step too). Nodes are stored in
// topological order: parents[i] < i for i >= 1, parents[0] = 0.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace specdec::spec {

// How the drafts were chosen decides how they are verified under sampling.
enum class DraftKind {
    Deterministic,  // fixed choices (top-k, n-gram): siblings distinct, q is a point mass
    Sampled,        // each child drawn i.i.d. from a recorded draft distribution q
};

struct DraftTree {
    DraftKind kind = DraftKind::Deterministic;
    std::vector<int32_t> tokens;    // (T) target vocabulary ids; tokens[0] = root
    std::vector<int32_t> parents;   // (T) parents[0] = 0
    std::vector<float> scores;      // (T) cumulative draft log-prob (0 for the root); ranking only
    // Sampled drafts only: the distribution each node was drawn from.
    int n_vocab = 0;                // width of a q row (target vocabulary)
    std::vector<float> q_pool;      // (n_q, n_vocab) draft distributions
    std::vector<int32_t> q_of;      // (T) row of q_pool node i was drawn from; -1 for the root
    // The drafts are a prompt-lookup chain (the continuation of an earlier
    // n-gram in the history), not a draft model's: traces and metrics tell
    // such rounds apart, because their cost and acceptance differ.
    bool from_lookup = false;

    int size() const { return (int)tokens.size(); }
    void reset(int32_t root) {
        kind = DraftKind::Deterministic;
        tokens.assign(1, root);
        parents.assign(1, 0);
        scores.assign(1, 0.0f);
        n_vocab = 0;
        q_pool.clear();
        q_of.assign(1, -1);
        from_lookup = false;
    }
    // root -> chain[0] -> chain[1] -> ...: a deterministic chain (scores 0).
    void assign_chain(int32_t root, std::span<const int32_t> chain) {
        reset(root);
        for (size_t j = 0; j < chain.size(); ++j) add(chain[j], (int32_t)j, 0.0f);
    }
    // Appends a node and returns its index.
    int add(int32_t token, int32_t parent, float score, int32_t q_row = -1) {
        tokens.push_back(token);
        parents.push_back(parent);
        scores.push_back(score);
        q_of.push_back(q_row);
        return size() - 1;
    }
    const float* q(int node) const { return q_pool.data() + (size_t)q_of[node] * n_vocab; }
};

}  // namespace specdec::spec
