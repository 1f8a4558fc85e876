#include "kernels/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/fp16.h"
#include "kernels/dispatch.h"

namespace specdec::kernels {

void attention_head(const float* q, const uint16_t* k, const uint16_t* v, int kv_stride, int head_dim,
                    float scale, const VisibleSlots& vis, float* scores, float* out) {
    // The vector path handles head sizes that are multiples of 8 (all real models).
    if (head_dim % 8 == 0 && active_isa() != Isa::Scalar) {
        attention_head_avx2(q, k, v, kv_stride, head_dim, scale, vis, scores, out);
    } else {
        attention_head_reference(q, k, v, kv_stride, head_dim, scale, vis, scores, out);
    }
}

void attention_head_reference(const float* q, const uint16_t* k, const uint16_t* v, int kv_stride, int head_dim,
                              float scale, const VisibleSlots& vis, float* scores, float* out) {
    const int n = vis.count();
    for (int d = 0; d < head_dim; ++d) out[d] = 0.0f;
    if (n == 0) return;
    float qh[1024];
    for (int d = 0; d < head_dim; ++d) qh[d] = fp16_to_fp32(fp32_to_fp16(q[d]));
    auto slot_at = [&](int j) { return j < vis.end - vis.begin ? vis.begin + j : vis.extra[j - (vis.end - vis.begin)]; };
    float mx = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < n; ++j) {
        const uint16_t* kr = k + (size_t)slot_at(j) * kv_stride;
        float s = 0.0f;
        for (int d = 0; d < head_dim; ++d) s += qh[d] * fp16_to_fp32(kr[d]);
        s *= scale;
        scores[j] = s;
        mx = std::max(mx, s);
    }
    double sum = 0.0;
    for (int j = 0; j < n; ++j) {
        scores[j] = std::exp(scores[j] - mx);
        sum += scores[j];
    }
    const float inv = (float)(1.0 / sum);
    for (int j = 0; j < n; ++j) {
        const float p = fp16_to_fp32(fp32_to_fp16(scores[j] * inv));
        if (p == 0.0f) continue;
        const uint16_t* vr = v + (size_t)slot_at(j) * kv_stride;
        for (int d = 0; d < head_dim; ++d) out[d] += p * fp16_to_fp32(vr[d]);
    }
}

}  // namespace specdec::kernels
