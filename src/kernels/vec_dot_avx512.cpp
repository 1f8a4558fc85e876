// The AVX-512 level: the AVX2 kernels recompiled with 256-bit VNNI integer
// dots (vpdpbusd/vpdpwssd fuse maddubs+madd+add into one instruction) and
// the 32 vector registers of AVX-512VL. See vec_dot_avx2.cpp.
#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__)
#error "vec_dot_avx512.cpp must be compiled with -mavx512vl -mavx512vnni"
#endif

// GCC 12's 512-bit intrinsics start from _mm512_undefined_*() (casts,
// broadcasts, inserts), which -Wmaybe-uninitialized reports at the header's
// line once inlined; the pragma must precede <immintrin.h> to cover it.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define SPECDEC_VEC_DOT_VNNI 1
#include "vec_dot_avx2.cpp"  // NOLINT(bugprone-suspicious-include): same kernels, other ISA
