// Fan-out policy of the speculation cache: how many bonus guesses F_k to cache
// at every accept point k = 0..K, from the acceptance rate a and the measured
// miss law 1 - p_hit(F) = F^(-r), both estimated online; and the batch size b*
// past which a near-free backup beats just-in-time drafting.
#pragma once

#include <vector>

#include "sched/ssd_config.h"
#include "spec/acceptance_estimator.h"

namespace specdec::sched {

// F_0 a^(k/(1+r)) for k < K and F_0 a^(K/(1+r)) (1-a)^(-1/(1+r)) for k = K,
// scaled to sum to `budget` and rounded (largest remainders); every F_k >= 1
// when budget >= K + 1. Returns K + 1 counts.
std::vector<int> geometric_fanout(int K, int budget, double a, double r);
// The budget spread evenly (earlier accept points get the remainder).
std::vector<int> uniform_fanout(int K, int budget);

// b* = ln(1 - (1-p)(E-1) / ((pE + 1 - p) T_SD)) / ln p: the batch size from
// which the near-free backup wins (p: hit rate, E: mean tokens per round,
// T_SD: JIT time per round / verify time): JIT while b < b*. Falls as JIT
// gets dearer; +inf when JIT always wins.
double backup_switch_batch(double p, double E, double t_sd);

// Online estimates for the geometric policy.
class FanoutEstimator {
public:
    // A verified speculation of `len` drafts of which `accepted` were accepted.
    void observe_round(int accepted, int len);
    // Rank (0 = the draft's best guess) of the target's bonus among the draft's
    // ranked guesses at the realised accept point; < 0: ranked past kMaxRank.
    void observe_bonus_rank(int rank);
    double acceptance() const;   // per-draft acceptance a
    double miss_exponent() const;  // r of 1 - p_hit(F) = F^(-r)
    double p_hit(int F) const;   // empirical
    std::vector<int> fanout(const SsdConfig& cfg) const;

    static constexpr int kMaxRank = 64;

private:
    // Prior a = 0.7 over 10 pseudo-rounds, nothing forgotten (pooled over depths).
    spec::AcceptanceEstimator acc_{spec::AcceptanceOptions{0.7, 10.0, 1.0, 16}};
    std::vector<int> ranks_ = std::vector<int>(kMaxRank + 1, 0);  // [kMaxRank]: beyond
    int n_ranks_ = 0;
};

}  // namespace specdec::sched
