#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/error.h"
#include "sample/sampler.h"

using namespace specdec;
using sample::SamplingParams;

namespace {
std::vector<float> logits_of(std::initializer_list<float> v) { return std::vector<float>(v); }
double sum(const std::vector<float>& p) { return std::accumulate(p.begin(), p.end(), 0.0); }
}  // namespace

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
    auto l = logits_of({1.0f, 3.0f, 3.0f, -2.0f});
    EXPECT_EQ(sample::argmax(l.data(), 4), 1);
    std::vector<float> p;
    SamplingParams sp;
    sample::distribution(l.data(), 4, {}, sp, p);
    EXPECT_EQ(p, (std::vector<float>{0, 1, 0, 0}));
}

TEST(Sampler, TemperatureSoftmax) {
    auto l = logits_of({0.0f, std::log(3.0f)});
    SamplingParams sp;
    sp.temperature = 1.0f;
    std::vector<float> p;
    sample::distribution(l.data(), 2, {}, sp, p);
    EXPECT_NEAR(p[0], 0.25, 1e-6);
    EXPECT_NEAR(p[1], 0.75, 1e-6);
    sp.temperature = 0.5f;  // squares the odds: 1:9
    sample::distribution(l.data(), 2, {}, sp, p);
    EXPECT_NEAR(p[1], 0.9, 1e-6);
}

TEST(Sampler, TopKTopPMinP) {
    // probabilities at T=1: proportional to 8,4,2,1,1 over 16
    auto l = logits_of({std::log(8.f), std::log(4.f), std::log(2.f), 0.f, 0.f});
    std::vector<float> p;
    SamplingParams sp;
    sp.temperature = 1.0f;
    sp.top_k = 2;
    sample::distribution(l.data(), 5, {}, sp, p);
    EXPECT_NEAR(p[0], 8.0 / 12, 1e-6);
    EXPECT_EQ(p[2], 0.0f);
    sp.top_k = 0;
    sp.top_p = 0.7f;  // 0.5 + 0.25 reaches 0.75 >= 0.7: two kept
    sample::distribution(l.data(), 5, {}, sp, p);
    EXPECT_NEAR(p[1], 4.0 / 12, 1e-6);
    EXPECT_EQ(p[2], 0.0f);
    sp.top_p = 1.0f;
    sp.min_p = 0.2f;  // keep p >= 0.2 * 0.5 = 0.1: 8,4,2 (2/16 = 0.125)
    sample::distribution(l.data(), 5, {}, sp, p);
    EXPECT_NEAR(p[2], 2.0 / 14, 1e-6);
    EXPECT_EQ(p[3], 0.0f);
    EXPECT_NEAR(sum(p), 1.0, 1e-6);
}

TEST(Sampler, RepetitionPenaltyFollowsLlamaCpp) {
    auto l = logits_of({2.0f, -2.0f, 1.0f});
    SamplingParams sp;
    sp.repeat_penalty = 2.0f;
    const std::vector<int32_t> hist{0, 1, 0};
    sample::apply_repetition_penalty(l.data(), 3, hist, sp);
    EXPECT_FLOAT_EQ(l[0], 1.0f);   // positive: divided, once despite two occurrences
    EXPECT_FLOAT_EQ(l[1], -4.0f);  // negative: multiplied
    EXPECT_FLOAT_EQ(l[2], 1.0f);   // not in history
}

TEST(Sampler, SeededSamplingIsReproducibleAndMatchesDistribution) {
    auto l = logits_of({0.0f, 1.0f, 2.0f, 0.5f});
    SamplingParams sp;
    sp.temperature = 0.8f;
    std::vector<float> p, scratch;
    sample::distribution(l.data(), 4, {}, sp, p);
    Rng a(42), b(42);
    std::vector<int> counts(4, 0);
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
        const int32_t x = sample::sample_token(l.data(), 4, {}, sp, a, scratch);
        ASSERT_EQ(x, sample::sample_token(l.data(), 4, {}, sp, b, scratch));
        counts[x]++;
    }
    // Chi-square with 3 degrees of freedom; 16.27 is the 0.1% critical value, so
    // this fails by chance once in a thousand seeds (the seed is fixed).
    double chi2 = 0;
    for (int i = 0; i < 4; ++i) {
        const double e = p[i] * n;
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    EXPECT_LT(chi2, 16.27);
}

TEST(Sampler, InvalidParametersAreErrors) {
    SamplingParams sp;
    sp.temperature = -1;
    EXPECT_THROW(sample::validate(sp), Error);
    sp = {};
    sp.top_p = 0;
    EXPECT_THROW(sample::validate(sp), Error);
    sp = {};
    sp.min_p = 2;
    EXPECT_THROW(sample::validate(sp), Error);
    sp = {};
    sp.repeat_penalty = 0;
    EXPECT_THROW(sample::validate(sp), Error);
}
