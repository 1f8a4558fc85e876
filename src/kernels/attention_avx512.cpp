// AVX-512 attention of the query heads of one GQA group (they share the KV
// head, hence every K and V row) over one visible set: each K/V row is loaded
// and converted from f16 once for all of them, and the per-cell dot-product
// reductions are done 16 cells at a time with a transposing tree. Every query
// head's result is bit-identical to attention_head_reference in the
// single-token schedule (vis.batch_rows == 1, ggml_vec_dot_f16's order): the
// same products, the same accumulators, the same pairings in every sum, only
// computed side by side (see attention.h for the schedule).
//
// GCC 12's intrinsics use self-initialised _mm512_undefined_* values, which
// -Wmaybe-uninitialized reports once inlined; the pragma must precede
// <immintrin.h> to cover them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/attention.h"

namespace specdec::kernels {
namespace {

inline __m512 load_f16x16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// The 16-lane tree (i, i+8) (i, i+4) (i, i+2) (i, i+1) of one vector.
inline float tree16(__m512 v) {
    const __m256 t = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

// The same tree applied to 16 vectors at once: result lane c = tree16(v[c]).
// Each add pairs exactly the elements tree16 pairs (x + y == y + x bit for
// bit), the shuffles only move them side by side.
inline __m512 tree16_x16(const __m512* v) {
    __m512 w[8], u[4], s[2];
    for (int p = 0; p < 8; ++p)  // (i, i+8): cell 2p in lanes 0-7, 2p+1 in 8-15
        w[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0xEE));
    for (int p = 0; p < 4; ++p)  // (i, i+4): 128-bit lane c holds cell 4p + c
        u[p] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * p], w[2 * p + 1], 0x88),
                             _mm512_shuffle_f32x4(w[2 * p], w[2 * p + 1], 0xDD));
    for (int p = 0; p < 2; ++p) {  // (i, i+2): lane c holds cells 8p + c, 8p + 4 + c (2 each)
        const __m512d a = _mm512_castps_pd(u[2 * p]), b = _mm512_castps_pd(u[2 * p + 1]);
        s[p] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    // (i, i+1): element 4c + k holds cell c + 4k; permute back to cell order.
    const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(s[0], s[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(s[0], s[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(idx, r);
}

// ggml_v_expf, AVX-512 variant, as ggml writes it (scalef, saturation past |n| > 192).
inline __m512 v_expf16(__m512 x) {
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512 res = _mm512_scalef_ps(j, n);
    if (!d) return res;
    const __m512 zero = _mm512_setzero_ps();
    const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, zero, _CMP_LE_OQ),
                                            _mm512_set1_ps(std::numeric_limits<float>::infinity()), zero);
    return _mm512_mask_blend_ps(d, res, alt);
}

inline __mmask16 tail_mask(int m) { return (__mmask16)((1u << m) - 1u); }

// KQ for G query heads (qh: f16-rounded, G rows of D floats) against n cells:
// scores[g * ss + j] = dot_vec_f16(qh_g, K[slots[j]]) * scale. The K row
// stays in registers while every head takes its 4 x 16-lane accumulators
// over steps of 64; the per-cell (x0+x2)+(x1+x3) vectors are then reduced 16
// cells at a time.
template <int D>
void kq_block(const float* qh, int G, const uint16_t* k, int kv_stride, const int* slots, int n, float scale,
              float* scores, int ss) {
    constexpr int NZ = D / 16;
    constexpr int kMaxG = 8;
    alignas(64) float red[kMaxG][16][16];
    const __m512 vscale = _mm512_set1_ps(scale);
    for (int j0 = 0; j0 < n; j0 += 16) {
        const int m = std::min(16, n - j0);
        if (m < 16)
            for (int g = 0; g < G; ++g) std::memset(&red[g][m][0], 0, sizeof(float) * 16 * (size_t)(16 - m));
        for (int c = 0; c < m; ++c) {
            const uint16_t* kr = k + (size_t)slots[j0 + c] * kv_stride;
            __m512 kz[NZ];
            for (int z = 0; z < NZ; ++z) kz[z] = load_f16x16(kr + 16 * z);
            for (int g = 0; g < G; ++g) {
                const float* qq = qh + (size_t)g * D;
                __m512 a[4];
                for (int s = 0; s < 4; ++s) a[s] = _mm512_setzero_ps();
                for (int i = 0; i < NZ; ++i) a[i % 4] = _mm512_fmadd_ps(_mm512_load_ps(qq + 16 * i), kz[i], a[i % 4]);
                _mm512_store_ps(&red[g][c][0], _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3])));
            }
        }
        for (int g = 0; g < G; ++g) {
            __m512 rows[16];
            for (int c = 0; c < 16; ++c) rows[c] = _mm512_load_ps(&red[g][c][0]);
            _mm512_mask_storeu_ps(scores + (size_t)g * ss + j0, tail_mask(m), _mm512_mul_ps(tree16_x16(rows), vscale));
        }
    }
}

void kq_dispatch(int D, const float* qh, int G, const uint16_t* k, int kv_stride, const int* slots, int n,
                 float scale, float* scores, int ss) {
    switch (D) {
        case 64: kq_block<64>(qh, G, k, kv_stride, slots, n, scale, scores, ss); break;
        case 128: kq_block<128>(qh, G, k, kv_stride, slots, n, scale, scores, ss); break;
        case 192: kq_block<192>(qh, G, k, kv_stride, slots, n, scale, scores, ss); break;
        default: kq_block<256>(qh, G, k, kv_stride, slots, n, scale, scores, ss); break;
    }
}

// Softmax of one head's n scores in place, then P rounded to f16: e =
// expf(s - max); the 16-position chunks of the padded row summed by the tree
// in f32 and added in double in position order; p = f16(e * (float)(1/sum)).
void softmax_row(float* s, int n, const int* pos, bool ascending) {
    // Max over full vectors plus a -inf-padded tail (max is exact in any order).
    float mx;
    {
        __m512 v2 = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
        int j = 0;
        for (; j + 16 <= n; j += 16) v2 = _mm512_max_ps(v2, _mm512_loadu_ps(s + j));
        if (j < n)
            v2 = _mm512_max_ps(v2, _mm512_mask_loadu_ps(_mm512_set1_ps(-std::numeric_limits<float>::infinity()),
                                                        tail_mask(n - j), s + j));
        mx = _mm512_reduce_max_ps(v2);
    }
    const __m512 vm = _mm512_set1_ps(mx);
    for (int j = 0; j < n; j += 16) {
        const __mmask16 mk = tail_mask(std::min(16, n - j));
        _mm512_mask_storeu_ps(s + j, mk, v_expf16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + j), vm)));
    }
    double sum = 0.0;
    for (int j = 0; j < n;) {
        // A whole aligned chunk of consecutive positions: one vector.
        if (ascending && j + 16 <= n && pos[j] % 16 == 0 && pos[j + 15] == pos[j] + 15) {
            sum += (double)tree16(_mm512_loadu_ps(s + j));
            j += 16;
            continue;
        }
        const int chunk = pos[j] / 16;
        alignas(64) float lanes[16] = {};
        for (; j < n && pos[j] / 16 == chunk; ++j) lanes[pos[j] % 16] = s[j];
        sum += (double)tree16(_mm512_load_ps(lanes));
    }
    const __m512 vinv = _mm512_set1_ps((float)(1.0 / sum));
    for (int j = 0; j < n; j += 16) {
        const __mmask16 mk = tail_mask(std::min(16, n - j));
        const __m256i h = _mm512_cvtps_ph(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, s + j), vinv), _MM_FROUND_TO_NEAREST_INT);
        _mm512_mask_storeu_ps(s + j, mk, _mm512_cvtph_ps(h));
    }
}

// KQV of QB heads over output dims [d0, d0 + 16 * NV): lane l (cells order[start[l]
// .. start[l+1]), in position order) accumulates p * V with FMAs from zero, as
// ggml's lane does; per l < 16 the lanes l, l+16, l+32, l+48 are combined as
// vec_dot_f16 does ((l + l+32) + (l+16 + l+48)), and the 16 results go
// through the 16-lane tree, all in registers. An empty lane is an exact +0
// operand: accumulators start at +0 and are never -0 (products of f16 values
// are multiples of 2^-48, so no sum rounds to a signed zero), so adding it
// changes nothing, as in the reference. A zero p adds an exact zero (V is
// finite), so cells where only some heads have p = 0 need no special case.
template <int QB, int NV>
void kqv_dims(const float* p, int ss, const uint16_t* v, int kv_stride, const int* slots, const int* order,
              const int* start, int d0, float* out, int out_stride) {
    alignas(64) float red[QB][16][16 * NV];
    for (int l = 0; l < 16; ++l) {
        __m512 lane[4][QB][NV];
        for (int q4 = 0; q4 < 4; ++q4) {
            const int ln = l + 16 * q4;
            for (int g = 0; g < QB; ++g)
                for (int r = 0; r < NV; ++r) lane[q4][g][r] = _mm512_setzero_ps();
            for (int t = start[ln]; t < start[ln + 1]; ++t) {
                const int j = order[t];
                __m512 vz[NV];
                for (int r = 0; r < NV; ++r) vz[r] = load_f16x16(v + (size_t)slots[j] * kv_stride + d0 + 16 * r);
                for (int g = 0; g < QB; ++g) {
                    const __m512 pb = _mm512_set1_ps(p[(size_t)g * ss + j]);
                    for (int r = 0; r < NV; ++r) lane[q4][g][r] = _mm512_fmadd_ps(pb, vz[r], lane[q4][g][r]);
                }
            }
        }
        for (int g = 0; g < QB; ++g)
            for (int r = 0; r < NV; ++r)
                _mm512_store_ps(&red[g][l][16 * r], _mm512_add_ps(_mm512_add_ps(lane[0][g][r], lane[2][g][r]),
                                                                  _mm512_add_ps(lane[1][g][r], lane[3][g][r])));
    }
    for (int g = 0; g < QB; ++g)
        for (int r = 0; r < NV; ++r) {
            __m512 x[16];
            for (int l = 0; l < 16; ++l) x[l] = _mm512_load_ps(&red[g][l][16 * r]);
            for (int step = 8; step >= 1; step /= 2)
                for (int l = 0; l < step; ++l) x[l] = _mm512_add_ps(x[l], x[l + step]);
            _mm512_storeu_ps(out + (size_t)g * out_stride + d0 + 16 * r, x[0]);
        }
}

// Dims per pass: 16 * NV, NV as large as the registers allow (4 lanes x QB x
// NV accumulators), so few heads still read each V row in few passes.
int kqv_dims_per_pass(int qb) { return qb == 1 ? 64 : qb <= 3 ? 32 : 16; }

void kqv_dispatch(int qb, const float* p, int ss, const uint16_t* v, int kv_stride, const int* slots,
                  const int* order, const int* start, int d0, float* out, int out_stride) {
    switch (qb) {
        case 1: kqv_dims<1, 4>(p, ss, v, kv_stride, slots, order, start, d0, out, out_stride); break;
        case 2: kqv_dims<2, 2>(p, ss, v, kv_stride, slots, order, start, d0, out, out_stride); break;
        case 3: kqv_dims<3, 2>(p, ss, v, kv_stride, slots, order, start, d0, out, out_stride); break;
        case 4: kqv_dims<4, 1>(p, ss, v, kv_stride, slots, order, start, d0, out, out_stride); break;
        case 5: kqv_dims<5, 1>(p, ss, v, kv_stride, slots, order, start, d0, out, out_stride); break;
        default: kqv_dims<6, 1>(p, ss, v, kv_stride, slots, order, start, d0, out, out_stride); break;
    }
}

// Up to kMaxQb heads per pass (registers: 4 lanes x kMaxQb accumulators).
constexpr int kMaxQb = 6;

}  // namespace

bool attention_heads_avx512_supports(int head_dim, const VisibleSlots& vis) {
    return vis.batch_rows == 1 && head_dim % 64 == 0 && head_dim <= 256;
}

void attention_heads_avx512(const float* q, int q_stride, int n_q, const uint16_t* k, const uint16_t* v,
                            int kv_stride, int head_dim, float scale, const VisibleSlots& vis, float* scores,
                            float* out, int out_stride) {
    const int D = head_dim;
    for (int g = 0; g < n_q; ++g)
        for (int d = 0; d < D; ++d) out[(size_t)g * out_stride + d] = 0.0f;
    int n = 0;
    const int *slots = nullptr, *pos = nullptr;
    attn_detail::visible_cells(vis, n, slots, pos);
    if (n == 0) return;
    bool ascending = true;
    for (int j = 1; j < n && ascending; ++j) ascending = pos[j] > pos[j - 1];

    // Heads in passes of near-equal size (7 heads: 4 + 3, not 6 + 1).
    const int n_pass = (n_q + kMaxQb - 1) / kMaxQb;
    const int per_pass = (n_q + n_pass - 1) / n_pass;
    thread_local std::vector<float> qbuf;
    thread_local std::vector<int> order;
    qbuf.resize((size_t)kMaxQb * D + 16);
    // 64-byte aligned view of the rounded queries.
    float* qh = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(qbuf.data()) + 63) & ~(uintptr_t)63);
    order.resize(n);

    for (int g0 = 0; g0 < n_q; g0 += per_pass) {
        const int G = std::min(per_pass, n_q - g0);
        // q rounded to f16 (ggml's vec_dot_type).
        for (int g = 0; g < G; ++g)
            for (int d = 0; d < D; d += 16) {
                const __m512 x = _mm512_loadu_ps(q + (size_t)(g0 + g) * q_stride + d);
                _mm512_store_ps(qh + (size_t)g * D + d, _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)));
            }
        float* sc = scores;  // G rows of n
        kq_dispatch(D, qh, G, k, kv_stride, slots, n, attn_detail::kq_pass_scale(vis, scale), sc, n);
        for (int g = 0; g < G; ++g) attn_detail::capped_scores(vis, scale, sc + (size_t)g * n, n);
        for (int g = 0; g < G; ++g) softmax_row(sc + (size_t)g * n, n, pos, ascending);

        // Bucket the cells by lane = position % 64, keeping position order;
        // cells where every head's p is 0 add nothing and are dropped.
        int start[65] = {};
        for (int j = 0; j < n; ++j) {
            bool any = false;
            for (int g = 0; g < G && !any; ++g) any = sc[(size_t)g * n + j] != 0.0f;
            if (any) ++start[pos[j] % 64 + 1];
        }
        for (int l = 0; l < 64; ++l) start[l + 1] += start[l];
        {
            int fill[64];
            for (int l = 0; l < 64; ++l) fill[l] = start[l];
            for (int j = 0; j < n; ++j) {
                bool any = false;
                for (int g = 0; g < G && !any; ++g) any = sc[(size_t)g * n + j] != 0.0f;
                if (any) order[fill[pos[j] % 64]++] = j;
            }
        }
        for (int d0 = 0; d0 < D; d0 += kqv_dims_per_pass(G))
            kqv_dispatch(G, sc, n, v, kv_stride, slots, order.data(), start, d0, out + (size_t)g0 * out_stride,
                         out_stride);
    }
}

}  // namespace specdec::kernels
