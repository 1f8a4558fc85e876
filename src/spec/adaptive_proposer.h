// The adaptive proposer (`--method auto`): each round, for every sequence, the
// draft shape with the most expected tokens per second, or no draft at all.
// Candidates are a prompt-lookup chain (free to draft, when the history's
// suffix occurred before) and a chain of 1..draft_max tokens from the draft
// proposer when one is given, optionally with sibling leaves (the draft's
// second choice beside the chain's node at its first depths: a small tree
// whose extra rows cost verification only; sibling_max > 0, deterministic
// drafts): a draft model's, or an EAGLE-3 head's (which
// reads the target's features: those of every committed token are passed on
// to it, whatever shape each round took); "none" is a plain AR step, so when
// no speculation can pay the loop decodes as AR does, at AR's cost.
//
// What it knows comes from before the round only (spec/cost_model.h): the
// target's t(n) and the draft's forward times, calibrated once per process
// and corrected from every timed round; and per sequence, acceptance by depth
// for each drafter (spec/acceptance_estimator.h), learned from the verified
// rounds (Proposer::observe). So greedy output is AR's token for token and
// sampled output follows the target exactly, whatever the choices were.
//
// A drafter the choice has left unused is probed now and then, so that on a
// prompt where it starts to pay it is taken up again: its belief goes back to
// the prior and it drafts the shortest chain (one token) for one round, whose
// verified outcome then updates that belief. Probes are paid from an
// exploration budget: every round a drafter sits idle earns it
// `explore_share` of that round's AR time, and a probe runs once the credit
// covers what the probe would cost if nothing were accepted (the extra
// verification row plus, for the draft model, its forward and catch-up). So
// on any prompt, probing costs at most about `explore_share` of AR's time per
// drafter, on a machine where an extra row is cheap (probes every few rounds)
// as on one where it costs most of a forward (probes rarely). The draft
// model's cache catches up on the tokens it missed the next time it drafts,
// and that catch-up is part of the cost.
#pragma once

#include <memory>
#include <vector>

#include "spec/cost_model.h"
#include "spec/proposer.h"

namespace specdec::spec {

struct AdaptiveOptions {
    int draft_max = 6;    // longest draft-model chain (the draft proposer's chain_k must allow it)
    int lookup_max = 8;   // longest lookup chain
    int lookup_min_n = 2; // shortest history suffix that counts as a lookup match
    int lookup_max_n = 4; // longest suffix tried (first)
    AcceptanceOptions draft_acceptance{0.7, 2.0, 0.9, 16};
    AcceptanceOptions lookup_acceptance{0.6, 2.0, 0.9, 16};
    // Sibling leaves beside a draft chain (0: chains only; > 0 only where the
    // draft proposer's drafts are deterministic, e.g. greedy). q_i's prior:
    // the second choice is right about a third of the times the first is not.
    int sibling_max = 0;
    AcceptanceOptions sibling_acceptance{0.3, 2.0, 0.9, 16};
    // Share of AR's time an idle drafter's probes may cost (see above): 0.5 %
    // each for lookup and draft, which keeps the worst case of a prompt where
    // no draft ever pays within about 1 % of AR.
    double explore_share = 0.005;
    bool learn_costs = true;       // correct the cost curves from the timed rounds
    // A plan with drafts must be predicted this much faster than AR (the
    // estimates are noisy; a marginal gamble is not worth taking).
    double min_gain = 0.02;
    // Every this many rounds without one, a plain AR round for the whole
    // batch (0: never): when drafts always win, t(1) (AR's cost, against
    // which every plan is judged) is otherwise never timed again after the
    // calibration, and a calibration that came out slow would bias every
    // choice towards drafting.
    int ar_probe_every = 16;
    // Whether the draft proposer keeps the accepted drafts it fed in its
    // cache (a draft model: its next catch-up starts after them), or reads
    // every newly committed row again (an EAGLE-3 head: its drafted rows are
    // fed its own output, never the target's features, so they are dropped).
    bool draft_keeps_accepted = true;
};

// What the choices were, for --json, traces and /metrics.
struct AdaptiveStats {
    int64_t rounds_none = 0, rounds_lookup = 0, rounds_draft = 0;  // sequence-rounds by shape
    int64_t lookup_drafts = 0, draft_drafts = 0;                   // drafts proposed by each
    int64_t sibling_drafts = 0;  // of draft_drafts, sibling leaves beside the chains
    int64_t plans = 0;
    int64_t ar_probes = 0;  // rounds made plain AR to time t(1) (counted in rounds_none too)
    int64_t drafter_probes = 0;  // one-token probes of an idle drafter (counted in its rounds too)
    double predicted_s = 0;  // sum over rounds of the chosen plan's predicted seconds
    double measured_s = 0;   // sum over the same rounds of target forward + draft seconds
    // The counters' growth since `before` (an earlier copy of the same proposer's).
    AdaptiveStats since(const AdaptiveStats& before) const {
        return {rounds_none - before.rounds_none,     rounds_lookup - before.rounds_lookup,
                rounds_draft - before.rounds_draft,   lookup_drafts - before.lookup_drafts,
                draft_drafts - before.draft_drafts,   sibling_drafts - before.sibling_drafts,
                plans - before.plans,
                ar_probes - before.ar_probes,         drafter_probes - before.drafter_probes,
                predicted_s - before.predicted_s,     measured_s - before.measured_s};
    }
};

class AdaptiveProposer final : public Proposer {
public:
    // draft: a chain proposer (a DraftModelProposer or an Eagle3Proposer), or
    // null for lookup only.
    // target_costs (required) and draft_costs (required with a draft) are
    // calibrated curves; they may be shared with other proposers of the process.
    AdaptiveProposer(std::unique_ptr<Proposer> draft, std::shared_ptr<RowCostCurve> target_costs,
                     std::shared_ptr<RowCostCurve> draft_costs, const AdaptiveOptions& opts);

    void begin(int seq) override;
    void begin_with_prefix(int seq, std::span<const int32_t> prefix) override;
    void prefill(int seq, std::span<const int32_t> history) override;
    void propose(std::span<const ProposeInput> in, std::span<DraftTree> out, Rng& rng) override;
    double last_forward_s() const override { return drafted_ ? draft_->last_forward_s() : 0.0; }
    void observe(const RoundFeedback& fb) override;
    double last_predicted_s() const override { return plan_.predicted_s; }
    std::span<const int> feature_layers() const override {
        return draft_ ? draft_->feature_layers() : std::span<const int>{};
    }
    void observe_features(const TargetFeatures& f) override {
        if (draft_) draft_->observe_features(f);
    }

    const AdaptiveStats& stats() const { return stats_; }
    const ShapePlan& last_plan() const { return plan_; }
    double draft_scale() const { return draft_scale_; }

private:
    struct SeqState {
        SeqState(const AcceptanceOptions& d, const AcceptanceOptions& l, const AcceptanceOptions& s)
            : draft(d), lookup(l), sibling(s) {}
        AcceptanceEstimator draft, lookup, sibling;
        // This round's draft tree, to read its verified outcome: each node's
        // depth and whether it is a sibling leaf (not its parent's first child).
        std::vector<int> node_depth;
        std::vector<uint8_t> node_sibling;
        int draft_known = 0;     // history tokens the draft's cache holds (its next catch-up starts there)
        double credit_draft = 0;   // exploration credit (seconds) earned while the draft sat idle
        double credit_lookup = 0;  // the same for lookup, over rounds that had a lookup match
        Shape shape;             // this round's choice, until observe
        int hist_len = 0;        // history length at this round's propose
        bool had_lookup = false;
    };
    SeqState& state(int seq);
    // Turns sequence i's None into a one-token probe of an idle drafter whose
    // credit covers the probe's cost under `costs` (lookup first: it is cheaper).
    void schedule_probe(size_t i, SeqState& st, const RoundCosts& costs);

    std::unique_ptr<Proposer> draft_;
    std::shared_ptr<RowCostCurve> target_costs_, draft_costs_;
    AdaptiveOptions opts_;
    std::vector<std::unique_ptr<SeqState>> seqs_;
    double draft_scale_ = 1.0;
    double predicted_draft_s_ = 0;
    int rounds_since_ar_ = 0;  // rounds since the last all-None plan
    bool drafted_ = false;
    AdaptiveStats stats_;
    ShapePlan plan_;
    ShapePlan probe_plan_;  // scratch: plan_ with one probe, to price it
    // Per-round scratch.
    std::vector<ShapeCandidates> cands_;
    std::vector<std::vector<int32_t>> lookups_;
    std::vector<ProposeInput> draft_in_;
    std::vector<DraftTree> draft_out_;
    std::vector<size_t> draft_of_;
};

}  // namespace specdec::spec
