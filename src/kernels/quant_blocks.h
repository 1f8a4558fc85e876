// Block layouts of the ggml quantized types, byte for byte as stored in GGUF
// files (see ggml-common.h). Every struct is plain old data with no padding so
// a weight row can be reinterpreted as an array of blocks.
//
// Element order inside a block (what dequantize_row produces):
//   Q4_0/Q4_1: qs[j] low nibble -> element j, high nibble -> element j+16.
//   Q5_0/Q5_1: as Q4, plus bit j of qh (little endian u32) -> 5th bit of element j.
//   Q4_K/Q5_K: 4 chunks of 64; chunk c uses qs[32c..32c+31]: low nibbles are
//              elements 64c..64c+31 (sub-block 2c), high nibbles 64c+32.. (2c+1);
//              Q5_K's 5th bit of element 64c+l (+32) is bit 2c (2c+1) of qh[l].
//   Q6_K:      two halves of 128; see dequantize.cpp.
//   Q2_K/Q3_K: two halves of 128; element 128h+32k+l (k<4, l<32) is bits
//              2k..2k+1 of qs[32h+l]; Q3_K's 3rd bit is bit 4h+k of hmask[l]
//              (set: value q, clear: q-4). Scales per 16 elements.
//   IQ4_XS:    8 sub-blocks of 32, each in IQ4_NL's order (qs[16s..16s+15]:
//              low nibbles elements 32s..32s+15, high nibbles 32s+16..).
//   MXFP4:     Q4_0's order; nibbles index kMxfp4Values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace specdec::kernels {

inline constexpr int QK = 32;    // elements per block of the "legacy" types
inline constexpr int QK_K = 256; // elements per super-block of the K-quants

struct BlockQ4_0 {
    uint16_t d;           // fp16 scale
    uint8_t qs[QK / 2];   // nibbles, value = (q - 8) * d
};
struct BlockQ4_1 {
    uint16_t d;           // fp16 scale
    uint16_t m;           // fp16 min, value = q * d + m
    uint8_t qs[QK / 2];
};
struct BlockQ5_0 {
    uint16_t d;           // value = (q - 16) * d
    uint8_t qh[4];        // 5th bits, little-endian u32
    uint8_t qs[QK / 2];
};
struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;           // value = q * d + m
    uint8_t qh[4];
    uint8_t qs[QK / 2];
};
struct BlockQ8_0 {
    uint16_t d;           // value = q * d
    int8_t qs[QK];
};
struct BlockQ8_1 {
    uint16_t d;           // fp16 scale
    uint16_t s;           // fp16 of d * sum(qs), d taken before fp16 rounding
    int8_t qs[QK];
};
struct BlockQ4_K {
    uint16_t d;           // fp16 super-scale of the 6-bit sub-block scales
    uint16_t dmin;        // fp16 super-scale of the 6-bit sub-block mins
    uint8_t scales[12];   // 8 scales + 8 mins, 6 bits each, packed (see get_scale_min_k4)
    uint8_t qs[QK_K / 2];
};
struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};
struct BlockQ6_K {
    uint8_t ql[QK_K / 2]; // low 4 bits
    uint8_t qh[QK_K / 4]; // high 2 bits
    int8_t scales[QK_K / 16];
    uint16_t d;           // value = d * scales[g] * (q - 32)
};
struct BlockQ2_K {
    uint8_t scales[QK_K / 16]; // per 16: low nibble scale, high nibble min
    uint8_t qs[QK_K / 4];      // 2-bit quants
    uint16_t d;                // fp16 super-scale of the scales
    uint16_t dmin;             // fp16 super-scale of the mins; value = d*sc*q - dmin*m
};
struct BlockQ3_K {
    uint8_t hmask[QK_K / 8];   // 3rd bits (clear: subtract 4)
    uint8_t qs[QK_K / 4];      // low 2 bits
    uint8_t scales[12];        // 16 six-bit scales, offset by 32 (see q3_K_scale)
    uint16_t d;                // value = d * (sc - 32) * q
};
struct BlockIQ4_NL {
    uint16_t d;           // value = d * kIq4nlValues[q]
    uint8_t qs[QK / 2];   // nibbles, in Q4_0's element order
};
struct BlockIQ4_XS {
    uint16_t d;               // fp16 super-scale
    uint16_t scales_h;        // top 2 bits of the 8 six-bit scales (bits 2s..2s+1)
    uint8_t scales_l[QK_K / 64];  // low 4 bits: sub-block s in nibble s % 2 of byte s / 2
    uint8_t qs[QK_K / 2];     // value = d * (scale_s - 32) * kIq4nlValues[q]
};
struct BlockMXFP4 {
    uint8_t e;            // E8M0 shared exponent: value = 2^(e-128) * kMxfp4Values[q]
    uint8_t qs[QK / 2];   // E2M1 codes (sign bit 3), in Q4_0's element order
};
struct BlockQ8_K {
    float d;              // value = q * d (plain float, not fp16)
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];  // sums of qs in groups of 16 (the K-quants' min terms)
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockMXFP4) == 17);

// The 16 non-linear levels of IQ4_NL (ggml's kvalues_iq4nl): int8, so a
// block's dot with Q8_0 stays an integer dot.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// MXFP4's E2M1 values doubled (ggml's kvalues_mxfp4), so they are int8 and a
// block's dot with Q8_0 stays integer; the scale carries the 1/2 (see
// e8m0_to_fp32_half).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
static_assert(alignof(BlockQ4_0) == 2 && alignof(BlockQ8_K) == 4);

// Unpacks scale and min j (0..7) of a Q4_K/Q5_K super-block: the first four
// use the low 6 bits of bytes j and j+4; the last four put their low 4 bits
// in byte j+4 and their top 2 bits in the spare high bits of bytes j-4 and j.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// Signed scale j (0..15) of a Q3_K super-block: the low 4 bits are the low
// (j < 8) or high nibble of byte j % 8, the top 2 bits come from byte
// 8 + j % 4 at bit 2 * (j / 4); stored offset by 32.
inline int q3_K_scale(const uint8_t* s, int j) {
    const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

// Six-bit scale s (0..7) of an IQ4_XS super-block, less its offset of 32.
inline int iq4_xs_scale(const BlockIQ4_XS& b, int s) {
    const int lo = (b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF;
    const int hi = (b.scales_h >> (2 * s)) & 3;
    return (lo | (hi << 4)) - 32;
}

// 2^(e-128), half the E8M0 value 2^(e-127) (the other half is in
// kMxfp4Values), built from its bits as ggml's ggml_e8m0_to_fp32_half: e < 2
// gives the subnormals 2^-128 and 2^-127. e = 255 (NaN in the OCP spec) is
// 2^127, as in ggml.
inline float e8m0_to_fp32_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

}  // namespace specdec::kernels
