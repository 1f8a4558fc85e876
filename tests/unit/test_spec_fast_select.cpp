// Partial selection helpers used by the draft proposer's deterministic path:
// the same ids and order as a full sort with the argmax tie rule, and a
// log-sum-exp close to the exact one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "sample/fast_select.h"
#include "sample/sampler.h"

using namespace specdec;

namespace {
std::vector<int32_t> sorted_top(const std::vector<float>& x, const std::vector<int32_t>& ids, int k) {
    std::vector<int32_t> v;
    for (int32_t i : ids)
        if (x[i] > -std::numeric_limits<float>::infinity()) v.push_back(i);  // NaN fails too
    std::stable_sort(v.begin(), v.end(), [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
    if ((int)v.size() > k) v.resize(k);
    return v;
}
}  // namespace

TEST(SpecFastSelect, TopKMatchesFullSortWithTies) {
    std::mt19937 g(7);
    for (int trial = 0; trial < 200; ++trial) {
        const int n = 1 + (int)(g() % 3000);
        std::vector<float> x(n);
        for (float& v : x) v = (float)(int)(g() % 40) * 0.25f - 5.0f;  // many ties
        for (int j = 0; j < n / 10; ++j) x[g() % n] = -std::numeric_limits<float>::infinity();
        if (trial % 7 == 0) x[g() % n] = std::numeric_limits<float>::quiet_NaN();
        std::vector<int32_t> all(n);
        std::iota(all.begin(), all.end(), 0);
        for (int k : {1, 2, 4, 8, 33}) {
            std::vector<int32_t> out(k);
            out.resize(sample::top_k_select(x.data(), n, k, out.data()));
            EXPECT_EQ(out, sorted_top(x, all, k)) << "trial " << trial << " k " << k;
            if (k == 1 && !out.empty() && trial % 7 != 0) {
                EXPECT_EQ(out[0], sample::argmax(x.data(), n));
            }
            // A shuffled id subset.
            std::vector<int32_t> sub;
            for (int32_t i = 0; i < n; ++i)
                if (g() % 3) sub.push_back(i);
            std::shuffle(sub.begin(), sub.end(), g);
            std::vector<int32_t> o2(k);
            o2.resize(sample::top_k_select_ids(x.data(), sub, k, o2.data()));
            EXPECT_EQ(o2, sorted_top(x, sub, k)) << "subset trial " << trial << " k " << k;
        }
    }
}

TEST(SpecFastSelect, AllMaskedSelectsNothing) {
    std::vector<float> x(100, -std::numeric_limits<float>::infinity());
    int32_t out[4];
    EXPECT_EQ(sample::top_k_select(x.data(), 100, 4, out), 0);
}

TEST(SpecFastSelect, LogSumExpCloseToExact) {
    std::mt19937 g(3);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    std::vector<float> x(151936);
    for (float& v : x) v = nd(g);
    const float mx = *std::max_element(x.begin(), x.end());
    for (float t : {1.0f, 0.7f, 1.5f}) {
        double exact = 0;
        for (float v : x) exact += std::exp(((double)v - mx) / t);
        EXPECT_NEAR(sample::log_sum_exp(x.data(), (int)x.size(), mx, 1.0f / t), std::log(exact), 1e-3) << t;
        // Against the sampler's own distribution: log q of the argmax.
        sample::SamplingParams p;
        p.temperature = t;
        std::vector<float> q;
        sample::distribution(x.data(), (int)x.size(), {}, p, q);
        const int32_t a = sample::argmax(x.data(), (int)x.size());
        EXPECT_NEAR(-sample::log_sum_exp(x.data(), (int)x.size(), mx, 1.0f / t), std::log(q[a]), 1e-3) << t;
    }
}
