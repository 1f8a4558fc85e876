// The MoE FFN (model/moe_ffn.h) on F32 experts built in memory: the output is
// the renormalised top-k mix of the chosen experts computed in double from the
// definition; the experts no row chose are never read (their weights are NaN
// here, which would poison any output that touched them); and a row's result
// is bit-identical alone, in a batch, or in a batch in another order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "model/moe_ffn.h"

using namespace specdec;

namespace {

constexpr int kEmbd = 32, kFf = 16, kExpert = 8, kUsed = 3;

struct Moe {
    std::vector<float> router, gate, up, down;
    model::LayerWeights L;
    model::ModelConfig c;

    explicit Moe(std::mt19937& rng) {
        std::normal_distribution<float> nd(0.0f, 1.0f);
        auto fill = [&](std::vector<float>& v, size_t n, float std) {
            v.resize(n);
            for (auto& x : v) x = nd(rng) * std;
        };
        fill(router, (size_t)kExpert * kEmbd, 1.0f);
        fill(gate, (size_t)kExpert * kFf * kEmbd, 0.3f);
        fill(up, (size_t)kExpert * kFf * kEmbd, 0.3f);
        fill(down, (size_t)kExpert * kEmbd * kFf, 0.3f);
        c.n_embd = kEmbd;
        c.n_expert = kExpert;
        c.n_expert_used = kUsed;
        c.n_ff_exp = kFf;
        L.router = matrix(router.data(), kEmbd, kExpert);
        L.gate_exps = {matrix(gate.data(), kEmbd, kFf), kExpert};
        L.up_exps = {matrix(up.data(), kEmbd, kFf), kExpert};
        L.down_exps = {matrix(down.data(), kFf, kEmbd), kExpert};
    }
    static kernels::WeightMatrix matrix(const float* data, int n_in, int n_out) {
        kernels::WeightMatrix m;
        m.type = TensorType::F32;
        m.data = data;
        m.n_in = n_in;
        m.n_out = n_out;
        m.row_bytes = sizeof(float) * n_in;
        return m;
    }
    // The experts row x chooses, most probable first, by the definition in double.
    std::vector<int> choice(const float* x, std::vector<double>& p) const {
        p.assign(kExpert, 0.0);
        for (int e = 0; e < kExpert; ++e)
            for (int d = 0; d < kEmbd; ++d) p[e] += (double)router[(size_t)e * kEmbd + d] * x[d];
        const double mx = *std::max_element(p.begin(), p.end());
        double s = 0;
        for (double& v : p) s += (v = std::exp(v - mx));
        for (double& v : p) v /= s;
        std::vector<int> idx(kExpert);
        std::iota(idx.begin(), idx.end(), 0);
        std::sort(idx.begin(), idx.end(), [&](int a, int b) { return p[a] > p[b]; });
        idx.resize(kUsed);
        return idx;
    }
    std::vector<double> reference(const float* x) const {
        std::vector<double> p, out(kEmbd, 0.0);
        const std::vector<int> ch = choice(x, p);
        double wsum = 0;
        for (int e : ch) wsum += p[e];
        for (int e : ch) {
            std::vector<double> h(kFf);
            for (int f = 0; f < kFf; ++f) {
                double g = 0, u = 0;
                for (int d = 0; d < kEmbd; ++d) {
                    g += (double)gate[((size_t)e * kFf + f) * kEmbd + d] * x[d];
                    u += (double)up[((size_t)e * kFf + f) * kEmbd + d] * x[d];
                }
                h[f] = g / (1 + std::exp(-g)) * u;
            }
            for (int d = 0; d < kEmbd; ++d) {
                double y = 0;
                for (int f = 0; f < kFf; ++f) y += (double)down[((size_t)e * kEmbd + d) * kFf + f] * h[f];
                out[d] += p[e] / wsum * y;
            }
        }
        return out;
    }
};

}  // namespace

TEST(MoeFfn, MatchesTheDefinitionAndReadsOnlyChosenExperts) {
    std::mt19937 rng(17);
    Moe m(rng);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int n = 2;  // at most 6 of the 8 experts chosen
    std::vector<float> x((size_t)n * kEmbd);
    for (auto& v : x) v = nd(rng);
    // Poison every expert none of the rows chooses.
    std::vector<bool> used(kExpert, false);
    std::vector<double> p;
    for (int i = 0; i < n; ++i)
        for (int e : m.choice(x.data() + (size_t)i * kEmbd, p)) used[e] = true;
    int poisoned = 0;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int e = 0; e < kExpert; ++e) {
        if (used[e]) continue;
        ++poisoned;
        std::fill_n(m.gate.begin() + (size_t)e * kFf * kEmbd, kFf * kEmbd, nan);
        std::fill_n(m.up.begin() + (size_t)e * kFf * kEmbd, kFf * kEmbd, nan);
        std::fill_n(m.down.begin() + (size_t)e * kEmbd * kFf, kEmbd * kFf, nan);
    }
    ASSERT_GT(poisoned, 0) << "every expert chosen: the test would not show that unused ones are skipped";

    ThreadPool pool(2);
    model::MoeFfn moe;
    std::vector<float> out((size_t)n * kEmbd);
    moe.forward(m.L, m.c, x.data(), n, out.data(), pool);
    for (int i = 0; i < n; ++i) {
        const std::vector<double> ref = m.reference(x.data() + (size_t)i * kEmbd);
        for (int d = 0; d < kEmbd; ++d)
            ASSERT_NEAR(out[(size_t)i * kEmbd + d], ref[d], 1e-4 * (1 + std::fabs(ref[d]))) << "row " << i << " d " << d;
    }
}

TEST(MoeFfn, ARowsResultDoesNotDependOnItsBatch) {
    std::mt19937 rng(23);
    Moe m(rng);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int n = 9;
    std::vector<float> x((size_t)n * kEmbd);
    for (auto& v : x) v = nd(rng);
    ThreadPool pool(2);
    model::MoeFfn moe;
    std::vector<float> batched((size_t)n * kEmbd), one(kEmbd);
    moe.forward(m.L, m.c, x.data(), n, batched.data(), pool);
    for (int i = 0; i < n; ++i) {
        moe.forward(m.L, m.c, x.data() + (size_t)i * kEmbd, 1, one.data(), pool);
        ASSERT_EQ(0, std::memcmp(one.data(), batched.data() + (size_t)i * kEmbd, sizeof(float) * kEmbd)) << "row " << i;
    }
    // The rows reversed: each row's output is unchanged, bit for bit.
    std::vector<float> xr((size_t)n * kEmbd), rev((size_t)n * kEmbd);
    for (int i = 0; i < n; ++i)
        std::memcpy(xr.data() + (size_t)i * kEmbd, x.data() + (size_t)(n - 1 - i) * kEmbd, sizeof(float) * kEmbd);
    moe.forward(m.L, m.c, xr.data(), n, rev.data(), pool);
    for (int i = 0; i < n; ++i)
        ASSERT_EQ(0, std::memcmp(rev.data() + (size_t)(n - 1 - i) * kEmbd, batched.data() + (size_t)i * kEmbd,
                                 sizeof(float) * kEmbd))
            << "row " << i;
}
