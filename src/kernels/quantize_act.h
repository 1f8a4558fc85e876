// Quantization of activation rows to the "dot types" the weight kernels
// consume, with ggml's exact rounding so that integer dot products (and hence
// logits) agree with llama.cpp. Scalar: this runs once per activation row, a
// negligible cost next to the weight product.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor_type.h"

namespace specdec::kernels {

// x (n) -> n/32 BlockQ8_0: d = amax/127, q = round_half_even(x * (127/amax)):
// ggml's x86 SIMD quantize_row_q8_0 (what llama.cpp runs here), not its
// generic reference (roundf(x * (1/d))); see quantize_act.cpp.
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
// The same bytes, with the SIMD quantizers when the active ISA level
// (dispatch.h) has them: what matmul uses. quantize_act_row stays scalar.
void quantize_act_row_fast(TensorType w, const float* x, void* dst, int64_t n);

// SIMD kernels of the 32-element types also read per-block values that would
// otherwise be recomputed for every weight row. They follow the blocks in the
// same row buffer (the scalar reference never reads them); see
// act_extras_layout for where:
//   float d[n/32]            the block scales as float (fp16-rounded, as ggml uses)
//   Q4_0/Q5_0/Q8_0: int32 e[n/32][8]  per int32 lane i of the block's integer
//            dot (bytes 4i..4i+3): -offset * (a[4i] + .. + a[4i+3]),
//            offset = 8/16/128 the bias that makes the weights unsigned. Per
//            lane, so each lane holds exactly ggml's integer (whose float
//            rounding then matches, see vec_dot_scalar.cpp)
//   Q4_1/Q5_1:      float e[n/32]     the fp16 s as float
//   K-quants (Q8_K): float d[n/256]   -d of each block (the min terms' factor)
//            int16 e[n/256][16]  the 8 pair sums bsums[2j] + bsums[2j+1]
//            (the K4 min lanes' operand), twice: one copy per 128-bit lane
//            int8 p[n]  the quants again, paired for the AVX2 K-quant tiles:
//            per 64 elements (A = first 32, B = next 32), 32 bytes whose
//            int32 lane k holds A[4k], A[4k+1], B[4k], B[4k+1], then 32 bytes
//            with A[4k+2], A[4k+3], B[4k+2], B[4k+3]. One maddubs per half and
//            an int16 add then give each lane A's and B's 4-element sums side
//            by side, so one pmaddwd applies both sub-block scales.
// act_row_bytes_ext covers blocks and extras; for other types it equals act_row_bytes.
struct ActExtrasLayout {
    size_t d_offset = 0;  // bytes from the row start to d
    size_t e_offset = 0;  // bytes from the row start to e (32-byte aligned)
    size_t p_offset = 0;  // Q8_K: bytes from the row start to p (32-byte aligned)
    size_t end = 0;       // act_row_bytes_ext
};
ActExtrasLayout act_extras_layout(TensorType w, int64_t n);
size_t act_row_bytes_ext(TensorType w, int64_t n);
// Fills the extras of a row already written by quantize_act_row.
void add_act_row_extras(TensorType w, void* row, int64_t n);

}  // namespace specdec::kernels
