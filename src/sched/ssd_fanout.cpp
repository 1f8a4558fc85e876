#include "sched/ssd_fanout.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace specdec::sched {

namespace {
// Rounds non-negative reals summing to `budget` to integers with the same sum.
std::vector<int> round_to_budget(const std::vector<double>& x, int budget) {
    std::vector<int> f(x.size());
    std::vector<std::pair<double, int>> frac;
    int used = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        f[i] = (int)std::floor(x[i]);
        used += f[i];
        frac.push_back({x[i] - f[i], (int)i});
    }
    std::stable_sort(frac.begin(), frac.end(), [](auto& a, auto& b) { return a.first > b.first; });
    for (size_t j = 0; used < budget && j < frac.size(); ++j, ++used) ++f[frac[j].second];
    if (budget >= (int)x.size()) {
        // Every accept point gets at least one guess, taken from the largest.
        for (size_t i = 0; i < f.size(); ++i) {
            while (f[i] < 1) {
                auto big = std::max_element(f.begin(), f.end());
                --*big;
                ++f[i];
            }
        }
    }
    return f;
}
}  // namespace

std::vector<int> geometric_fanout(int K, int budget, double a, double r) {
    if (budget <= 0) return std::vector<int>(K + 1, 0);
    a = std::clamp(a, 0.02, 0.98);
    r = std::clamp(r, 0.05, 10.0);
    std::vector<double> w(K + 1);
    for (int k = 0; k < K; ++k) w[k] = std::pow(a, k / (1 + r));
    w[K] = std::pow(a, K / (1 + r)) * std::pow(1 - a, -1 / (1 + r));
    const double s = std::accumulate(w.begin(), w.end(), 0.0);
    for (double& v : w) v *= budget / s;
    return round_to_budget(w, budget);
}

std::vector<int> uniform_fanout(int K, int budget) {
    std::vector<int> f(K + 1, std::max(0, budget) / (K + 1));
    for (int k = 0; k < std::max(0, budget) % (K + 1); ++k) ++f[k];
    return f;
}

double backup_switch_batch(double p, double E, double t_sd) {
    if (p >= 1 || !(t_sd > 0)) return INFINITY;  // never misses, or a free JIT
    if (!(p > 0)) return 0.0;                     // always misses: a JIT stall every round
    const double arg = 1 - (1 - p) * (E - 1) / ((p * E + 1 - p) * t_sd);
    if (!(arg > 0)) return INFINITY;  // JIT so cheap it always wins
    if (arg >= 1) return 0.0;         // JIT adds nothing (E <= 1): the backup always wins
    return std::log(arg) / std::log(p);
}

void FanoutEstimator::observe_round(int accepted, int len) { acc_.observe(accepted, len); }

void FanoutEstimator::observe_bonus_rank(int rank) {
    ++ranks_[rank < 0 || rank >= kMaxRank ? kMaxRank : rank];
    ++n_ranks_;
}

double FanoutEstimator::acceptance() const { return acc_.pooled(); }

double FanoutEstimator::p_hit(int F) const {
    if (n_ranks_ == 0) return 0;
    int c = 0;
    for (int i = 0; i < std::min(F, kMaxRank); ++i) c += ranks_[i];
    return (double)c / n_ranks_;
}

double FanoutEstimator::miss_exponent() const {
    if (n_ranks_ < 16) return 1.0;
    // Least squares through the origin of ln(1 - p_hit(F)) = -r ln F, F = 2..16.
    double num = 0, den = 0;
    for (int F = 2; F <= 16; ++F) {
        const double miss = 1 - p_hit(F);
        if (miss <= 0) break;
        const double lf = std::log((double)F);
        num += -lf * std::log(miss);
        den += lf * lf;
    }
    return den > 0 ? std::clamp(num / den, 0.05, 10.0) : 1.0;
}

std::vector<int> FanoutEstimator::fanout(const SsdConfig& cfg) const {
    if (cfg.fanout == FanoutKind::Uniform) return uniform_fanout(cfg.k, cfg.fanout_budget);
    return geometric_fanout(cfg.k, cfg.fanout_budget, acceptance(), miss_exponent());
}

}  // namespace specdec::sched
