// Dot-product kernels of one weight type against its activation dot type
// (see quantize_act.h), at each instruction-set level, behind one signature.
//
// A "tile" kernel computes a block of outputs: for nr weight rows and nt
// activation rows, y[t*ldy + r] = dot(weight row r, activation row t). SIMD
// tiles walk weight rows once and let every decoded weight block serve several
// activation rows (register blocking); the scalar tile is the plain loop.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor_type.h"

namespace specdec::kernels {

// w: nr rows, w_stride bytes apart; a: nt quantized activation rows,
// a_stride bytes apart; y: nt rows of ldy floats (only the first nr written).
using TileFn = void (*)(int64_t n_in, const uint8_t* w, size_t w_stride, int64_t nr,
                        const uint8_t* a, size_t a_stride, int64_t nt, float* y, int64_t ldy);

// Indexed by the TensorType number of the weight; nullptr: not provided at this level.
struct KernelTable {
    static constexpr int kSlots = 40;  // up to MXFP4 (39)
    TileFn tile[kSlots] = {};
    TileFn get(TensorType t) const {
        const auto i = (uint32_t)t;
        return i < (uint32_t)kSlots ? tile[i] : nullptr;
    }
};

const KernelTable& scalar_kernel_table();   // vec_dot_scalar.cpp: every supported type
const KernelTable& avx2_kernel_table();     // vec_dot_avx2.cpp
const KernelTable& avx512_kernel_table();   // vec_dot_avx512.cpp (AVX-512 VL/BW/VNNI)

// Scalar reference dots of one row (n elements) with one activation row in
// the weight's dot type. Kept for tests and as the definition of each type.
float vec_dot_f32(int64_t n, const void* w, const void* a);
float vec_dot_f16(int64_t n, const void* w, const void* a);
float vec_dot_bf16(int64_t n, const void* w, const void* a);
float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_q4_1_q8_1(int64_t n, const void* w, const void* a);
float vec_dot_q5_0_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_q5_1_q8_1(int64_t n, const void* w, const void* a);
float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_q4_K_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_q5_K_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_q6_K_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_q2_K_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_q3_K_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_iq4_nl_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_iq4_xs_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_mxfp4_q8_0(int64_t n, const void* w, const void* a);

}  // namespace specdec::kernels
