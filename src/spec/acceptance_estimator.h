// Online acceptance of a chain of drafts, by depth: p_i is the chance that the
// draft at depth i is accepted given that its parent (depth i - 1) was. A
// verified chain of `len` drafts of which `accepted` were accepted says
// "accepted" for depths 1..accepted and "rejected" for depth accepted + 1
// (when accepted < len); deeper drafts were never put to the test.
//
// Each depth keeps Beta-like counts that start at a prior and decay by a
// factor per observation of that depth, so a sequence that turns from code to
// prose (or back) is followed within a few rounds. Depths past max_depth
// share the last one's counts. With decay 1 nothing is forgotten and
// pooled() is the plain ratio of all accepts to all trials.
//
// One estimator serves the adaptive proposer (expected tokens of a chain of k
// drafts) and the SSD fan-out (its per-draft acceptance a).
#pragma once

#include <vector>

namespace specdec::spec {

struct AcceptanceOptions {
    double prior_accept = 0.7;  // prior mean of every p_i
    double prior_weight = 2.0;  // prior pseudo-observations per depth
    double decay = 0.9;         // kept share of a depth's counts per new observation (1: keep all)
    int max_depth = 16;
};

class AcceptanceEstimator {
public:
    explicit AcceptanceEstimator(const AcceptanceOptions& opts = {});
    // A verified chain (or a tree's accepted path) of `len` drafts, `accepted` of them accepted.
    void observe(int accepted, int len);
    // One draft at `depth` put to the test (a sibling leaf beside a rejected
    // chain node: accepted or not).
    void observe_one(int depth, bool accepted);
    // p_i, depth >= 1.
    double p(int depth) const;
    // Expected tokens a round emits with a chain of k drafts: the bonus token
    // plus the expected accepted prefix, 1 + sum_{i<=k} prod_{j<=i} p_j.
    double expected_tokens(int k) const;
    // All accepts over all trials (prior included): one acceptance rate for
    // callers that model every depth alike (SSD's geometric fan-out).
    double pooled() const { return pooled_acc_ / (pooled_acc_ + pooled_rej_); }
    int observations() const { return n_obs_; }
    // Replaces every depth's counts by `weight` pseudo-observations at mean
    // `accept` (the pooled rate is kept): a drafter that has not been used
    // for a while is probed from its prior again, not from the failures that
    // made it idle, and the probe's verified round corrects that at once.
    void revisit(double accept, double weight);

private:
    struct Counts {
        double acc, rej;
    };
    Counts& at(int depth);
    const Counts& at(int depth) const;
    AcceptanceOptions opts_;
    std::vector<Counts> depth_;  // [i - 1]: depth i
    double pooled_acc_, pooled_rej_;
    int n_obs_ = 0;
};

}  // namespace specdec::spec
