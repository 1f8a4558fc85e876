// Attention of one query head over the KV cache with an arbitrary visible set:
// a contiguous range of committed slots plus a list of extra slots (the row's
// ancestors in a draft tree and itself). This is the tree-mask contract: a row
// never sees a slot that is not listed.
//
// Numerics follow llama.cpp's non-flash CPU path: q is rounded to fp16 before
// the dot with fp16 keys, softmax in f32, probabilities rounded to fp16 before
// the weighted sum of fp16 values.
#pragma once

#include <cstdint>

namespace specdec::kernels {

struct VisibleSlots {
    int begin = 0;              // committed slots [begin, end) are visible
    int end = 0;
    const int* extra = nullptr; // further visible slots (speculative rows), any order
    int n_extra = 0;
    int count() const { return (end - begin) + n_extra; }
};

// q: (head_dim) one query head, already rotated (and pre-scaled where the
// architecture does so). k, v: fp16 cache of one layer, slot stride kv_stride
// elements; the head's values start at k + kv_head * head_dim.
// scores: scratch of at least vis.count() floats. out: (head_dim).
// Uses the fastest path the CPU supports (see kernels/dispatch.h).
void attention_head(const float* q, const uint16_t* k, const uint16_t* v, int kv_stride, int head_dim,
                    float scale, const VisibleSlots& vis, float* scores, float* out);

// The scalar reference, kept forever; the vector path must match it up to
// summation order.
void attention_head_reference(const float* q, const uint16_t* k, const uint16_t* v, int kv_stride,
                              int head_dim, float scale, const VisibleSlots& vis, float* scores, float* out);

// AVX2 + F16C + FMA path (attention_avx2.cpp); only call when the CPU has them.
void attention_head_avx2(const float* q, const uint16_t* k, const uint16_t* v, int kv_stride, int head_dim,
                         float scale, const VisibleSlots& vis, float* scores, float* out);

}  // namespace specdec::kernels
