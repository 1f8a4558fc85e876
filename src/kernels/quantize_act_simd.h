// SIMD activation quantizers (quantize_act_avx512.cpp), bit-identical to the
// scalar ones in quantize_act.h; callers check the CPU first (dispatch.h).
#pragma once

#include <cstdint>

namespace specdec::kernels {

void quantize_row_q8_K_avx512(const float* x, void* dst, int64_t n);
// to_fp16: the scalar fp32 -> fp16 conversion (kept out of the ISA-flagged file).
void quantize_row_q8_0_avx512(const float* x, void* dst, int64_t n, uint16_t (*to_fp16)(float));

}  // namespace specdec::kernels
