// What a round costs and what it buys, for choosing each round's draft shape
// (shared/design/speculative-decoding.md, section 8): a round that verifies n
// rows costs t(n) seconds of target forward plus the draft's forwards, and a
// chain of k drafts emits E(k) tokens in expectation (spec/acceptance_estimator.h);
// the shape with the most expected tokens per second wins, and "no draft at
// all" (one row, one token: plain AR) is always among the candidates. A draft
// chain may carry sibling leaves (the draft's second choice at its first
// depths): a small tree that costs verification rows but no draft forwards,
// expected to add sum_{i <= s} P_{i-1} (1 - p_i) q_i tokens (P_i: the chain's
// first i drafts all accepted; q_i: the second choice right where the first
// was not).
//
// RowCostCurve holds t(n) for one model on this machine: measured once per
// process (calibrate) and corrected online from the rounds the loop times.
// choose_shapes is pure: it sees only estimates known before the round, so
// the choice never depends on the round's own outcome (which keeps greedy
// output identical to AR and sampled output exact in distribution).
#pragma once

#include <functional>
#include <mutex>
#include <span>
#include <vector>

#include "spec/acceptance_estimator.h"

namespace specdec::spec {

// Seconds of a forward of n rows (n >= 1) for one model, as measured here.
class RowCostCurve {
public:
    // rows 1..max_rows are tracked; beyond, t grows linearly from the last two.
    explicit RowCostCurve(int max_rows = 64);
    // Calibration: a direct measurement replaces what was there.
    void set(int n, double seconds);
    // A timed round: blends into t(n) (weight `w` for the new value).
    void observe(int n, double seconds, double w = 0.2);
    bool measured(int n) const;
    // t(n), interpolated linearly between measured row counts (and
    // extrapolated past the last); 0 when nothing is measured.
    double seconds(int n) const;
    double ratio(int n) const;  // t(n) / t(1)
    int max_rows() const { return (int)t_.size(); }
    bool empty() const;

private:
    mutable std::mutex mu_;  // shared by every proposer of a process (server threads)
    std::vector<double> t_;  // [n - 1]; 0: not measured
};

// Times a forward of `rows` rows (a verification-shaped batch that is never
// committed), in seconds.
using ForwardTimer = std::function<double(int rows)>;
// Fills t(n) for the given row counts: one warm-up forward, then the best of
// `reps` timings per count.
void calibrate(RowCostCurve& curve, const ForwardTimer& timer, std::span<const int> rows, int reps = 1);

// One sequence's candidates for the next round.
struct ShapeCandidates {
    const AcceptanceEstimator* draft = nullptr;   // null: no draft model
    int draft_max = 0;                            // longest draft chain allowed
    // Sibling leaves beside a draft chain (ProposeInput::siblings): q_i is the
    // chance that the draft's second choice at depth i is right when its
    // first was not. Null or sibling_max 0: chains only.
    const AcceptanceEstimator* sibling = nullptr;
    int sibling_max = 0;
    int draft_catchup = 1;                        // rows the draft's first forward reads (>= 1: the root)
    const AcceptanceEstimator* lookup = nullptr;  // null or lookup_len 0: no lookup chain this round
    int lookup_len = 0;                           // tokens the lookup found
    int max_drafts = 0;                           // room: drafts at most (context, tokens left)
};

enum class ShapeKind { None, Lookup, Draft };
struct Shape {
    ShapeKind kind = ShapeKind::None;
    int k = 0;         // chain drafts (0 for None)
    int siblings = 0;  // Draft: second choices beside the chain at depths 1..siblings (leaves)
    int rows() const { return 1 + k + siblings; }
    bool operator==(const Shape&) const = default;
};
inline const char* shape_kind_name(ShapeKind k) {
    return k == ShapeKind::Lookup ? "lookup" : k == ShapeKind::Draft ? "draft" : "none";
}

struct RoundCosts {
    const RowCostCurve* target = nullptr;
    const RowCostCurve* draft = nullptr;  // may be null when no candidate drafts
    double draft_scale = 1.0;             // online correction of the draft curve
};

struct ShapePlan {
    std::vector<Shape> shapes;  // one per sequence
    double expected_tokens = 0;
    double predicted_s = 0;     // target forward + draft forwards
    double draft_s = 0;         // of which the draft's (with the draft scale applied)
    double ar_s = 0;            // plain AR round for the same sequences
};

// The shapes (one per sequence) with the most expected tokens per second for
// the whole batch: one target forward over every sequence's rows, the draft's
// forwards batched by depth. Exact search for one sequence; for several, a
// few passes of per-sequence best response (coordinate ascent) from all-None.
// A plan with drafts must beat plain AR's predicted rate by `min_gain` (0.02:
// 2 %): where the predicted gain is within the model's own error, the sure
// AR step is taken.
ShapePlan choose_shapes(std::span<const ShapeCandidates> seqs, const RoundCosts& costs, double min_gain = 0.0);
// Expected tokens and seconds of a given plan (what choose_shapes maximises).
void evaluate_plan(std::span<const ShapeCandidates> seqs, const RoundCosts& costs, ShapePlan& plan);

}  // namespace specdec::spec
