// SSD policy pieces: the geometric / uniform fan-out, the online estimates it
// uses, the backup switch point b*, Saguaro re-weighting and top-n selection.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "sched/ssd_draft_worker.h"
#include "sched/ssd_fanout.h"

using namespace specdec;
using namespace specdec::sched;

TEST(SsdFanout, GeometricSumsToBudgetDecaysAndWeightsTheFullAccept) {
    for (int K : {1, 3, 5, 8})
        for (int B : {K + 1, 2 * K + 3, 32})
            for (double a : {0.3, 0.6, 0.9})
                for (double r : {0.5, 1.0, 2.0}) {
                    const auto f = geometric_fanout(K, B, a, r);
                    ASSERT_EQ((int)f.size(), K + 1);
                    EXPECT_EQ(std::accumulate(f.begin(), f.end(), 0), B);
                    for (int v : f) EXPECT_GE(v, 1);
                    for (int k = 1; k < K; ++k) EXPECT_LE(f[k], f[k - 1] + 1) << "K " << K << " B " << B;
                }
    // Real-valued check of the formula: F_k / F_0 = a^(k/(1+r)).
    const auto f = geometric_fanout(3, 1000, 0.5, 1.0);
    EXPECT_NEAR((double)f[1] / f[0], std::pow(0.5, 0.5), 0.01);
    EXPECT_NEAR((double)f[3] / f[0], std::pow(0.5, 1.5) * std::pow(0.5, -0.5), 0.01);
    EXPECT_EQ(geometric_fanout(4, 0, 0.7, 1.0), std::vector<int>(5, 0));
}

TEST(SsdFanout, UniformSpreadsTheBudget) {
    EXPECT_EQ(uniform_fanout(3, 8), (std::vector<int>{2, 2, 2, 2}));
    EXPECT_EQ(uniform_fanout(3, 10), (std::vector<int>{3, 3, 2, 2}));
    EXPECT_EQ(uniform_fanout(2, 0), (std::vector<int>{0, 0, 0}));
}

TEST(SsdFanout, EstimatorRecoversAcceptanceAndMissExponent) {
    FanoutEstimator e;
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> u(0, 1);
    // Per-draft acceptance 0.8, chains of 4.
    for (int i = 0; i < 5000; ++i) {
        int k = 0;
        while (k < 4 && u(rng) < 0.8) ++k;
        e.observe_round(k, 4);
    }
    EXPECT_NEAR(e.acceptance(), 0.8, 0.02);
    // Ranks with P(rank >= F) = F^(-r), r = 1.5: rank = floor(U^(-1/r)).
    for (int i = 0; i < 20000; ++i) {
        const double x = std::floor(std::pow(1 - u(rng), -1 / 1.5));
        e.observe_bonus_rank(x >= FanoutEstimator::kMaxRank ? -1 : (int)x);
    }
    EXPECT_NEAR(e.miss_exponent(), 1.5, 0.1);
    EXPECT_NEAR(1 - e.p_hit(4), std::pow(4.0, -1.5), 0.02);
}

TEST(SsdFanout, BackupSwitchPoint) {
    // Perfect hits: JIT never runs, any batch size keeps it.
    EXPECT_TRUE(std::isinf(backup_switch_batch(1.0, 3, 0.5)));
    // Dearer JIT (larger T_SD) -> switch to the near-free backup earlier.
    const double dear = backup_switch_batch(0.8, 3.0, 5.0), cheap = backup_switch_batch(0.8, 3.0, 0.6);
    EXPECT_GT(cheap, dear);
    EXPECT_GT(dear, 0.0);
    EXPECT_TRUE(std::isinf(backup_switch_batch(0.8, 3.0, 0.01)));  // nearly free JIT
    EXPECT_EQ(backup_switch_batch(0.8, 1.0, 1.0), 0.0);              // E = 1: JIT gains nothing
    // The formula itself: p = 0.8, E = 3, T = 1.
    const double arg = 1 - 0.2 * 2 / ((0.8 * 3 + 0.2) * 1.0);
    EXPECT_NEAR(backup_switch_batch(0.8, 3.0, 1.0), std::log(arg) / std::log(0.8), 1e-12);
}

TEST(SsdSaguaro, ReweightScalesTheTopTokensAndRenormalises) {
    std::vector<float> q{0.4f, 0.3f, 0.2f, 0.1f};
    saguaro_reweight(q, 2, 0.5f);
    // top-2 {0, 1} scaled by 0.5: 0.2, 0.15, 0.2, 0.1 over 0.65.
    EXPECT_NEAR(q[0], 0.2 / 0.65, 1e-6);
    EXPECT_NEAR(q[1], 0.15 / 0.65, 1e-6);
    EXPECT_NEAR(q[3], 0.1 / 0.65, 1e-6);
    EXPECT_NEAR(std::accumulate(q.begin(), q.end(), 0.0), 1.0, 1e-6);
    std::vector<float> point{0.0f, 1.0f, 0.0f};
    saguaro_reweight(point, 1, 0.0f);  // nothing would remain: unchanged
    EXPECT_EQ(point, (std::vector<float>{0.0f, 1.0f, 0.0f}));
    std::vector<float> same{0.5f, 0.5f};
    saguaro_reweight(same, 1, 1.0f);
    EXPECT_EQ(same, (std::vector<float>{0.5f, 0.5f}));
}

TEST(SsdSaguaro, TopNOrdersByValueThenIndex) {
    const std::vector<float> s{1, 5, 3, 5, -2, 4};
    std::vector<int> out;
    top_n(s.data(), (int)s.size(), 3, out);
    EXPECT_EQ(out, (std::vector<int>{1, 3, 5}));
    top_n(s.data(), (int)s.size(), 10, out);
    EXPECT_EQ(out, (std::vector<int>{1, 3, 5, 2, 0, 4}));
}
