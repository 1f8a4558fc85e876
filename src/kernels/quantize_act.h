// Quantization of activation rows to the "dot types" the weight kernels
// consume, with ggml's exact rounding so that integer dot products (and hence
// logits) agree with llama.cpp. Scalar: this runs once per activation row, a
// negligible cost next to the weight product.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor_type.h"

namespace specdec::kernels {

// x (n) -> n/32 BlockQ8_0: d = amax/127, q = roundf(x / d)  (ggml's q8_0 reference).
void quantize_row_q8_0(const float* x, void* dst, int64_t n);
// x (n) -> n/32 BlockQ8_1: as Q8_0, plus s = fp16(d * sum(q)).
void quantize_row_q8_1(const float* x, void* dst, int64_t n);
// x (n) -> n/256 BlockQ8_K: iscale = -127/max where max is the signed value of
// largest magnitude; q = min(127, nearest_int(iscale*x)); d = 1/iscale; bsums.
void quantize_row_q8_K(const float* x, void* dst, int64_t n);
// x (n) -> n fp16 / bf16 (round to nearest even).
void convert_row_f16(const float* x, void* dst, int64_t n);
void convert_row_bf16(const float* x, void* dst, int64_t n);

// The type an activation row is quantized to for a weight of type w
// (F32 for F32 weights: no conversion).
TensorType dot_type_for(TensorType w);

// Bytes one activation row of n elements takes in the dot type of weight type w.
size_t act_row_bytes(TensorType w, int64_t n);

// Converts one activation row x (n) for weight type w into dst (act_row_bytes).
void quantize_act_row(TensorType w, const float* x, void* dst, int64_t n);

// SIMD kernels of the 32-element types also read per-block values that would
// otherwise be recomputed for every weight row. They follow the blocks in the
// same row buffer (the scalar reference never reads them):
//   at act_extras_offset(n): float d[n/32]   (the block scales as float)
//   then                     int32 e[n/32]   Q4_0/Q5_0/Q8_0: -offset * sum(q),
//                                            offset = 8/16/128, the bias that
//                                            makes the weights unsigned
//                            float e[n/32]   Q4_1/Q5_1: the fp16 s as float
// act_row_bytes_ext covers blocks and extras; for other types it equals act_row_bytes.
size_t act_extras_offset(int64_t n);
size_t act_row_bytes_ext(TensorType w, int64_t n);
// Fills the extras of a row already written by quantize_act_row.
void add_act_row_extras(TensorType w, void* row, int64_t n);

}  // namespace specdec::kernels
