// The proposer interface: given each sequence's history, produce one draft
// tree per sequence. Proposers are interchangeable; the scheduler, the tree
// tensors and the verifier do not know which one made a tree.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/rng.h"
#include "spec/draft_tree.h"

namespace specdec::spec {

struct ProposeInput {
    int seq = 0;                          // sequence id (same id in target and draft caches)
    std::span<const int32_t> history;     // prompt + generated; history.back() is the root
    int max_nodes = 1;                    // cap on tree size incl. the root (context room, tokens left)
    // Chain proposers with deterministic drafts (draft model, EAGLE-3 head):
    // also put the draft's second choice beside the chain's node at each of
    // the first `siblings` depths, as a leaf. Such a tree costs the draft no
    // more forwards than the chain (leaves are never fed) and the target one
    // more verification row per sibling; the adaptive proposer asks for it
    // where rows are cheap and the first choice is often wrong. The chain
    // node comes first among its parent's children. Others ignore it.
    int siblings = 0;
};

// What one verification round did for one sequence a proposer drafted for.
struct RoundOutcome {
    int seq = 0;
    int drafted = 0;   // draft nodes verified (root excluded)
    int accepted = 0;  // of them accepted (the accepted path's length)
    // Tree index of the accepted path's last node (0: the root, nothing
    // accepted); -1: not given (the path is then the chain's first `accepted`).
    int last_node = -1;
    // The tokens the round delivered (accepted drafts, then the target's
    // token after them), cut at a stop; the last is the next root unless the
    // sequence ended. Valid during observe only.
    std::span<const int32_t> emitted{};
};
// The round as the loop timed it: its proposer's sequences, and the one
// target forward all sequences of the batch shared.
struct RoundFeedback {
    std::span<const RoundOutcome> seqs;
    int forward_rows = 0;
    double forward_s = 0;
    double tree_s = 0;  // tree tensors, invariant checks and the forward's batch
};
// Target features (EAGLE-3 heads): for a run of tokens of one sequence that a
// target forward read and that are now committed (a prefill chunk, or a
// verified tree's accepted path), each token's residual stream at the input
// of the proposer's feature layers, captured in that same forward.
struct TargetFeatures {
    int seq = 0;
    int pos0 = 0;                                // position of the first token
    std::span<const int> rows;                   // forward rows of the tokens, in position order
    std::span<const std::vector<float>* const> layers;  // per feature layer, low -> high: (forward rows, n_embd)
    int n_embd = 0;
};

class Proposer {
public:
    virtual ~Proposer() = default;
    // A sequence starts (or restarts) with an empty state.
    virtual void begin(int seq) {}
    // Instead of begin: the sequence starts and the proposer's own cache (if
    // it has one) already holds `prefix` committed in that sequence (a prefill
    // shared by several runs). A proposer without such a cache just begins.
    virtual void begin_with_prefix(int seq, std::span<const int32_t> prefix) { begin(seq); }
    // Instead of begin: the sequence starts with `prompt`, which the target is
    // about to prefill. A proposer that drafts on hardware of its own (SSD's
    // draft side) starts reading the prompt now, beside the target's prefill.
    virtual void begin_with_prompt(int seq, std::span<const int32_t> prompt) { begin(seq); }
    // Optional, after begin: read the sequence's history (its last token is the
    // next root) ahead of the first propose, so that the prompt is processed
    // in the prefill phase rather than inside the first decode round.
    virtual void prefill(int seq, std::span<const int32_t> history) {}
    // The sequence finished (a stop, its token limit, the context): it gets
    // no more rounds until it begins again. A proposer that works for a
    // sequence between rounds (SSD's draft side) stops now; a sequence left
    // out of one propose call has not ended (a wrapper such as lookup first
    // may have drafted it elsewhere).
    virtual void end(int seq) {}
    // This round the tree for in.seq comes from elsewhere (a lookup-first
    // wrapper's chain), called before propose for the other sequences. A
    // proposer that works between rounds may follow it (SSD's draft side
    // builds its cache for that chain's outcomes); it returns true when it
    // did, and then it also gets this round's propose call, even with no
    // inputs, and the sequence's outcome in observe. The default ignores it.
    virtual bool drafted_elsewhere(const ProposeInput& in, const DraftTree& tree) { return false; }
    // One tree per input, out[i] for in[i]. Random choices draw from rng.
    virtual void propose(std::span<const ProposeInput> in, std::span<DraftTree> out, Rng& rng) = 0;
    // Seconds spent in draft-model forwards during the last propose (0 if none).
    virtual double last_forward_s() const { return 0.0; }
    // Seconds the last propose predicted its round would take (target forward
    // + draft), for traces; < 0 for proposers that make no prediction.
    virtual double last_predicted_s() const { return -1.0; }
    // After the round's verification: what became of the trees of the last
    // propose. Proposers that learn (acceptance, costs) override it; it comes
    // after the tokens are emitted, so it can only shape later rounds.
    virtual void observe(const RoundFeedback& fb) {}
    // Target layers (1..n_layer) whose input this proposer reads, ascending;
    // empty (the default) for proposers that read none: then nothing is
    // captured and the forward costs what it always did.
    virtual std::span<const int> feature_layers() const { return {}; }
    // The features of tokens just committed in the target's cache, in
    // position order across calls (prefill chunks, then each round's path).
    virtual void observe_features(const TargetFeatures& f) {}
};

// Plain AR: the tree is only its root.
class NoProposer final : public Proposer {
public:
    void propose(std::span<const ProposeInput> in, std::span<DraftTree> out, Rng&) override {
        for (size_t i = 0; i < in.size(); ++i) out[i].reset(in[i].history.back());
    }
};

}  // namespace specdec::spec
