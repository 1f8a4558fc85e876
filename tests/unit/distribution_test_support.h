// What the lossless-sampling tests share: the exact next-token distribution of
// a tiny model, the exact joint distribution of two consecutive generated
// tokens (by enumeration), and a Pearson chi-square test of sampled counts
// against it at a stated false-alarm rate.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/forward_batch.h"
#include "model/transformer.h"
#include "sample/sampler.h"

namespace specdec::test {

// The sampling distribution (after every logits processor) of the token that
// follows `ctx`, fed from scratch into a fresh cache.
inline std::vector<float> next_distribution(model::Transformer& m, ThreadPool& pool, const std::vector<int32_t>& ctx,
                                            int n_vocab, const sample::SamplingParams& params) {
    kv::KvCache cache(m.kv_options(32, 1));
    model::ForwardBatch b;
    model::ForwardResult r;
    b.add_chain(ctx, 0, 0, false);
    m.forward(b, cache, pool, r);
    std::vector<float> p;
    sample::distribution(r.row_logits(0), n_vocab, ctx, params, p);
    return p;
}

// Exact P(generated token `first`, generated token `first` + 1) after `prompt`
// (0-based indices), flattened a * n_vocab + b, by enumerating every path.
inline std::vector<double> exact_pair_joint(model::Transformer& m, ThreadPool& pool, const std::vector<int32_t>& prompt,
                                            int first, int n_vocab, const sample::SamplingParams& params) {
    std::vector<double> joint((size_t)n_vocab * n_vocab, 0.0);
    std::vector<int32_t> ctx = prompt;
    auto walk = [&](auto&& self, int depth, double prob, int prev) -> void {
        const auto p = next_distribution(m, pool, ctx, n_vocab, params);
        for (int a = 0; a < n_vocab; ++a) {
            if (p[a] == 0) continue;
            if (depth == first + 1) {
                joint[(size_t)prev * n_vocab + a] += prob * p[a];
                continue;
            }
            ctx.push_back(a);
            self(self, depth + 1, prob * p[a], depth == first ? a : prev);
            ctx.pop_back();
        }
    };
    walk(walk, 0, 1.0, 0);
    return joint;
}

// The number of draws a chi-square test takes: `full`, or full / D (at least
// 1000) under SPECDEC_TEST_DRAWS_DIVISOR=D. scripts/test.sh sets D for the
// sanitizer step, where the same draws cost ~10x: the release step keeps the
// full power. The false-alarm rate stays 1e-4 (cells expected below 5 are
// pooled), only the power to see a small bias drops.
inline int sampling_draws(int full) {
    const char* env = std::getenv("SPECDEC_TEST_DRAWS_DIVISOR");
    const int d = env ? std::atoi(env) : 1;
    return d > 1 ? std::max(1000, full / d) : full;
}

// Pearson chi-square of `counts` (n draws) against `probs`; cells expected
// below 5 are pooled into one. Returns {statistic, critical value at
// false-alarm rate 1e-4} (Wilson-Hilferty quantile, z(1 - 1e-4) = 3.719).
inline std::pair<double, double> chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int n) {
    double stat = 0, pooled_e = 0;
    int pooled_o = 0, df = -1;
    for (size_t i = 0; i < probs.size(); ++i) {
        const double e = probs[i] * n;
        if (e < 5) {
            pooled_e += e;
            pooled_o += counts[i];
            continue;
        }
        stat += (counts[i] - e) * (counts[i] - e) / e;
        ++df;
    }
    if (pooled_e > 0) {
        stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / std::max(pooled_e, 1e-9);
        ++df;
    }
    const double z = 3.719, a = 2.0 / (9.0 * df);
    return {stat, df * std::pow(1 - a + z * std::sqrt(a), 3)};
}

}  // namespace specdec::test
