// Vector attention against the scalar reference over head sizes, visible
// sets (ranges, extra slots, empty) and misaligned pointers.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/fp16.h"
#include "kernels/attention.h"
#include "kernels/dispatch.h"

using namespace specdec;

TEST(Attention, Avx2MatchesReference) {
    if (kernels::cpu_max_isa() == kernels::Isa::Scalar) GTEST_SKIP() << "CPU has no AVX2";
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int head_dim : {8, 24, 64, 128, 256}) {
        for (int misalign : {0, 1, 3}) {
            const int n_ctx = 97, n_kv_heads = 2, stride = n_kv_heads * head_dim + misalign;
            std::vector<uint16_t> k((size_t)n_ctx * stride + 8), v((size_t)n_ctx * stride + 8);
            for (auto& x : k) x = fp32_to_fp16(nd(rng));
            for (auto& x : v) x = fp32_to_fp16(nd(rng));
            std::vector<float> qbuf(head_dim + 4);
            for (auto& x : qbuf) x = nd(rng) * 2.0f;
            const float* q = qbuf.data() + misalign;
            std::vector<int> extra{90, 95, 96};
            for (int end : {0, 1, 33, 89}) {
                kernels::VisibleSlots vis;
                vis.begin = end > 10 ? 5 : 0;
                vis.end = end;
                vis.extra = extra.data();
                vis.n_extra = end == 0 ? 0 : 3;
                std::vector<float> s1(n_ctx), s2(n_ctx), o1(head_dim), o2(head_dim);
                const uint16_t* kh = k.data() + misalign + head_dim;  // second kv head
                const uint16_t* vh = v.data() + misalign + head_dim;
                kernels::attention_head_reference(q, kh, vh, stride, head_dim, 0.125f, vis, s1.data(), o1.data());
                kernels::attention_head_avx2(q, kh, vh, stride, head_dim, 0.125f, vis, s2.data(), o2.data());
                for (int d = 0; d < head_dim; ++d)
                    ASSERT_NEAR(o1[d], o2[d], 1e-4 * (1.0 + std::fabs(o1[d])))
                        << "head_dim " << head_dim << " end " << end << " d " << d;
            }
        }
    }
}
