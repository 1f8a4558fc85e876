// AVX2 + F16C + FMA attention of one head: the same computation as
// attention_head_reference (q rounded to fp16, f32 softmax, probabilities
// rounded to fp16), vectorised over the head dimension.
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "kernels/attention.h"

namespace specdec::kernels {
namespace {

inline float hsum(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

inline __m256 load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Round a float to fp16 and back, as the reference does for q and p.
inline float round_f16(float x) {
    return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}

}  // namespace

void attention_head_avx2(const float* q, const uint16_t* k, const uint16_t* v, int kv_stride, int head_dim,
                         float scale, const VisibleSlots& vis, float* scores, float* out) {
    const int n = vis.count();
    for (int d = 0; d < head_dim; ++d) out[d] = 0.0f;
    if (n == 0) return;
    alignas(32) float qh[1024];
    for (int d = 0; d < head_dim; d += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(q + d), _MM_FROUND_TO_NEAREST_INT);
        _mm256_store_ps(qh + d, _mm256_cvtph_ps(h));
    }
    const int n_range = vis.end - vis.begin;
    auto slot_at = [&](int j) { return j < n_range ? vis.begin + j : vis.extra[j - n_range]; };
    float mx = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < n; ++j) {
        const uint16_t* kr = k + (size_t)slot_at(j) * kv_stride;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        int d = 0;
        for (; d + 16 <= head_dim; d += 16) {
            acc0 = _mm256_fmadd_ps(_mm256_load_ps(qh + d), load_f16(kr + d), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_load_ps(qh + d + 8), load_f16(kr + d + 8), acc1);
        }
        for (; d < head_dim; d += 8) acc0 = _mm256_fmadd_ps(_mm256_load_ps(qh + d), load_f16(kr + d), acc0);
        const float s = hsum(_mm256_add_ps(acc0, acc1)) * scale;
        scores[j] = s;
        mx = std::max(mx, s);
    }
    double sum = 0.0;
    for (int j = 0; j < n; ++j) {
        scores[j] = std::exp(scores[j] - mx);
        sum += scores[j];
    }
    const float inv = (float)(1.0 / sum);
    for (int d0 = 0; d0 < head_dim; d0 += 64) {
        // Accumulate up to 64 output dims in registers across all visible slots.
        const int w = std::min(64, head_dim - d0);
        __m256 acc[8];
        for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
        for (int j = 0; j < n; ++j) {
            const float p = round_f16(scores[j] * inv);
            if (p == 0.0f) continue;
            const __m256 pv = _mm256_set1_ps(p);
            const uint16_t* vr = v + (size_t)slot_at(j) * kv_stride + d0;
            for (int r = 0; r < w / 8; ++r) acc[r] = _mm256_fmadd_ps(pv, load_f16(vr + 8 * r), acc[r]);
        }
        for (int r = 0; r < w / 8; ++r) _mm256_storeu_ps(out + d0 + 8 * r, acc[r]);
    }
}

}  // namespace specdec::kernels
