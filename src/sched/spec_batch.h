// The speculative decoding round as a stepping object, so that sequences can
// join and leave a running batch between rounds (continuous batching):
//   admit(slot)  prefill the prompt into the slot's target sequence, sample the
//                first token, let the slot's proposer read the prompt;
//   step()       ONE round for every running slot: propose (one call per
//                distinct proposer, so a proposer still batches its drafts),
//                ONE target forward holding every slot's tree, verify, commit,
//                emit tokens;
//   retire(slot) free the slot's target and draft sequences.
// A slot is a sequence id of the target cache (and of the draft cache when its
// proposer has one). Slots may use different proposers and tree limits (e.g.
// chain next to n-gram next to AR): each row of the shared forward sees only its
// own sequence, so one slot's method never changes another slot's tokens.
// SyncScheduler::run is a thin loop over this object.
#pragma once

#include <vector>

#include "core/rng.h"
#include "sample/sampler.h"
#include "sched/sync_scheduler.h"
#include "spec/draft_tree.h"
#include "spec/proposer.h"
#include "spec/trace.h"
#include "spec/tree_tensors.h"
#include "spec/verifier.h"

namespace specdec::sched {

// How one slot is speculated: which proposer drafts for it and the tree limits
// its trees are checked against (SchedulerOptions' meaning).
struct SlotSpec {
    spec::Proposer* proposer = nullptr;
    int tree_budget = 0;   // 0: none (the context and tokens left still cap it)
    int tree_depth = 0;    // 0: none
    bool distinct_siblings = false;
};

// What one round did for one slot.
struct SlotRound {
    int slot = 0;
    int drafted = 0;   // draft nodes (root excluded)
    int accepted = 0;  // draft tokens accepted
    int last_node = 0; // tree index of the accepted path's last node (0: none accepted)
    int emitted = 0;   // tokens handed to on_token (accepted + bonus, cut at a stop)
    bool lookup = false;  // the tree was a prompt-lookup chain (DraftTree::from_lookup)
};

struct StepReport {
    int rows = 0;            // slots verified this round
    int forward_rows = 0;    // target forward rows (tree nodes of every slot)
    double draft_s = 0;      // proposers
    double verify_s = 0;     // tree tensors + target forward + verification + commit
    std::vector<SlotRound> slots;
};

class SpecBatch {
public:
    // shared_rng: every random draw (first tokens, drafts, verification) comes
    // from it in slot order, which is SyncScheduler's reproducible stream.
    // Without it each slot draws from its own Rng seeded with its params' seed,
    // so a seeded request's tokens do not depend on what else is in the batch
    // (drafts then draw from an internal Rng; deterministic proposers draw none).
    SpecBatch(const TargetContext& target, spec::ExecMode mode, spec::TraceWriter* trace = nullptr,
              Rng* shared_rng = nullptr);

    // Starts `slot` (a free target sequence id): prefill, first token (passed
    // to on_token like every later one), draft prefill. Returns the first
    // token. The slot may be finished at once (stop, max_new == 1).
    // With prefilled_logits the prompt is already committed in the slot's
    // target sequence (a shared prefill; anything after it is dropped) and
    // those are its last token's logits; with draft_ready the proposer's cache
    // holds the prompt too (Proposer::begin_with_prefix).
    int32_t admit(int slot, const std::vector<int32_t>& prompt, const SlotSpec& spec,
                  const sample::SamplingParams& params, int max_new, const OnToken& on_token,
                  const float* prefilled_logits = nullptr, bool draft_ready = false);
    // One speculative round for every running slot. A slot finishes when
    // on_token returns true, it reaches max_new, or its context is full.
    StepReport step(const OnToken& on_token);
    // Frees the slot's target sequence and its proposer's draft state. The
    // slot can then be admitted again (with any spec).
    void retire(int slot);

    bool admitted(int slot) const { return slots_[slot].used; }
    bool running(int slot) const { return slots_[slot].used && !slots_[slot].done; }
    bool any_running() const;
    int n_slots() const { return (int)slots_.size(); }
    // Tokens so far (prompt + generated) of an admitted slot.
    const std::vector<int32_t>& history(int slot) const { return slots_[slot].hist; }
    const SpecStats& stats() const { return stats_; }

private:
    struct Slot {
        bool used = false, done = false;
        std::vector<int32_t> hist;
        int generated = 0, max_new = 0;
        SlotSpec spec;
        sample::SamplingParams params;
        Rng rng{0};
        spec::TreeTensors tensors;
        int row_base = 0;
    };
    Rng& rng_of(Slot& s) { return shared_rng_ ? *shared_rng_ : s.rng; }
    // Calls f(proposer, a, b) for each run [a, b) of order_'s first n slots
    // that share a proposer (order_ is grouped by proposer).
    template <class F>
    void for_each_proposer_run(size_t n, F&& f) {
        for (size_t a = 0; a < n;) {
            size_t b = a + 1;
            spec::Proposer* p = slots_[order_[a]].spec.proposer;
            while (b < n && slots_[order_[b]].spec.proposer == p) ++b;
            f(p, a, b);
            a = b;
        }
    }
    // Feeds one token; returns true when the slot is done.
    bool emit(int slot, int32_t tok, TokenSource source, const OnToken& on_token);
    void finish(int slot);  // done: no more rounds, and its proposer is told so
    // Target features (EAGLE-3): batch_.capture_layers gets the layer outputs
    // that are the inputs of `layers` (the forward returns layer outputs);
    // deliver_features hands p the captured rows of tokens just committed.
    void add_capture(std::span<const int> layers);
    void deliver_features(spec::Proposer* p, int seq, int pos0, std::span<const int> rows);

    TargetContext tgt_;
    spec::ExecMode mode_;
    spec::TraceWriter* trace_;
    Rng* shared_rng_;
    Rng draft_rng_{0};
    std::vector<Slot> slots_;
    int round_ = 0;
    SpecStats stats_;
    spec::Verifier verifier_;
    model::ForwardBatch batch_;
    model::ForwardResult result_;
    std::vector<float> scratch_;
    // Per-round work, kept to reuse allocations.
    std::vector<int> order_;
    std::vector<spec::ProposeInput> inputs_;
    std::vector<spec::DraftTree> trees_;
    std::vector<spec::RoundOutcome> outcomes_;
    spec::VerifyResult vr_;
    std::vector<int> feat_rows_;
    std::vector<const std::vector<float>*> feat_layers_;
};

}  // namespace specdec::sched
