// Proposer backed by an EAGLE-3 head (model/eagle3_forward.h): drafts from
// the target's own features, captured during the target's forwards
// (Proposer::feature_layers / observe_features), so no second target pass.
//
// Head rows and the cache: the head's row at position p reads the target's
// features at p and the token at p + 1, and predicts the token at p + 2.
// Rows backed by real features are final once the token after them is known
// and are committed (by length) into the head's cache; rows the head drafts
// itself (fed its own prenorm output instead of fused features) live in the
// speculative slots of one propose() only and are never committed.
//
// A round: catch-up (one forward over every row whose features arrived since
// the last round: the accepted path, the last one ending at the root; its
// logits start the draft), then one forward per draft depth over the frontier.
// Chain = a tree of width 1. Tree = EAGLE-2's dynamic tree: the root's top-k
// children; per depth the frontier's top-k children each, scored by
// cumulative log q over the draft vocabulary; next frontier = the best k of
// them; finally the best budget - 1 candidates (parents before children).
// Each frontier row sees the committed prefix and its own ancestors' slots
// (the tree mask inside the draft); siblings never see each other.
// Drafts are deterministic (top-k), so under sampling they are verified as
// sampling without replacement: the output is exactly the target's.
#pragma once

#include <vector>

#include "kv/kv_cache.h"
#include "model/eagle3_forward.h"
#include "spec/proposer.h"

namespace specdec {
class ThreadPool;
}

namespace specdec::spec {

struct Eagle3ProposerOptions {
    bool tree = false;     // false: a chain of chain_k
    int chain_k = 5;
    int tree_topk = 4;     // children per expanded node and frontier width
    int tree_depth = 5;    // max draft depth
    int tree_budget = 16;  // max nodes incl. the root
    int catch_up_chunk = 128;  // rows of one sequence per catch-up forward (a long prompt)
};

class Eagle3Proposer final : public Proposer {
public:
    // cache: the head's (Eagle3Forward::kv_options), one sequence per target
    // sequence, with room past the target's context for the draft rows.
    Eagle3Proposer(model::Eagle3Forward& fwd, kv::KvCache& cache, ThreadPool& pool, const Eagle3ProposerOptions& opts);

    void begin(int seq) override;
    void prefill(int seq, std::span<const int32_t> history) override;
    void propose(std::span<const ProposeInput> in, std::span<DraftTree> out, Rng& rng) override;
    double last_forward_s() const override { return forward_s_; }
    std::span<const int> feature_layers() const override { return fwd_.head().config().feature_layers; }
    void observe_features(const TargetFeatures& f) override;

    // Head forwards of the last propose, and the rows they ran (draft cost).
    int last_forwards() const { return forwards_; }
    int last_rows() const { return rows_; }

private:
    struct SeqState {
        int pos0 = 0;              // position of the first pending feature row (== head cache committed)
        std::vector<float> feats;  // (pending, 3 * target_hidden) features not yet in the head's cache
    };
    struct Cand {
        int32_t draft_id = 0;
        int parent = -1;   // candidate index; -1: the root
        float score = 0;   // cumulative log q
        int depth = 1;
        int slot = -1;     // speculative slot once fed
        int out_row = -1;  // row of its forward's output (for its prenorm / logits)
    };
    struct Work {
        int seq = 0;
        int32_t root = 0;
        int root_pos = 0;
        int budget = 1;
        int depth = 0;
        int topk = 1;
        int siblings = 0;  // chain: children of depths 1..siblings are the top 2 (the second a leaf)
        // Children wanted of a node at depth d - 1 (children at depth d).
        int children(int d) const { return d <= siblings ? 2 : topk; }
        DraftTree* out = nullptr;
        std::vector<Cand> cands;
        std::vector<int> frontier;
        std::vector<float> prenorm;  // (cands, H) prenorm output of fed candidates (by index)
        std::vector<float> root_g;   // (H) prenorm of the row that predicts the root's children
        int next_slot = 0;
    };

    // Rows of pending features for positions [pos0, upto) of `seq` into the
    // batch (tokens from history); the last wants logits when `logits`.
    void add_catch_up_rows(int seq, std::span<const int32_t> hist, int upto, bool logits);
    void run_forward();
    // Top-k draft ids of a logits row with their log q (log-softmax).
    void top_children(const float* logits, int k, std::vector<std::pair<float, int32_t>>& out);
    void finish(Work& w);

    model::Eagle3Forward& fwd_;
    kv::KvCache& cache_;
    ThreadPool& pool_;
    Eagle3ProposerOptions opts_;
    int feat_width_ = 0;
    std::vector<SeqState> seqs_;
    model::Eagle3Batch batch_;
    model::Eagle3Output result_;
    std::vector<float> g_;       // fused rows scratch
    std::vector<int32_t> anc_;   // ancestors scratch
    std::vector<float> logq_;    // (draft_vocab) scratch
    std::vector<int32_t> idx_;   // (draft_vocab) scratch
    double forward_s_ = 0;
    int forwards_ = 0, rows_ = 0;
};

}  // namespace specdec::spec
