// Scalar reference of the attention of one head, reproducing ggml's non-flash
// CPU attention step by step (see attention.h for what ggml does). Every sum
// below is written in the exact association ggml's vector code uses, so the
// AVX2 path (attention_avx2.cpp) can and must match it bit for bit.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/fp16.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace specdec::kernels {

void attention_head(const float* q, const uint16_t* k, const uint16_t* v, int kv_stride, int head_dim,
                    float scale, const VisibleSlots& vis, float* scores, float* out) {
    // The vector path handles head sizes that are multiples of 8 (all real models).
    if (head_dim % 8 == 0 && head_dim <= 1024 && active_isa() != Isa::Scalar) {
        attention_head_avx2(q, k, v, kv_stride, head_dim, scale, vis, scores, out);
    } else {
        attention_head_reference(q, k, v, kv_stride, head_dim, scale, vis, scores, out);
    }
}

void attention_heads(const float* q, int q_stride, int n_q, const uint16_t* k, const uint16_t* v, int kv_stride,
                     int head_dim, float scale, const VisibleSlots& vis, float* scores, float* out, int out_stride) {
    if (active_isa() == Isa::Avx512 && attention_heads_avx512_supports(head_dim, vis)) {
        attention_heads_avx512(q, q_stride, n_q, k, v, kv_stride, head_dim, scale, vis, scores, out, out_stride);
        return;
    }
    if (head_dim % 8 == 0 && head_dim <= 1024 && active_isa() != Isa::Scalar) {
        attention_heads_avx2(q, q_stride, n_q, k, v, kv_stride, head_dim, scale, vis, scores, out, out_stride);
        return;
    }
    for (int i = 0; i < n_q; ++i)
        attention_head(q + (size_t)i * q_stride, k, v, kv_stride, head_dim, scale, vis, scores,
                       out + (size_t)i * out_stride);
}

namespace attn_detail {

float ggml_expf_lane(float x) {
    // ggml_v_expf, AVX-512 variant, one lane: n = round(x / ln2) via the
    // 1.5*2^23 shifter, b = x - n*ln2 in two parts (fnmadd = fma(-a, b, c)),
    // a degree-5 polynomial j ~ e^b in Estrin form, then scalef(j, n) = j*2^n
    // rounded once; |n| > 192 saturates to 0 (n <= 0) or inf.
    const float r = 0x1.8p23f;
    const float z = std::fma(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                      std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                             u, std::fma(0x1.ffffecp-1f, b, 1.0f));
    if (std::isnan(n)) return n;
    if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : std::numeric_limits<float>::infinity();
    return std::ldexp(j, (int)n);  // correctly rounded, like _mm512_scalef_ps
}

void visible_cells(const VisibleSlots& vis, int& n, const int*& slots, const int*& pos) {
    thread_local std::vector<int> s, p;
    s.clear();
    p.clear();
    for (int c = vis.begin; c < vis.end; ++c) {
        s.push_back(c);
        p.push_back(c);  // committed slot j holds position j
    }
    const int p0 = vis.extra_pos0 >= 0 ? vis.extra_pos0 : vis.end;
    for (int i = 0; i < vis.n_extra; ++i) {
        s.push_back(vis.extra[i]);
        p.push_back(p0 + i);
    }
    n = (int)s.size();
    slots = s.data();
    pos = p.data();
}

void capped_scores(const VisibleSlots& vis, float scale, float* scores, int n) {
    if (vis.softcap <= 0.0f) return;
    softcap_inplace(scores, vis.softcap, n);
    for (int j = 0; j < n; ++j) scores[j] *= scale;  // soft_max_ext's s*scale
}

}  // namespace attn_detail

namespace {

// _mm512_reduce_add_ps as GCC expands it: halves (i, i+8), then (i, i+4),
// (i, i+2), (i, i+1); all in f32.
float tree16(const float* a) {
    float t[8], u[4], w[2];
    for (int i = 0; i < 8; ++i) t[i] = a[i] + a[i + 8];
    for (int i = 0; i < 4; ++i) u[i] = t[i] + t[i + 4];
    for (int i = 0; i < 2; ++i) w[i] = u[i] + u[i + 2];
    return w[0] + w[1];
}

// tinyBLAS<16> dot: one 16-lane accumulator, lane = i % 16, then tree16.
// n % 16 == 0.
float dot_tinyblas(const float* x, const uint16_t* y, int n) {
    float acc[16] = {};
    for (int i = 0; i < n; ++i) acc[i % 16] += x[i] * fp16_to_fp32(y[i]);
    return tree16(acc);
}

// ggml_vec_dot_f16 (AVX-512): 4 accumulators x 16 lanes over steps of 64,
// x0+=x2, x1+=x3, x0+=x1, tree16 into a double, leftovers added in double.
float dot_vec_f16(const float* x, const uint16_t* y, int n) {
    const int np = n & ~63;
    float acc[64] = {};
    for (int i = 0; i < np; ++i) acc[i % 64] += x[i] * fp16_to_fp32(y[i]);
    float red[16];
    for (int l = 0; l < 16; ++l) red[l] = (acc[l] + acc[l + 32]) + (acc[l + 16] + acc[l + 48]);
    double sum = tree16(red);
    for (int i = np; i < n; ++i) sum += (double)(x[i] * fp16_to_fp32(y[i]));
    return (float)sum;
}

}  // namespace

void attention_head_reference(const float* q, const uint16_t* k, const uint16_t* v, int kv_stride, int head_dim,
                              float scale, const VisibleSlots& vis, float* scores, float* out) {
    for (int d = 0; d < head_dim; ++d) out[d] = 0.0f;
    int n = 0;
    const int *slots = nullptr, *pos = nullptr;
    attn_detail::visible_cells(vis, n, slots, pos);
    if (n == 0) return;

    // KQ. q is rounded to f16 once (ggml converts src1 to vec_dot_type F16).
    std::vector<float> qh(head_dim);
    for (int d = 0; d < head_dim; ++d) qh[d] = fp16_to_fp32(fp32_to_fp16(q[d]));
    const bool kq_tiny = attn_detail::kq_uses_tinyblas(vis, head_dim);
    const float kq_scale = attn_detail::kq_pass_scale(vis, scale);
    for (int j = 0; j < n; ++j) {
        const uint16_t* kr = k + (size_t)slots[j] * kv_stride;
        const float dot = kq_tiny ? dot_tinyblas(qh.data(), kr, head_dim) : dot_vec_f16(qh.data(), kr, head_dim);
        scores[j] = dot * kq_scale;  // soft_max_ext: s*scale (+ mask 0 for visible slots)
    }
    attn_detail::capped_scores(vis, scale, scores, n);
    float mx = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < n; ++j) mx = std::max(mx, scores[j]);

    // Softmax: ggml_v_expf per slot; each 16-slot chunk of the padded row is
    // summed by the 16-lane tree in f32 (masked lanes are exact zeros), chunk
    // sums accumulate in double in slot order.
    double sum = 0.0;
    for (int j = 0; j < n;) {
        const int chunk = pos[j] / 16;
        float lanes[16] = {};
        for (; j < n && pos[j] / 16 == chunk; ++j) {
            scores[j] = attn_detail::ggml_expf_lane(scores[j] - mx);
            lanes[pos[j] % 16] = scores[j];
        }
        sum += (double)tree16(lanes);
    }
    const float inv = (float)(1.0 / sum);

    // KQV: P rounded to f16; per output dim, lane = slot % L accumulators
    // (L = 16 tinyBLAS, 64 vec_dot_f16), each summed in slot order, then
    // reduced as the dot's schedule does. n_kv is a multiple of 256, so
    // vec_dot_f16 has no leftovers here.
    const bool kqv_tiny = attn_detail::kqv_uses_tinyblas(vis, head_dim);
    const int L = kqv_tiny ? 16 : 64;
    std::vector<float> lane((size_t)L * head_dim, 0.0f);
    for (int j = 0; j < n; ++j) {
        const float p = fp16_to_fp32(fp32_to_fp16(scores[j] * inv));
        if (p == 0.0f) continue;  // adds exact zeros
        const uint16_t* vr = v + (size_t)slots[j] * kv_stride;
        float* acc = lane.data() + (size_t)(pos[j] % L) * head_dim;
        for (int d = 0; d < head_dim; ++d) acc[d] += p * fp16_to_fp32(vr[d]);
    }
    for (int d = 0; d < head_dim; ++d) {
        float red[16];
        if (kqv_tiny) {
            for (int l = 0; l < 16; ++l) red[l] = lane[(size_t)l * head_dim + d];
        } else {
            auto at = [&](int l) { return lane[(size_t)l * head_dim + d]; };
            for (int l = 0; l < 16; ++l) red[l] = (at(l) + at(l + 32)) + (at(l + 16) + at(l + 48));
        }
        out[d] = tree16(red);
    }
}

}  // namespace specdec::kernels
