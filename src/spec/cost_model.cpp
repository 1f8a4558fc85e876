#include "spec/cost_model.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace specdec::spec {

RowCostCurve::RowCostCurve(int max_rows) {
    SPECDEC_CHECK(max_rows >= 1, "row cost curve: max rows must be >= 1");
    t_.assign(max_rows, 0.0);
}

void RowCostCurve::set(int n, double seconds) {
    if (n < 1 || !(seconds > 0)) return;
    std::lock_guard lk(mu_);
    if (n <= (int)t_.size()) t_[n - 1] = seconds;
}

void RowCostCurve::observe(int n, double seconds, double w) {
    if (n < 1 || !(seconds > 0)) return;
    std::lock_guard lk(mu_);
    if (n > (int)t_.size()) return;
    double& t = t_[n - 1];
    t = t > 0 ? (1 - w) * t + w * seconds : seconds;
}

bool RowCostCurve::measured(int n) const {
    std::lock_guard lk(mu_);
    return n >= 1 && n <= (int)t_.size() && t_[n - 1] > 0;
}

bool RowCostCurve::empty() const {
    std::lock_guard lk(mu_);
    return std::none_of(t_.begin(), t_.end(), [](double t) { return t > 0; });
}

double RowCostCurve::seconds(int n) const {
    std::lock_guard lk(mu_);
    n = std::max(n, 1);
    if (n <= (int)t_.size() && t_[n - 1] > 0) return t_[n - 1];
    // Nearest measured counts below and above n.
    int lo = 0, hi = 0;
    for (int i = std::min(n, (int)t_.size()); i >= 1; --i)
        if (t_[i - 1] > 0) {
            lo = i;
            break;
        }
    for (int i = n + 1; i <= (int)t_.size(); ++i)
        if (t_[i - 1] > 0) {
            hi = i;
            break;
        }
    if (lo && hi) return t_[lo - 1] + (t_[hi - 1] - t_[lo - 1]) * (n - lo) / (hi - lo);
    if (!lo && !hi) return 0.0;
    // One side only: extend from the two nearest measured counts on that side
    // (flat when there is only one: never below what was measured).
    const int a = lo ? lo : hi;
    int b = 0;
    if (lo) {
        for (int i = lo - 1; i >= 1; --i)
            if (t_[i - 1] > 0) {
                b = i;
                break;
            }
    } else {
        for (int i = hi + 1; i <= (int)t_.size(); ++i)
            if (t_[i - 1] > 0) {
                b = i;
                break;
            }
    }
    if (!b) return t_[a - 1];
    const double slope = std::max(0.0, (t_[a - 1] - t_[b - 1]) / (a - b));
    return std::max(t_[a - 1] + slope * (n - a), 1e-9);
}

double RowCostCurve::ratio(int n) const {
    const double t1 = seconds(1);
    return t1 > 0 ? seconds(n) / t1 : (double)n;
}

void calibrate(RowCostCurve& curve, const ForwardTimer& timer, std::span<const int> rows, int reps) {
    SPECDEC_CHECK(timer, "calibrate: no forward timer");
    SPECDEC_CHECK(reps >= 1, "calibrate: reps must be >= 1");
    timer(1);  // warm-up: caches, thread pool, page faults
    // Best of `reps`: a shared machine only ever makes a forward slower.
    for (int n : rows) {
        double best = 0;
        for (int r = 0; r < reps; ++r) {
            const double s = timer(n);
            if (s > 0 && (best == 0 || s < best)) best = s;
        }
        curve.set(n, best);
    }
    // More rows never cost less: a timing that came out below a smaller
    // count's is noise, lifted to it (the rounds then correct both).
    double floor = 0;
    for (int n = 1; n <= curve.max_rows(); ++n)
        if (curve.measured(n)) {
            floor = std::max(floor, curve.seconds(n));
            curve.set(n, floor);
        }
}

namespace {

double seq_expected(const ShapeCandidates& c, const Shape& s) {
    switch (s.kind) {
        case ShapeKind::None: return 1.0;
        case ShapeKind::Lookup: return c.lookup->expected_tokens(s.k);
        case ShapeKind::Draft: {
            double e = c.draft->expected_tokens(s.k);
            double reach = 1.0;  // P_{i-1}: every chain draft above depth i accepted
            for (int i = 1; i <= s.siblings; ++i) {
                const double p = c.draft->p(i);
                e += reach * (1 - p) * c.sibling->p(i);
                reach *= p;
            }
            return e;
        }
    }
    return 1.0;
}

// The options one sequence has this round, None first.
void options_of(const ShapeCandidates& c, std::vector<Shape>& out) {
    out.clear();
    out.push_back({ShapeKind::None, 0});
    if (c.lookup && c.lookup_len > 0)
        for (int k = 1; k <= std::min(c.lookup_len, c.max_drafts); ++k) out.push_back({ShapeKind::Lookup, k});
    if (c.draft)
        for (int k = 1; k <= std::min(c.draft_max, c.max_drafts); ++k) {
            out.push_back({ShapeKind::Draft, k});
            if (c.sibling)
                for (int s = 1; s <= std::min(c.sibling_max, std::min(k, c.max_drafts - k)); ++s)
                    out.push_back({ShapeKind::Draft, k, s});
        }
}

}  // namespace

void evaluate_plan(std::span<const ShapeCandidates> seqs, const RoundCosts& costs, ShapePlan& plan) {
    SPECDEC_CHECK(costs.target, "evaluate_plan: no target cost curve");
    SPECDEC_CHECK(plan.shapes.size() == seqs.size(), "evaluate_plan: one shape per sequence");
    double e = 0;
    int rows = 0, catchup = 0, deepest = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
        const Shape& s = plan.shapes[i];
        e += seq_expected(seqs[i], s);
        rows += s.rows();
        if (s.kind == ShapeKind::Draft) {
            catchup += std::max(1, seqs[i].draft_catchup);
            deepest = std::max(deepest, s.k);
        }
    }
    double draft_s = 0;
    if (deepest > 0) {
        SPECDEC_CHECK(costs.draft, "evaluate_plan: a draft shape without a draft cost curve");
        // Depth 1 reads every drafting sequence's catch-up rows; depth d > 1
        // one row per sequence whose chain is at least d long.
        draft_s = costs.draft->seconds(catchup);
        for (int d = 2; d <= deepest; ++d) {
            int m = 0;
            for (size_t i = 0; i < seqs.size(); ++i)
                if (plan.shapes[i].kind == ShapeKind::Draft && plan.shapes[i].k >= d) ++m;
            draft_s += costs.draft->seconds(m);
        }
        draft_s *= costs.draft_scale;
    }
    plan.expected_tokens = e;
    plan.draft_s = draft_s;
    plan.predicted_s = costs.target->seconds(rows) + draft_s;
    plan.ar_s = costs.target->seconds((int)seqs.size());
}

ShapePlan choose_shapes(std::span<const ShapeCandidates> seqs, const RoundCosts& costs, double min_gain) {
    ShapePlan plan;
    plan.shapes.assign(seqs.size(), Shape{});
    evaluate_plan(seqs, costs, plan);
    if (!(plan.predicted_s > 0)) return plan;  // nothing measured yet: plain AR
    // The bar the first draft must clear; later changes must beat the plan so far.
    double best_rate = plan.expected_tokens / plan.predicted_s * (1 + std::max(0.0, min_gain));
    std::vector<Shape> opts;
    const int passes = seqs.size() == 1 ? 1 : 3;
    for (int pass = 0; pass < passes; ++pass) {
        bool changed = false;
        for (size_t i = 0; i < seqs.size(); ++i) {
            options_of(seqs[i], opts);
            const Shape keep = plan.shapes[i];
            Shape best = keep;
            for (const Shape& o : opts) {
                plan.shapes[i] = o;
                evaluate_plan(seqs, costs, plan);
                const double rate = plan.expected_tokens / plan.predicted_s;
                // Strictly better only: ties keep the cheaper, earlier option.
                if (rate > best_rate * (1 + 1e-9)) {
                    best_rate = rate;
                    best = o;
                }
            }
            plan.shapes[i] = best;
            if (!(best == keep)) changed = true;
        }
        if (!changed) break;
    }
    evaluate_plan(seqs, costs, plan);
    return plan;
}

}  // namespace specdec::spec
