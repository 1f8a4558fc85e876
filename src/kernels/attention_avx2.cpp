// AVX2 + F16C + FMA attention of one head: the same computation as
// attention_head_reference (ggml's non-flash CPU attention, see attention.h),
// bit for bit. ggml's 16-lane AVX-512 vectors are held as pairs of 8-lane
// registers (lo = lanes 0..7, hi = lanes 8..15); lo + hi followed by the
// 128-bit halves, movehl and movehdup adds is exactly _mm512_reduce_add_ps's
// tree (i, i+8) (i, i+4) (i, i+2) (i, i+1).
#include <immintrin.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention.h"

namespace specdec::kernels {
namespace {

// (i, i+4), (i, i+2), (i, i+1) of 8 lanes; with the caller's lo + hi this is
// the 16-lane tree.
inline float hsum8(__m256 v) {
    __m128 lo = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

inline __m256 load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline float round_f16(float x) {
    return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}

// ggml_v_expf (the AVX-512 variant) on 8 lanes. scalef(j, n) = j * 2^n is a
// single correctly rounded product, so for |n| <= 126 (2^n a normal float) a
// multiply by 2^n built from the exponent bits is identical. Lanes beyond
// that (x below about -87: probabilities that round to f16 zero anyway) take
// the scalar lane routine, which implements the saturation and subnormals.
inline __m256 v_expf8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 res = _mm256_mul_ps(j, _mm256_castsi256_ps(e));
    const __m256 absn = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    // NLE_UQ also routes NaN lanes to the scalar routine.
    const int big = _mm256_movemask_ps(_mm256_cmp_ps(absn, _mm256_set1_ps(126.0f), _CMP_NLE_UQ));
    if (big) {
        alignas(32) float xs[8], rs[8];
        _mm256_store_ps(xs, x);
        _mm256_store_ps(rs, res);
        for (int l = 0; l < 8; ++l)
            if (big & (1 << l)) rs[l] = attn_detail::ggml_expf_lane(xs[l]);
        res = _mm256_load_ps(rs);
    }
    return res;
}

// The key operand of a dot: an f16 cache row (converted while loading) or
// an f32 copy of one (converted once for a GQA group; f16 -> f32 is exact, so
// both give the same products in the same order).
inline __m256 load8(const uint16_t* p) { return load_f16(p); }
inline __m256 load8(const float* p) { return _mm256_load_ps(p); }
inline float to_f32(uint16_t h) { return _cvtsh_ss(h); }
inline float to_f32(float f) { return f; }

// tinyBLAS<16> dot over n % 16 == 0 elements: one 16-lane accumulator.
template <class Y>
inline float dot_tinyblas(const float* x, const Y* y, int n) {
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        lo = _mm256_fmadd_ps(_mm256_load_ps(x + i), load8(y + i), lo);
        hi = _mm256_fmadd_ps(_mm256_load_ps(x + i + 8), load8(y + i + 8), hi);
    }
    return hsum8(_mm256_add_ps(lo, hi));
}

// ggml_vec_dot_f16 (AVX-512 build): sum[0..3] of 16 lanes = a[0..7] here
// (a[2s], a[2s+1] = lo, hi of sum[s]); x0+=x2, x1+=x3, x0+=x1; tree; double
// leftovers. n % 8 == 0.
template <class Y>
inline float dot_vec_f16(const float* x, const Y* y, int n) {
    const int np = n & ~63;
    __m256 a[8];
    for (auto& r : a) r = _mm256_setzero_ps();
    for (int i = 0; i < np; i += 64)
        for (int s = 0; s < 8; ++s) a[s] = _mm256_fmadd_ps(_mm256_load_ps(x + i + 8 * s), load8(y + i + 8 * s), a[s]);
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6]));
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7]));
    double sum = hsum8(_mm256_add_ps(lo, hi));
    for (int i = np; i < n; ++i) sum += (double)(x[i] * to_f32(y[i]));
    return (float)sum;
}

// dst = dst + src elementwise over n floats (n % 8 == 0); nullptr is an
// all-zero operand (a lane no visible slot fell into: adding it is exact).
inline float* add_lanes(float* a, float* b, int n) {
    if (!a) return b;
    if (!b) return a;
    for (int d = 0; d < n; d += 8) _mm256_storeu_ps(a + d, _mm256_add_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d)));
    return a;
}

// Softmax of one head's n scores in place, then P rounded to f16 (see attention.h).
void softmax_row(float* scores, int n, const int* pos) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < n; ++j) mx = std::max(mx, scores[j]);
    // exp, elementwise (grouping is free); then the per-16-slot-chunk tree
    // sums added in double in slot order.
    {
        const __m256 vmx = _mm256_set1_ps(mx);
        int j = 0;
        for (; j + 8 <= n; j += 8)
            _mm256_storeu_ps(scores + j, v_expf8(_mm256_sub_ps(_mm256_loadu_ps(scores + j), vmx)));
        for (; j < n; ++j) scores[j] = attn_detail::ggml_expf_lane(scores[j] - mx);
    }
    double sum = 0.0;
    for (int j = 0; j < n;) {
        const int chunk = pos[j] / 16;
        alignas(32) float lanes[16] = {};
        for (; j < n && pos[j] / 16 == chunk; ++j) lanes[pos[j] % 16] = scores[j];
        sum += (double)hsum8(_mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8)));
    }
    const float inv = (float)(1.0 / sum);
    const __m256 vinv = _mm256_set1_ps(inv);
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(scores + j), vinv), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(scores + j, _mm256_cvtph_ps(h));
    }
    for (; j < n; ++j) scores[j] = round_f16(scores[j] * inv);
}

// KQV of G heads over output dims [d0, d0 + 8 * w), w <= NV: lane l walks its
// slots (order[start[l] .. start[l+1]), in position order) and every head
// accumulates p * V from zero with FMAs, as ggml's lane does; each V chunk is
// converted once for all G heads. A slot where one head's p is 0 adds an
// exact zero to that head (V is finite), so the slots only some heads use
// need no special case. lane_buf: (G, L, D) floats.
template <int G, int NV>
void kqv_lanes(const float* p, int ss, const uint16_t* v, int kv_stride, const int* slots, const int* order,
               const int* start, int L, int D, int d0, float* lane_buf) {
    const int w = std::min(NV, (D - d0) / 8);
    for (int l = 0; l < L; ++l) {
        if (start[l] == start[l + 1]) continue;
        __m256 acc[G][NV];
        for (int g = 0; g < G; ++g)
            for (int r = 0; r < NV; ++r) acc[g][r] = _mm256_setzero_ps();
        for (int t = start[l]; t < start[l + 1]; ++t) {
            const int j = order[t];
            const uint16_t* vr = v + (size_t)slots[j] * kv_stride + d0;
            if constexpr (G == 1) {
                // One head: 8 accumulators and the loads inline (holding 8
                // converted chunks as well would spill).
                const __m256 pv = _mm256_set1_ps(p[j]);
                for (int r = 0; r < NV; ++r)
                    if (r < w) acc[0][r] = _mm256_fmadd_ps(pv, load_f16(vr + 8 * r), acc[0][r]);
            } else {
                __m256 vz[NV];
                for (int r = 0; r < NV; ++r) vz[r] = r < w ? load_f16(vr + 8 * r) : _mm256_setzero_ps();
                for (int g = 0; g < G; ++g) {
                    const __m256 pv = _mm256_set1_ps(p[(size_t)g * ss + j]);
                    for (int r = 0; r < NV; ++r)
                        if (r < w) acc[g][r] = _mm256_fmadd_ps(pv, vz[r], acc[g][r]);
                }
            }
        }
        for (int g = 0; g < G; ++g)
            for (int r = 0; r < NV; ++r)
                if (r < w) _mm256_storeu_ps(lane_buf + ((size_t)g * L + l) * D + d0 + 8 * r, acc[g][r]);
    }
}

// Dims per pass by group size: the G x NV accumulators and NV V chunks fit
// the 16 ymm registers.
template <int G>
void kqv_all_dims(const float* p, int ss, const uint16_t* v, int kv_stride, const int* slots, const int* order,
                  const int* start, int L, int D, float* lane_buf) {
    constexpr int NV = G == 1 ? 8 : G == 2 ? 4 : 2;
    for (int d0 = 0; d0 < D; d0 += 8 * NV)
        kqv_lanes<G, NV>(p, ss, v, kv_stride, slots, order, start, L, D, d0, lane_buf);
}

void kqv_dispatch(int G, const float* p, int ss, const uint16_t* v, int kv_stride, const int* slots,
                  const int* order, const int* start, int L, int D, float* lane_buf) {
    switch (G) {
        case 1: kqv_all_dims<1>(p, ss, v, kv_stride, slots, order, start, L, D, lane_buf); break;
        case 2: kqv_all_dims<2>(p, ss, v, kv_stride, slots, order, start, L, D, lane_buf); break;
        case 3: kqv_all_dims<3>(p, ss, v, kv_stride, slots, order, start, L, D, lane_buf); break;
        case 4: kqv_all_dims<4>(p, ss, v, kv_stride, slots, order, start, L, D, lane_buf); break;
        case 5: kqv_all_dims<5>(p, ss, v, kv_stride, slots, order, start, L, D, lane_buf); break;
        default: kqv_all_dims<6>(p, ss, v, kv_stride, slots, order, start, L, D, lane_buf); break;
    }
}
constexpr int kMaxHeadsPerPass = 6;

}  // namespace

void attention_head_avx2(const float* q, const uint16_t* k, const uint16_t* v, int kv_stride, int head_dim,
                         float scale, const VisibleSlots& vis, float* scores, float* out) {
    attention_heads_avx2(q, head_dim, 1, k, v, kv_stride, head_dim, scale, vis, scores, out, head_dim);
}

void attention_heads_avx2(const float* q, int q_stride, int n_q, const uint16_t* k, const uint16_t* v,
                          int kv_stride, int head_dim, float scale, const VisibleSlots& vis, float* scores,
                          float* out, int out_stride) {
    const int D = head_dim;
    for (int g = 0; g < n_q; ++g)
        for (int d = 0; d < D; ++d) out[(size_t)g * out_stride + d] = 0.0f;
    int n = 0;
    const int *slots = nullptr, *pos = nullptr;
    attn_detail::visible_cells(vis, n, slots, pos);
    if (n == 0) return;
    const bool kq_tiny = attn_detail::kq_uses_tinyblas(vis, D);
    const bool kqv_tiny = attn_detail::kqv_uses_tinyblas(vis, D);
    const int L = kqv_tiny ? 16 : 64;
    // position % L as a mask (positions are >= 0, L a power of two): a runtime
    // L made the bucketing loops one integer division per slot each.
    const int lane_mask = L - 1;

    // Heads in passes of near-equal size (7 heads: 4 + 3, not 6 + 1).
    const int n_pass = (n_q + kMaxHeadsPerPass - 1) / kMaxHeadsPerPass;
    const int per_pass = (n_q + n_pass - 1) / n_pass;
    thread_local std::vector<float> qbuf, lane_buf;
    thread_local std::vector<int> order;
    qbuf.resize((size_t)kMaxHeadsPerPass * D + 8);
    float* qh = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(qbuf.data()) + 31) & ~(uintptr_t)31);
    order.resize(n);
    lane_buf.resize((size_t)kMaxHeadsPerPass * L * D);
    alignas(32) float kf[1024];

    for (int g0 = 0; g0 < n_q; g0 += per_pass) {
        const int G = std::min(per_pass, n_q - g0);
        // q rounded to f16 (ggml's vec_dot_type).
        for (int g = 0; g < G; ++g)
            for (int d = 0; d < D; d += 8) {
                const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(q + (size_t)(g0 + g) * q_stride + d), _MM_FROUND_TO_NEAREST_INT);
                _mm256_store_ps(qh + (size_t)g * D + d, _mm256_cvtph_ps(h));
            }
        // KQ: each K row converted once, dotted with every head of the pass.
        float* sc = scores;  // G rows of n
        const float scale_kq = attn_detail::kq_pass_scale(vis, scale);
        for (int j = 0; j < n; ++j) {
            const uint16_t* kr = k + (size_t)slots[j] * kv_stride;
            if (G == 1) {  // nothing to share: convert while dotting
                sc[j] = (kq_tiny ? dot_tinyblas(qh, kr, D) : dot_vec_f16(qh, kr, D)) * scale_kq;
                continue;
            }
            for (int d = 0; d < D; d += 8) _mm256_store_ps(kf + d, load_f16(kr + d));
            for (int g = 0; g < G; ++g)
                sc[(size_t)g * n + j] =
                    (kq_tiny ? dot_tinyblas(qh + (size_t)g * D, kf, D) : dot_vec_f16(qh + (size_t)g * D, kf, D)) * scale_kq;
        }
        for (int g = 0; g < G; ++g) attn_detail::capped_scores(vis, scale, sc + (size_t)g * n, n);
        for (int g = 0; g < G; ++g) softmax_row(sc + (size_t)g * n, n, pos);

        // Bucket the slots by lane = position % L keeping position order; a
        // slot where every head's p is 0 adds nothing and is dropped.
        int start[65] = {};
        auto used = [&](int j) {
            for (int g = 0; g < G; ++g)
                if (sc[(size_t)g * n + j] != 0.0f) return true;
            return false;
        };
        for (int j = 0; j < n; ++j)
            if (used(j)) ++start[(pos[j] & lane_mask) + 1];
        for (int l = 0; l < L; ++l) start[l + 1] += start[l];
        {
            int fill[64];
            for (int l = 0; l < L; ++l) fill[l] = start[l];
            for (int j = 0; j < n; ++j)
                if (used(j)) order[fill[pos[j] & lane_mask]++] = j;
        }
        kqv_dispatch(G, sc, n, v, kv_stride, slots, order.data(), start, L, D, lane_buf.data());

        // Reduce the lanes per head and output dim: vec_dot_f16's x0+=x2,
        // x1+=x3, x0+=x1 first (L = 64), then the 16-lane tree. An empty
        // lane is an exact +0 operand (nullptr); a lane only some heads use
        // holds +0 for the others, which adds nothing either.
        for (int g = 0; g < G; ++g) {
            float* lane_ptr[64];
            for (int l = 0; l < L; ++l)
                lane_ptr[l] = start[l] == start[l + 1] ? nullptr : lane_buf.data() + ((size_t)g * L + l) * D;
            float* red[16];
            for (int l = 0; l < 16; ++l) {
                if (kqv_tiny) {
                    red[l] = lane_ptr[l];
                } else {
                    float* a = add_lanes(lane_ptr[l], lane_ptr[l + 32], D);
                    float* b = add_lanes(lane_ptr[l + 16], lane_ptr[l + 48], D);
                    red[l] = add_lanes(a, b, D);
                }
            }
            for (int step = 8; step >= 1; step /= 2)
                for (int l = 0; l < step; ++l) red[l] = add_lanes(red[l], red[l + step], D);
            float* o = out + (size_t)(g0 + g) * out_stride;
            if (red[0])
                for (int d = 0; d < D; ++d) o[d] = red[0][d];
        }
    }
}

}  // namespace specdec::kernels
