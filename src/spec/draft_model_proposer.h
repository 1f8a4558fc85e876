// Proposer backed by a separate (small) draft model with its own KV cache.
//
// Chain: K tokens, one draft forward per token, each draft committed into the
// draft's cache as it is made (a chain needs no branching); the next round
// rolls the cache back to the longest prefix the target agreed with.
// Tree (EAGLE-2 dynamic tree): level 1 = top-k children of the root; then per
// depth one draft forward over the frontier (all sequences' frontiers in one
// batch, each node seeing only its ancestors), top-k children of each frontier
// node scored by cumulative log q, next frontier = best k of the k*k new nodes;
// finally rerank all candidates to the best budget-1 (parents before children).
// A forward only lets a row see the committed prefix and its own ancestors in
// the same batch, so each level re-feeds the frontier's ancestor paths (no
// logits for them, only the frontier's), which keeps branches invisible to
// each other. What every remaining branch shares (the deepest common ancestor
// chain of the next frontier) is committed into the draft cache instead, so it
// is never fed again; the next round rolls back past whatever was rejected.
//
// With a vocabulary subset the draft's logits are computed over the subset
// only (model/lm_head_subset.h: the forward stops at the last layer's hidden
// state, a compact head does the rest), so a result row has one column per
// allowed id instead of the draft's whole vocabulary; the draft
// distributions are the same (zero outside the subset either way).
//
// Deterministic drafts (greedy, or top-k under sampling without truncating
// processors) never build q: the k best ids come from a partial selection over
// the logits and their log q (ranking only) from one log-sum-exp pass.
//
// The draft cache always ends a propose() holding a prefix of the sequence's
// history up to and including the root (plus chain drafts), so it follows the
// same commit rules as the target's.
#pragma once

#include <memory>
#include <vector>

#include "kv/kv_cache.h"
#include "model/forward_batch.h"
#include "model/lm_head_subset.h"
#include "model/transformer.h"
#include "sample/sampler.h"
#include "spec/proposer.h"
#include "spec/vocab_subset.h"

namespace specdec {
class ThreadPool;
}

namespace specdec::spec {

enum class DraftShape { Chain, Tree };

struct DraftModelOptions {
    DraftShape shape = DraftShape::Chain;
    int chain_k = 5;        // chain length
    int tree_topk = 4;      // children per expanded node and frontier width
    int tree_depth = 5;     // max draft depth
    int tree_budget = 16;   // max nodes incl. the root
    // Frontier width (nodes expanded per depth); 0: tree_topk. Width 1 keeps
    // every draft forward at one row (the spine is committed as it grows) and
    // still offers the top-k siblings along it to the verifier.
    int tree_width = 0;
    // Deterministic chains stop after a draft whose q is below this (0: off):
    // a further draft forward is unlikely to pay for itself.
    float chain_min_prob = 0.0f;
    // Under sampling: draw children from q (verified by recursive rejection)
    // instead of taking the top-k (verified as sampling without replacement).
    // Sampled trees keep every drawn child (pruning by value would bias them),
    // so the budget is filled by whole sibling groups.
    bool sampled = false;
    int target_n_vocab = 0;     // drafts are target ids below this
    int window = 0;             // >0: the draft sees at most this many recent tokens
    int prefill_chunk = 256;    // rows per forward when catching up on a long history
    sample::SamplingParams params;  // the request's processors; q uses the same
    const VocabSubset* subset = nullptr;  // restrict drafts to a vocabulary subset
    // With a subset: compute the draft's logits over the subset rows only
    // (off: full logits, then masked; same drafts, for comparisons).
    bool subset_lm_head = true;
};

class DraftModelProposer final : public Proposer {
public:
    DraftModelProposer(model::Transformer& model, kv::KvCache& cache, ThreadPool& pool,
                       const DraftModelOptions& opts);
    void begin(int seq) override;
    void begin_with_prefix(int seq, std::span<const int32_t> prefix) override;
    void prefill(int seq, std::span<const int32_t> history) override;
    void propose(std::span<const ProposeInput> in, std::span<DraftTree> out, Rng& rng) override;
    double last_forward_s() const override { return forward_s_; }
    bool uses_subset_head() const { return head_ != nullptr; }

private:
    struct Cand {
        int32_t token = 0;
        int parent = -1;    // candidate index; -1: the root
        float score = 0;    // cumulative log q
        int depth = 1;
        int q_row = -1;     // sampled drafts: row in the tree's q pool
        bool committed = false;  // in the draft cache (a chain shared by the whole frontier)
    };
    struct Pick {
        int32_t token = 0;
        float logq = 0;
    };
    struct Work {
        int seq = 0;
        std::span<const int32_t> hist;  // windowed history; back() = root
        int cap = 1;                    // max nodes incl. root
        int chain_len = 0;              // chain shape: drafts along the chain
        int siblings = 0;               // chain shape: second choices beside its first `siblings` nodes
        int tip = -1;                   // chain shape: the chain's deepest candidate (-1: the root)
        DraftTree* out = nullptr;
        std::vector<Cand> cands;
        std::vector<int> frontier;      // candidate ids to expand next (-1: root)
        std::vector<int> row_of;        // (cands) batch row in the current forward, -1 if absent
        int first_row = 0;              // batch row of this sequence's first row in the current forward
        int root_row = -1;
    };

    void sync_caches(std::vector<Work>& work);
    void forward();
    // Draft distribution q (target vocab width) for the logits of a batch row.
    void draft_dist(int result_row, const Work& w, int node, std::vector<float>& q);
    void expand(Work& w, int node, const std::vector<float>& q, Rng& rng);
    // Deterministic drafts without a full q: the best k tokens of a row and,
    // when with_scores, their log q under the request's temperature.
    void draft_top(int batch_row, const Work& w, int node, int k, bool with_scores);
    void expand_top(Work& w, int node);
    const float* row_logits(int batch_row) const;
    // Subset head: result columns are head_->ids(); history ids mapped to
    // columns (head size for ids outside), for the repetition penalty.
    std::span<const int32_t> to_columns(std::span<const int32_t> ids);
    void commit_shared_chain(Work& w);
    void propose_chain(std::vector<Work>& work, Rng& rng);
    void propose_tree(std::vector<Work>& work, Rng& rng);
    void finish_tree(Work& w);
    std::vector<int32_t> node_history(const Work& w, int node) const;

    model::Transformer& model_;
    kv::KvCache& cache_;
    ThreadPool& pool_;
    DraftModelOptions opts_;
    bool deterministic_;   // drafts are fixed choices (greedy or top-k) rather than samples
    bool fast_top_ = false;  // deterministic drafts ranked from the raw logits (no truncating processor)
    std::vector<int32_t> allowed_;  // subset ids usable as drafts (empty: all ids below the vocab bound)
    std::unique_ptr<model::LmHeadSubset> head_;  // subset LM head (null: full logits)
    std::vector<int32_t> col_of_;   // (target vocab) head column of an id; head size when outside
    std::vector<int32_t> cols_;     // scratch for to_columns
    std::vector<Pick> picks_;
    std::vector<std::vector<int32_t>> known_;  // (n_seq) tokens committed in the draft cache
    std::vector<int> wstart_;                  // (n_seq) history index of the draft's position 0
    model::ForwardBatch batch_;
    model::ForwardResult result_;
    std::vector<float> row_;    // (draft n_vocab) masked logits
    std::vector<float> q_;      // (draft n_vocab)
    double forward_s_ = 0;
};

}  // namespace specdec::spec
