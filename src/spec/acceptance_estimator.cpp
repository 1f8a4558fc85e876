#include "spec/acceptance_estimator.h"

#include <algorithm>

#include "core/error.h"

namespace specdec::spec {

AcceptanceEstimator::AcceptanceEstimator(const AcceptanceOptions& opts) : opts_(opts) {
    SPECDEC_CHECK(opts.prior_accept > 0 && opts.prior_accept < 1, "acceptance prior must be in (0, 1)");
    SPECDEC_CHECK(opts.prior_weight > 0, "acceptance prior weight must be > 0");
    SPECDEC_CHECK(opts.decay > 0 && opts.decay <= 1, "acceptance decay must be in (0, 1]");
    SPECDEC_CHECK(opts.max_depth >= 1, "acceptance max depth must be >= 1");
    const Counts prior{opts.prior_accept * opts.prior_weight, (1 - opts.prior_accept) * opts.prior_weight};
    depth_.assign(opts.max_depth, prior);
    pooled_acc_ = prior.acc;
    pooled_rej_ = prior.rej;
}

AcceptanceEstimator::Counts& AcceptanceEstimator::at(int depth) {
    return depth_[std::min(depth, opts_.max_depth) - 1];
}
const AcceptanceEstimator::Counts& AcceptanceEstimator::at(int depth) const {
    return depth_[std::min(depth, opts_.max_depth) - 1];
}

void AcceptanceEstimator::observe(int accepted, int len) {
    SPECDEC_CHECK(len >= 0 && accepted >= 0 && accepted <= len, "acceptance: ", accepted, " of ", len,
                  " drafts accepted");
    if (len == 0) return;
    ++n_obs_;
    const int tested = std::min(accepted + 1, len);
    for (int d = 1; d <= tested; ++d) {
        Counts& c = at(d);
        c.acc *= opts_.decay;
        c.rej *= opts_.decay;
        if (d <= accepted) c.acc += 1;
        else c.rej += 1;
    }
    pooled_acc_ += accepted;
    if (accepted < len) pooled_rej_ += 1;
}

void AcceptanceEstimator::observe_one(int depth, bool accepted) {
    SPECDEC_CHECK(depth >= 1, "acceptance depth must be >= 1");
    ++n_obs_;
    Counts& c = at(depth);
    c.acc = c.acc * opts_.decay + (accepted ? 1 : 0);
    c.rej = c.rej * opts_.decay + (accepted ? 0 : 1);
    (accepted ? pooled_acc_ : pooled_rej_) += 1;
}

void AcceptanceEstimator::revisit(double accept, double weight) {
    SPECDEC_CHECK(accept > 0 && accept < 1 && weight > 0, "acceptance revisit: need 0 < accept < 1, weight > 0");
    for (Counts& c : depth_) c = {accept * weight, (1 - accept) * weight};
}

double AcceptanceEstimator::p(int depth) const {
    SPECDEC_CHECK(depth >= 1, "acceptance depth must be >= 1");
    const Counts& c = at(depth);
    return c.acc / (c.acc + c.rej);
}

double AcceptanceEstimator::expected_tokens(int k) const {
    double e = 1, reach = 1;
    for (int d = 1; d <= k; ++d) {
        reach *= p(d);
        e += reach;
    }
    return e;
}

}  // namespace specdec::spec
