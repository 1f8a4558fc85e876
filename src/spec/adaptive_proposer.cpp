#include "spec/adaptive_proposer.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "spec/ngram_proposer.h"

namespace specdec::spec {

AdaptiveProposer::AdaptiveProposer(std::unique_ptr<Proposer> draft, std::shared_ptr<RowCostCurve> target_costs,
                                   std::shared_ptr<RowCostCurve> draft_costs, const AdaptiveOptions& opts)
    : draft_(std::move(draft)),
      target_costs_(std::move(target_costs)),
      draft_costs_(std::move(draft_costs)),
      opts_(opts) {
    SPECDEC_CHECK(target_costs_ && !target_costs_->empty(), "adaptive proposer: the target's costs are not measured");
    SPECDEC_CHECK(!draft_ || (draft_costs_ && !draft_costs_->empty()),
                  "adaptive proposer: a draft without measured costs");
    SPECDEC_CHECK(opts.draft_max >= 1 && opts.lookup_max >= 1, "adaptive proposer: chain limits must be >= 1");
    SPECDEC_CHECK(opts.lookup_min_n >= 1 && opts.lookup_max_n >= opts.lookup_min_n,
                  "adaptive proposer: need 1 <= lookup_min_n <= lookup_max_n");
    SPECDEC_CHECK(opts.explore_share >= 0, "adaptive proposer: explore_share must be >= 0");
}

AdaptiveProposer::SeqState& AdaptiveProposer::state(int seq) {
    SPECDEC_CHECK(seq >= 0, "adaptive proposer: negative sequence id");
    if (seq >= (int)seqs_.size()) seqs_.resize(seq + 1);
    if (!seqs_[seq])
        seqs_[seq] = std::make_unique<SeqState>(opts_.draft_acceptance, opts_.lookup_acceptance,
                                                opts_.sibling_acceptance);
    return *seqs_[seq];
}

void AdaptiveProposer::begin(int seq) {
    if (seq < (int)seqs_.size()) seqs_[seq].reset();
    state(seq);
    if (draft_) draft_->begin(seq);
}

void AdaptiveProposer::begin_with_prefix(int seq, std::span<const int32_t> prefix) {
    if (seq < (int)seqs_.size()) seqs_[seq].reset();
    state(seq).draft_known = (int)prefix.size();
    if (draft_) draft_->begin_with_prefix(seq, prefix);
}

void AdaptiveProposer::prefill(int seq, std::span<const int32_t> history) {
    if (!draft_) return;
    draft_->prefill(seq, history);
    // The draft reads all but the root (DraftModelProposer::prefill).
    state(seq).draft_known = std::max(state(seq).draft_known, (int)history.size() - 1);
}

void AdaptiveProposer::propose(std::span<const ProposeInput> in, std::span<DraftTree> out, Rng& rng) {
    const size_t n = in.size();
    cands_.assign(n, ShapeCandidates{});
    lookups_.resize(n);
    for (size_t i = 0; i < n; ++i) {
        SeqState& st = state(in[i].seq);
        const int room = std::max(0, in[i].max_nodes - 1);
        ShapeCandidates& c = cands_[i];
        c.max_drafts = room;
        lookups_[i].clear();
        if (room > 0)
            lookups_[i] = NgramProposer::lookup(in[i].history, opts_.lookup_min_n, opts_.lookup_max_n,
                                                std::min(opts_.lookup_max, room));
        st.had_lookup = !lookups_[i].empty();
        if (st.had_lookup) {
            c.lookup = &st.lookup;
            c.lookup_len = (int)lookups_[i].size();
        }
        if (draft_) {
            c.draft = &st.draft;
            c.draft_max = opts_.draft_max;
            c.draft_catchup = std::max(1, (int)in[i].history.size() - st.draft_known);
            if (opts_.sibling_max > 0) {
                c.sibling = &st.sibling;
                c.sibling_max = opts_.sibling_max;
            }
        }
        st.hist_len = (int)in[i].history.size();
    }
    const RoundCosts costs{target_costs_.get(), draft_costs_.get(), draft_scale_};
    if (opts_.learn_costs && opts_.ar_probe_every > 0 && rounds_since_ar_ >= opts_.ar_probe_every) {
        plan_.shapes.assign(n, Shape{});
        evaluate_plan(cands_, costs, plan_);
        ++stats_.ar_probes;
    } else {
        plan_ = choose_shapes(cands_, costs, opts_.min_gain);
        // Not in an AR-timing round: that one must stay plain AR.
        for (size_t i = 0; i < n; ++i)
            if (plan_.shapes[i].kind == ShapeKind::None) schedule_probe(i, state(in[i].seq), costs);
    }
    const bool all_none = std::all_of(plan_.shapes.begin(), plan_.shapes.end(),
                                      [](const Shape& s) { return s.kind == ShapeKind::None; });
    rounds_since_ar_ = all_none ? 0 : rounds_since_ar_ + 1;
    ++stats_.plans;
    stats_.predicted_s += plan_.predicted_s;
    predicted_draft_s_ = plan_.draft_s / draft_scale_;  // the draft curve's own prediction, unscaled

    draft_in_.clear();
    draft_of_.clear();
    for (size_t i = 0; i < n; ++i) {
        const Shape& s = plan_.shapes[i];
        state(in[i].seq).shape = s;
        const int32_t root = in[i].history.back();
        switch (s.kind) {
            case ShapeKind::None:
                out[i].reset(root);
                ++stats_.rounds_none;
                break;
            case ShapeKind::Lookup:
                out[i].assign_chain(root, std::span(lookups_[i]).first(s.k));
                out[i].from_lookup = true;
                ++stats_.rounds_lookup;
                stats_.lookup_drafts += s.k;
                break;
            case ShapeKind::Draft: {
                ProposeInput d = in[i];
                d.max_nodes = s.rows();
                d.siblings = s.siblings;
                draft_in_.push_back(d);
                draft_of_.push_back(i);
                ++stats_.rounds_draft;
                break;
            }
        }
    }
    drafted_ = !draft_in_.empty();
    if (!drafted_) return;
    draft_out_.resize(draft_in_.size());
    draft_->propose(draft_in_, draft_out_, rng);
    for (size_t j = 0; j < draft_of_.size(); ++j) {
        const DraftTree& t = draft_out_[j];
        SeqState& st = state(in[draft_of_[j]].seq);
        st.node_depth.assign((size_t)t.size(), 0);
        st.node_sibling.assign((size_t)t.size(), 0);
        std::vector<uint8_t> has_child((size_t)t.size(), 0);
        for (int v = 1; v < t.size(); ++v) {
            const int par = t.parents[(size_t)v];
            st.node_depth[(size_t)v] = st.node_depth[(size_t)par] + 1;
            st.node_sibling[(size_t)v] = has_child[(size_t)par];  // parents come first; so does the chain's child
            has_child[(size_t)par] = 1;
            stats_.sibling_drafts += st.node_sibling[(size_t)v];
        }
        stats_.draft_drafts += t.size() - 1;
        out[draft_of_[j]] = std::move(draft_out_[j]);
    }
}

void AdaptiveProposer::schedule_probe(size_t i, SeqState& st, const RoundCosts& costs) {
    const ShapeCandidates& c = cands_[i];
    if (c.max_drafts < 1) return;
    // What the probe adds to the round's predicted time: all of it is lost
    // if its one draft is rejected.
    const auto probe_cost = [&](ShapeKind kind) {
        probe_plan_ = plan_;
        probe_plan_.shapes[i] = {kind, 1};
        evaluate_plan(cands_, costs, probe_plan_);
        return probe_plan_.predicted_s - plan_.predicted_s;
    };
    // The probed drafter's credit is spent: observe() sets it back to 0, as
    // for any round that drafter drafts.
    const auto take = [&](ShapeKind kind, AcceptanceEstimator& belief, const AcceptanceOptions& prior) {
        belief.revisit(prior.prior_accept, prior.prior_weight);  // the probe's outcome decides, not old failures
        plan_.shapes[i] = {kind, 1};
        evaluate_plan(cands_, costs, plan_);
        ++stats_.drafter_probes;
    };
    if (c.lookup && c.lookup_len > 0 && st.credit_lookup > 0 && st.credit_lookup >= probe_cost(ShapeKind::Lookup))
        return take(ShapeKind::Lookup, st.lookup, opts_.lookup_acceptance);
    if (c.draft && st.credit_draft > 0 && st.credit_draft >= probe_cost(ShapeKind::Draft))
        return take(ShapeKind::Draft, st.draft, opts_.draft_acceptance);
}

void AdaptiveProposer::observe(const RoundFeedback& fb) {
    const double draft_s = last_forward_s();
    // Each idle drafter earns its share of this round's AR time per sequence.
    const double earn = opts_.explore_share * plan_.ar_s / (double)std::max<size_t>(1, plan_.shapes.size());
    for (const RoundOutcome& o : fb.seqs) {
        SeqState& st = state(o.seq);
        const bool drafted_by_model = st.shape.kind == ShapeKind::Draft, by_lookup = st.shape.kind == ShapeKind::Lookup;
        if (draft_) st.credit_draft = drafted_by_model ? 0.0 : st.credit_draft + earn;
        if (st.had_lookup || by_lookup) st.credit_lookup = by_lookup ? 0.0 : st.credit_lookup + earn;
        switch (st.shape.kind) {
            case ShapeKind::None:
                break;
            case ShapeKind::Lookup:
                st.lookup.observe(o.accepted, o.drafted);
                break;
            case ShapeKind::Draft: {
                // The chain's outcome, and the sibling's where the chain's
                // node at that depth was rejected and a sibling stood beside it.
                const size_t n_nodes = st.node_depth.size();
                const int last = o.last_node >= 0 && (size_t)o.last_node < n_nodes ? o.last_node : 0;
                const bool on_sibling = last > 0 && st.node_sibling[(size_t)last];
                const int chain_acc = o.last_node < 0 ? o.accepted
                                      : last > 0      ? st.node_depth[(size_t)last] - (on_sibling ? 1 : 0)
                                                      : 0;
                int chain_len = 0;
                bool sibling_at_next = false;
                for (size_t v = 1; v < n_nodes; ++v) {
                    if (!st.node_sibling[v]) ++chain_len;
                    else if (st.node_depth[v] == chain_acc + 1) sibling_at_next = true;
                }
                st.draft.observe(std::min(chain_acc, chain_len), chain_len);
                if (sibling_at_next) st.sibling.observe_one(chain_acc + 1, on_sibling);
                // The draft fed the root and every chain draft but the last;
                // what the target accepted of them stays valid in its cache,
                // unless it drops its own rows (then only the root's is kept).
                if (chain_len > 0)
                    st.draft_known =
                        st.hist_len + (opts_.draft_keeps_accepted ? std::min(chain_acc, chain_len - 1) : 0);
                break;
            }
        }
        st.shape = Shape{};
    }
    stats_.measured_s += fb.forward_s + draft_s;
    if (!opts_.learn_costs) return;
    target_costs_->observe(fb.forward_rows, fb.forward_s);
    if (drafted_ && draft_s > 0 && predicted_draft_s_ > 0)
        draft_scale_ = std::clamp(0.8 * draft_scale_ + 0.2 * (draft_s / predicted_draft_s_), 0.2, 5.0);
}

}  // namespace specdec::spec
