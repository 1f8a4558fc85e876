// AVX-512 versions of the activation quantizers that matmul runs on every
// activation row (quantize_act.cpp has the scalar definitions). Same bits:
// max/amax and the block sums are exact, x * id is one rounded product as in
// the scalar code, and _mm512_cvtps_epi32 under the default MXCSR rounds half
// to even exactly like nearest_int's 1.5*2^23 trick does for |v| < 2^22.
#if !defined(__AVX512F__) || !defined(__AVX512BW__)
#error "quantize_act_avx512.cpp must be compiled with -mavx512f -mavx512bw"
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 _mm512_undefined_* in casts
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cstring>

#include "kernels/quant_blocks.h"
#include "kernels/quantize_act_simd.h"

namespace specdec::kernels {

void quantize_row_q8_K_avx512(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_K*>(dst);
    const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        __m512 m = _mm512_setzero_ps();
        for (int j = 0; j < QK_K; j += 16) m = _mm512_max_ps(m, _mm512_and_ps(_mm512_loadu_ps(x + j), abs_mask));
        const float amax = _mm512_reduce_max_ps(m);
        if (amax == 0.0f) {
            std::memset(&y[b], 0, sizeof(BlockQ8_K));
            continue;
        }
        // The scalar loop keeps the first element of largest magnitude (its sign matters).
        float max = 0.0f;
        const __m512 va = _mm512_set1_ps(amax);
        for (int j = 0; j < QK_K; j += 16) {
            const __mmask16 k = _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_loadu_ps(x + j), abs_mask), va, _CMP_EQ_OQ);
            if (k) {
                max = x[j + __builtin_ctz((unsigned)k)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m512 vs = _mm512_set1_ps(iscale);
        const __m512i v127 = _mm512_set1_epi32(127);
        for (int g = 0; g < QK_K / 16; ++g) {
            const __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(x + 16 * g))), v127);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16 * g), _mm512_cvtepi32_epi8(q));
            y[b].bsums[g] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        y[b].d = 1.0f / iscale;
    }
}

void quantize_row_q8_0_avx512(const float* x, void* dst, int64_t n, uint16_t (*to_fp16)(float)) {
    auto* y = static_cast<BlockQ8_0*>(dst);
    const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < n / QK; ++b, x += QK) {
        const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(x0, abs_mask), _mm512_and_ps(x1, abs_mask)));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[b].d = to_fp16(d);
        const __m512 vid = _mm512_set1_ps(id);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x0, vid))));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16),
                         _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x1, vid))));
    }
}

}  // namespace specdec::kernels
