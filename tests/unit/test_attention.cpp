// Vector attention against the scalar reference (bit for bit) over head sizes,
// both of ggml's summation schedules (batch vs single-token decode), visible
// sets (ranges, extra slots out of order, duplicates, empty) and misaligned
// pointers; and the scalar reference's pieces against their definitions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "core/fp16.h"
#include "kernels/attention.h"
#include "kernels/dispatch.h"

using namespace specdec;

namespace {
uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
}  // namespace

TEST(Attention, Avx2MatchesReferenceBitForBit) {
    if (kernels::cpu_max_isa() == kernels::Isa::Scalar) GTEST_SKIP() << "CPU has no AVX2";
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int head_dim : {8, 24, 64, 128, 256}) {
        for (int misalign : {0, 1, 3}) {
            const int n_ctx = 297, n_kv_heads = 2, stride = n_kv_heads * head_dim + misalign;
            std::vector<uint16_t> k((size_t)n_ctx * stride + 8), v((size_t)n_ctx * stride + 8);
            for (auto& x : k) x = fp32_to_fp16(nd(rng));
            for (auto& x : v) x = fp32_to_fp16(nd(rng));
            std::vector<float> qbuf(head_dim + 4);
            for (auto& x : qbuf) x = nd(rng) * 2.0f;
            const float* q = qbuf.data() + misalign;
            std::vector<int> extra{290, 295, 96, 296, 95};  // slots anywhere; positions follow the range
            for (int end : {0, 1, 33, 89, 280}) {
                for (int batch_rows : {0, 1, 7}) {
                    for (float cap : {0.0f, 2.0f}) {
                    kernels::VisibleSlots vis;
                    vis.softcap = cap;
                    vis.begin = end > 10 ? 5 : 0;
                    vis.end = end;
                    vis.extra = extra.data();
                    vis.n_extra = end == 0 ? 0 : 5;
                    vis.batch_rows = batch_rows;
                    vis.extra_pos0 = batch_rows == 7 ? end + 3 : -1;
                    std::vector<float> s1(n_ctx + 8), s2(n_ctx + 8), o1(head_dim), o2(head_dim);
                    const uint16_t* kh = k.data() + misalign + head_dim;  // second kv head
                    const uint16_t* vh = v.data() + misalign + head_dim;
                    kernels::attention_head_reference(q, kh, vh, stride, head_dim, 0.125f, vis, s1.data(), o1.data());
                    kernels::attention_head_avx2(q, kh, vh, stride, head_dim, 0.125f, vis, s2.data(), o2.data());
                    for (int d = 0; d < head_dim; ++d)
                        ASSERT_EQ(bits(o1[d]), bits(o2[d]))
                            << "head_dim " << head_dim << " end " << end << " rows " << batch_rows << " cap " << cap
                            << " d " << d << ": " << o1[d] << " vs " << o2[d];
                    }
                }
            }
        }
    }
}

TEST(Attention, ReferenceIsAConvexCombinationOfValues) {
    // One visible slot: the output is that slot's values exactly (p = 1).
    const int head_dim = 64, stride = 64;
    std::vector<uint16_t> k(4 * stride), v(4 * stride);
    for (int i = 0; i < 4 * stride; ++i) {
        k[i] = fp32_to_fp16(0.01f * (float)(i % 17));
        v[i] = fp32_to_fp16(0.5f - 0.03f * (float)(i % 13));
    }
    std::vector<float> q(head_dim, 0.3f), s(8), o(head_dim);
    for (int rows : {1, 4}) {
        kernels::VisibleSlots vis;
        vis.begin = 2;
        vis.end = 3;
        vis.batch_rows = rows;
        kernels::attention_head_reference(q.data(), k.data(), v.data(), stride, head_dim, 0.125f, vis, s.data(), o.data());
        for (int d = 0; d < head_dim; ++d) EXPECT_EQ(o[d], fp16_to_fp32(v[2 * stride + d]));
        kernels::attention_head(q.data(), k.data(), v.data(), stride, head_dim, 0.125f, vis, s.data(), o.data());
        for (int d = 0; d < head_dim; ++d) EXPECT_EQ(o[d], fp16_to_fp32(v[2 * stride + d]));
    }
}

// Soft-capping (gemma2) by its definition: the reference's probabilities are
// those of the scores cap * tanh(q.k / cap) * scale, and a cap far above every
// score changes nothing measurable while a small one does.
TEST(Attention, SoftcapAppliesTanhBeforeTheScale) {
    const int head_dim = 64, n = 40;
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<uint16_t> k((size_t)n * head_dim), v((size_t)n * head_dim);
    for (auto& x : k) x = fp32_to_fp16(nd(rng));
    for (int j = 0; j < n; ++j)
        for (int d = 0; d < head_dim; ++d) v[(size_t)j * head_dim + d] = fp32_to_fp16(d == 0 ? (float)j : 0.0f);
    std::vector<float> q(head_dim), s(64), o(head_dim);
    for (auto& x : q) x = nd(rng);
    auto run = [&](float cap, float scale) {
        kernels::VisibleSlots vis;
        vis.end = n;
        vis.batch_rows = 1;
        vis.softcap = cap;
        kernels::attention_head_reference(q.data(), k.data(), v.data(), head_dim, head_dim, scale, vis, s.data(), o.data());
        return o[0];  // the expected slot index under the attention weights
    };
    // Expected index from the definition, in double.
    auto expect = [&](float cap, float scale) {
        std::vector<double> w(n);
        double mx = -1e300, sum = 0, e = 0;
        for (int j = 0; j < n; ++j) {
            double dot = 0;
            for (int d = 0; d < head_dim; ++d)
                dot += (double)fp16_to_fp32(fp32_to_fp16(q[d])) * fp16_to_fp32(k[(size_t)j * head_dim + d]);
            w[j] = (cap > 0 ? cap * std::tanh(dot / cap) : dot) * scale;
            mx = std::max(mx, w[j]);
        }
        for (int j = 0; j < n; ++j) sum += std::exp(w[j] - mx);
        for (int j = 0; j < n; ++j) e += j * std::exp(w[j] - mx) / sum;
        return e;
    };
    for (auto [cap, scale] : {std::pair{0.0f, 1.0f}, {1.5f, 1.0f}, {1.5f, 0.5f}, {4.0f, 2.0f}})
        EXPECT_NEAR(run(cap, scale), expect(cap, scale), 0.05) << "cap " << cap << " scale " << scale;
    EXPECT_NEAR(run(1e6f, 1.0f), run(0.0f, 1.0f), 1e-3);
    EXPECT_GT(std::fabs(run(1.5f, 1.0f) - run(0.0f, 1.0f)), 0.2);  // 0.31 here: well above the 0.05 tolerance
}

TEST(Attention, GgmlExpfLaneIsCloseToExpAndSaturates) {
    using kernels::attn_detail::ggml_expf_lane;
    for (float x = -100.0f; x <= 0.0f; x += 0.0137f) {
        const double ref = std::exp((double)x);
        const float got = ggml_expf_lane(x);
        if (ref > 1e-37) EXPECT_NEAR(got, ref, 4e-7 * ref) << x;  // ~2 ulp, ggml's stated bound
        else EXPECT_LE(got, 2e-37f) << x;
    }
    EXPECT_EQ(ggml_expf_lane(0.0f), 1.0f);
    EXPECT_EQ(ggml_expf_lane(-200.0f), 0.0f);
    EXPECT_EQ(ggml_expf_lane(-std::numeric_limits<float>::infinity()), 0.0f);
}

// The grouped kernel (every query head of one KV head at once) against the
// scalar reference run head by head: bit for bit, for head counts that need
// one or two passes, head sizes of every supported model, partial chunks,
// extras out of order, and a large scale that drives exp into its
// subnormal and saturated ranges (p == 0 for some heads, not others).
TEST(Attention, GroupedHeadsMatchReferenceBitForBit) {
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const bool has512 = kernels::cpu_max_isa() == kernels::Isa::Avx512;
    int checked_avx512 = 0;
    for (int head_dim : {64, 128, 192, 256, 24}) {
        const int n_ctx = 301, n_kv_heads = 2, stride = n_kv_heads * head_dim + 3;
        std::vector<uint16_t> k((size_t)n_ctx * stride + 8), v((size_t)n_ctx * stride + 8);
        for (auto& x : k) x = fp32_to_fp16(nd(rng));
        for (auto& x : v) x = fp32_to_fp16(nd(rng));
        for (int n_q : {1, 3, 6, 7, 9}) {
            const int q_stride = head_dim + 5, out_stride = head_dim + 16;
            std::vector<float> qbuf((size_t)n_q * q_stride + 1);
            for (auto& x : qbuf) x = nd(rng) * 2.0f;
            const float* q = qbuf.data() + 1;
            std::vector<int> extra{290, 299, 96, 300, 95, 17};
            for (int end : {0, 1, 15, 16, 33, 89, 280}) {
                for (auto [scale, cap] : {std::pair{0.125f, 0.0f}, {30.0f, 0.0f}, {0.125f, 3.0f}, {1.0f, 0.5f}}) {
                    kernels::VisibleSlots vis;
                    vis.softcap = cap;
                    vis.begin = end > 10 ? 5 : 0;
                    vis.end = end;
                    vis.extra = extra.data();
                    vis.n_extra = end == 0 ? 0 : (end % 2 ? 6 : 3);
                    vis.batch_rows = 1;
                    vis.extra_pos0 = end == 89 ? end + 7 : -1;
                    const uint16_t* kh = k.data() + 3 + head_dim;
                    const uint16_t* vh = v.data() + 3 + head_dim;
                    std::vector<float> s((size_t)n_q * (n_ctx + 8)), ref((size_t)n_q * out_stride, -1.0f);
                    for (int g = 0; g < n_q; ++g)
                        kernels::attention_head_reference(q + (size_t)g * q_stride, kh, vh, stride, head_dim, scale, vis,
                                                          s.data(), ref.data() + (size_t)g * out_stride);
                    auto check = [&](const std::vector<float>& got, const char* what) {
                        for (int g = 0; g < n_q; ++g)
                            for (int d = 0; d < head_dim; ++d)
                                ASSERT_EQ(bits(ref[(size_t)g * out_stride + d]), bits(got[(size_t)g * out_stride + d]))
                                    << what << " head_dim " << head_dim << " n_q " << n_q << " end " << end
                                    << " scale " << scale << " cap " << cap << " head " << g << " d " << d;
                    };
                    std::vector<float> o1((size_t)n_q * out_stride, -1.0f);
                    kernels::attention_heads(q, q_stride, n_q, kh, vh, stride, head_dim, scale, vis, s.data(), o1.data(),
                                             out_stride);
                    check(o1, "attention_heads");
                    if (has512 && kernels::attention_heads_avx512_supports(head_dim, vis)) {
                        std::vector<float> o2((size_t)n_q * out_stride, -1.0f);
                        kernels::attention_heads_avx512(q, q_stride, n_q, kh, vh, stride, head_dim, scale, vis,
                                                        s.data(), o2.data(), out_stride);
                        check(o2, "attention_heads_avx512");
                        ++checked_avx512;
                    }
                }
            }
        }
    }
    // On an AVX-512 machine the fast path must actually have been exercised.
    if (has512) {
        EXPECT_GT(checked_avx512, 100);
    }
}
