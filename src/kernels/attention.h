// Attention of one query head over the KV cache with an arbitrary visible set:
// a contiguous range of committed slots plus a list of extra slots (the row's
// ancestors in a draft tree and itself). This is the tree-mask contract: a row
// never sees a slot that is not listed.
//
// Numerics reproduce llama.cpp's non-flash CPU attention (ggml CPU backend as
// built for x86 with AVX-512 and LLAMAFILE, f16 KV cache, v_trans) bit for bit
// where llama.cpp's cell index of a token equals its position (one sequence
// filled from cell 0): lanes are assigned by position, so a draft tree scores
// exactly like the same tokens decoded one by one. What ggml does, and how we mirror it:
//
//  KQ = mul_mat(K, q). q (f32) is rounded to f16 (vec_dot_type of F16). Then
//   * batches of >= 2 query rows (llamafile_sgemm refuses n < 2) with
//     head_dim % 16 == 0: tinyBLAS<16, __m512, ggml_fp16_t, ggml_fp16_t>:
//     one 16-lane f32 accumulator, lane = d % 16, FMAs in increasing d, then
//     _mm512_reduce_add_ps, the halving tree (i, i+8) (i, i+4) (i, i+2) (i, i+1);
//   * otherwise (single-token decode, odd head sizes): ggml_vec_dot_f16 with
//     AVX-512: four 16-lane accumulators over steps of 64 (lane = d % 64),
//     reduced x0+=x2, x1+=x3, x0+=x1, then the same 16-lane tree, widened to
//     double; the d >= head_dim & ~63 leftovers are added in double, one f32
//     product at a time; the result is rounded to float.
//   Products of two f16 values are exact in f32, so FMA vs mul+add is moot.
//  softmax = soft_max_ext(KQ, mask, scale): w = s*scale + mask (0 or -inf);
//   max; ggml_vec_soft_max_f32 over the n_kv row (n_kv padded to 256 since
//   "n_pad_cur = max(n_pad, 256)", so every 16-slot chunk is a full AVX-512
//   vector): e = ggml_v_expf(w - max) (polynomial, _mm512_scalef_ps), each
//   chunk of 16 cells summed with the same 16-lane tree in f32 and added to a
//   double in cell order; then e *= (float)(1/sum). Masked slots give exactly
//   0 and change no sum.
//  KQV = mul_mat(V^T, P): P rounded to f16, dot over the n_kv slots with the
//   same two schedules as KQ (tinyBLAS for batches of >= 2 rows: lane =
//   cell % 16; vec_dot_f16 for one row: lane = cell % 64). Masked cells
//   contribute exact zeros.
#pragma once

#include <cstdint>

namespace specdec::kernels {

struct VisibleSlots {
    int begin = 0;              // committed slots [begin, end) are visible
    int end = 0;
    const int* extra = nullptr; // further visible slots (speculative rows), any order
    int n_extra = 0;
    // Query rows in the forward batch this row belongs to (llama.cpp's ubatch
    // n_tokens). >= 2 selects the tinyBLAS summation order llama.cpp uses for
    // prompt/verification batches, 1 the ggml_vec_dot_f16 order of
    // single-token decode. 0 (unset) counts as a batch.
    int batch_rows = 0;
    // llama.cpp's cell index of extra[i] is taken to be its position:
    // extra_pos0 + i (the extras are the row's ancestor chain, consecutive
    // positions ending at the row's own). -1: vis.end + i, which is right
    // unless a sliding window dropped the chain's first ancestors.
    int extra_pos0 = -1;
    // gemma2's attention logit soft-capping: each q.k becomes
    // cap * tanh(q.k / cap) (kernels::softcap_inplace), then the scale and the
    // softmax apply, as llama.cpp's non-flash graph does. 0: none.
    float softcap = 0.0f;
    int count() const { return (end - begin) + n_extra; }
};

// q: (head_dim) one query head, already rotated (and pre-scaled where the
// architecture does so). k, v: fp16 cache of one layer, slot stride kv_stride
// elements; the head's values start at k + kv_head * head_dim.
// scores: scratch of at least vis.count() floats. out: (head_dim).
// Uses the fastest path the CPU supports (see kernels/dispatch.h).
void attention_head(const float* q, const uint16_t* k, const uint16_t* v, int kv_stride, int head_dim,
                    float scale, const VisibleSlots& vis, float* scores, float* out);

// The scalar reference, kept forever; the vector path must match it bit for bit.
void attention_head_reference(const float* q, const uint16_t* k, const uint16_t* v, int kv_stride,
                              int head_dim, float scale, const VisibleSlots& vis, float* scores, float* out);

// AVX2 + F16C + FMA path (attention_avx2.cpp); only call when the CPU has them.
void attention_head_avx2(const float* q, const uint16_t* k, const uint16_t* v, int kv_stride, int head_dim,
                         float scale, const VisibleSlots& vis, float* scores, float* out);

// The same for the n_q heads of a GQA group (see attention_heads): each K row
// and V chunk is converted from f16 once for the group, and each head's result
// is bit-identical to attention_head_avx2 on it alone. head_dim % 8 == 0, <= 1024.
void attention_heads_avx2(const float* q, int q_stride, int n_q, const uint16_t* k, const uint16_t* v,
                          int kv_stride, int head_dim, float scale, const VisibleSlots& vis, float* scores,
                          float* out, int out_stride);
// Attention of n_q query heads that share one KV head (a GQA group) and one
// visible set: head i reads q + i * q_stride and writes out + i * out_stride,
// and its result is bit-identical to attention_head on it alone (so a row's
// output does not depend on how its heads are grouped). scores: scratch of at
// least n_q * vis.count() floats. Uses attention_heads_avx512 where the CPU,
// head size and schedule allow (it loads each K/V row once for all heads),
// else attention_head per head.
void attention_heads(const float* q, int q_stride, int n_q, const uint16_t* k, const uint16_t* v, int kv_stride,
                     int head_dim, float scale, const VisibleSlots& vis, float* scores, float* out, int out_stride);

// AVX-512 path (attention_avx512.cpp): single-token schedule (batch_rows == 1)
// and head_dim in {64, 128, 192, 256} only; only call when the CPU has AVX-512
// and attention_heads_avx512_supports() holds.
bool attention_heads_avx512_supports(int head_dim, const VisibleSlots& vis);
void attention_heads_avx512(const float* q, int q_stride, int n_q, const uint16_t* k, const uint16_t* v,
                            int kv_stride, int head_dim, float scale, const VisibleSlots& vis, float* scores,
                            float* out, int out_stride);

namespace attn_detail {

// ggml_v_expf (AVX-512 variant) for one lane, in scalar arithmetic.
float ggml_expf_lane(float x);

// Which summation schedule a dot of length n uses (see the header comment).
inline bool kq_uses_tinyblas(const VisibleSlots& vis, int head_dim) {
    return vis.batch_rows != 1 && head_dim % 16 == 0;
}
inline bool kqv_uses_tinyblas(const VisibleSlots& vis, int head_dim) {
    // k = n_kv is a multiple of 256; tinyBLAS also needs m = head_dim % 4 == 0.
    return vis.batch_rows != 1 && head_dim % 4 == 0;
}

// The visible slots (range, then extras) and their positions (the cell
// indices ggml's lanes see), ascending. Thread-local storage, valid until the
// next call on this thread.
void visible_cells(const VisibleSlots& vis, int& n, const int*& slots, const int*& pos);

// The scale the KQ dots are multiplied by in the kernels' KQ pass: 1 when the
// scores are soft-capped (the scale applies after the cap, in capped_scores).
inline float kq_pass_scale(const VisibleSlots& vis, float scale) { return vis.softcap > 0.0f ? 1.0f : scale; }
// With soft-capping: scores[j] = softcap(scores[j]) * scale for j < n; else nothing.
void capped_scores(const VisibleSlots& vis, float scale, float* scores, int n);

}  // namespace attn_detail

}  // namespace specdec::kernels
