// Quantized matmul kernels: dequantization of hand-made blocks, activation
// quantization, and every ISA's matmul against the scalar reference and
// against a float product on dequantized weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/kernel_choice.h"
#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"
#include "kernels/quantize_act.h"
#include "kernels/vec_dot.h"
#include "quant_test_support.h"

namespace specdec {
namespace {

using namespace specdec::kernels;
using specdec::testing::quantize_weights;

// Restores the active ISA when a test that forces levels ends.
struct IsaGuard {
    Isa saved = active_isa();
    bool was_forced = isa_forced();
    ~IsaGuard() {
        if (was_forced) force_isa(saved);
        else unforce_isa();
    }
};

TEST(QuantDequant, Q4_0KnownBlock) {
    BlockQ4_0 b{};
    b.d = fp32_to_fp16(0.5f);
    for (int j = 0; j < 16; ++j) b.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    dequantize_row(TensorType::Q4_0, &b, y, 32);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(y[j], (j - 8) * 0.5f);
        EXPECT_EQ(y[j + 16], (7 - j) * 0.5f);
    }
}

TEST(QuantDequant, Q4_1KnownBlock) {
    BlockQ4_1 b{};
    b.d = fp32_to_fp16(2.0f);
    b.m = fp32_to_fp16(-3.0f);
    for (int j = 0; j < 16; ++j) b.qs[j] = (uint8_t)(j | (1 << 4));
    float y[32];
    dequantize_row(TensorType::Q4_1, &b, y, 32);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(y[j], 2.0f * j - 3.0f);
        EXPECT_EQ(y[j + 16], -1.0f);
    }
}

TEST(QuantDequant, Q5_0AndQ5_1KnownBlocks) {
    BlockQ5_0 b{};
    b.d = fp32_to_fp16(1.0f);
    const uint32_t qh = 0x80000001u;  // 5th bit of elements 0 and 31
    std::memcpy(b.qh, &qh, 4);
    for (int j = 0; j < 16; ++j) b.qs[j] = 0x33;
    float y[32];
    dequantize_row(TensorType::Q5_0, &b, y, 32);
    EXPECT_EQ(y[0], 19 - 16);
    EXPECT_EQ(y[1], 3 - 16);
    EXPECT_EQ(y[16], 3 - 16);
    EXPECT_EQ(y[31], 19 - 16);

    BlockQ5_1 c{};
    c.d = fp32_to_fp16(0.25f);
    c.m = fp32_to_fp16(1.0f);
    std::memcpy(c.qh, &qh, 4);
    for (int j = 0; j < 16; ++j) c.qs[j] = 0xF0;
    dequantize_row(TensorType::Q5_1, &c, y, 32);
    EXPECT_EQ(y[0], 16 * 0.25f + 1.0f);
    EXPECT_EQ(y[5], 1.0f);
    EXPECT_EQ(y[20], 15 * 0.25f + 1.0f);
    EXPECT_EQ(y[31], 31 * 0.25f + 1.0f);
}

TEST(QuantDequant, Q8_0AndFloatTypes) {
    BlockQ8_0 b{};
    b.d = fp32_to_fp16(0.125f);
    for (int j = 0; j < 32; ++j) b.qs[j] = (int8_t)(j - 16);
    float y[32];
    dequantize_row(TensorType::Q8_0, &b, y, 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j - 16) * 0.125f);

    const uint16_t h[3] = {0x3c00, 0xc000, 0x3555};  // 1, -2, ~1/3
    dequantize_row(TensorType::F16, h, y, 3);
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], -2.0f);
    EXPECT_NEAR(y[2], 1.0f / 3.0f, 1e-3);
    const uint16_t bf[2] = {0x3f80, 0xc040};  // 1, -3
    dequantize_row(TensorType::BF16, bf, y, 2);
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], -3.0f);
}

TEST(QuantDequant, Q4_KKnownBlock) {
    BlockQ4_K b{};
    b.d = fp32_to_fp16(1.0f);
    b.dmin = fp32_to_fp16(0.5f);
    // scale j = j + 1 (sub-block 7 uses 40 to exercise the packed top bits),
    // min j = 2 * j (min 7 = 50).
    int sc[8] = {1, 2, 3, 4, 5, 6, 7, 40}, m[8] = {0, 2, 4, 6, 8, 10, 12, 50};
    specdec::testing::pack_scales_k4(sc, m, b.scales);
    for (int l = 0; l < 128; ++l) b.qs[l] = (uint8_t)((l % 16) | ((15 - l % 16) << 4));
    std::vector<float> y(256);
    dequantize_row(TensorType::Q4_K, &b, y.data(), 256);
    for (int j = 0; j < 8; ++j) {
        for (int l = 0; l < 32; ++l) {
            const int q = (j % 2 == 0) ? (l % 16) : (15 - l % 16);
            EXPECT_EQ(y[32 * j + l], (float)sc[j] * q - 0.5f * m[j]) << j << " " << l;
        }
    }
}

TEST(QuantDequant, Q5_KKnownBlock) {
    BlockQ5_K b{};
    b.d = fp32_to_fp16(1.0f);
    b.dmin = fp32_to_fp16(1.0f);
    int sc[8] = {1, 1, 1, 1, 1, 1, 1, 63}, m[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    specdec::testing::pack_scales_k4(sc, m, b.scales);
    for (int l = 0; l < 32; ++l) b.qh[l] = (uint8_t)(1u << (l % 8));  // 5th bit of sub-block l%8
    std::vector<float> y(256);
    dequantize_row(TensorType::Q5_K, &b, y.data(), 256);
    for (int j = 0; j < 8; ++j) {
        for (int l = 0; l < 32; ++l) {
            const int q = (l % 8 == j) ? 16 : 0;
            EXPECT_EQ(y[32 * j + l], (float)sc[j] * q - m[j]) << j << " " << l;
        }
    }
}

TEST(QuantDequant, Q6_KKnownBlock) {
    BlockQ6_K b{};
    b.d = fp32_to_fp16(0.5f);
    for (int g = 0; g < 16; ++g) b.scales[g] = (int8_t)(g - 8);
    // Element e of the 256: q = e % 64, stored in the ql/qh layout.
    for (int half = 0; half < 2; ++half) {
        for (int l = 0; l < 32; ++l) {
            int q[4];
            for (int k = 0; k < 4; ++k) q[k] = (128 * half + 32 * k + l) % 64;
            b.ql[64 * half + l] = (uint8_t)((q[0] & 0xF) | ((q[2] & 0xF) << 4));
            b.ql[64 * half + l + 32] = (uint8_t)((q[1] & 0xF) | ((q[3] & 0xF) << 4));
            b.qh[32 * half + l] = (uint8_t)((q[0] >> 4) | ((q[1] >> 4) << 2) |
                                             ((q[2] >> 4) << 4) | ((q[3] >> 4) << 6));
        }
    }
    std::vector<float> y(256);
    dequantize_row(TensorType::Q6_K, &b, y.data(), 256);
    for (int e = 0; e < 256; ++e) {
        EXPECT_EQ(y[e], 0.5f * (float)(e / 16 - 8) * (float)(e % 64 - 32)) << e;
    }
}

TEST(QuantDequant, IQ4_XSKnownBlock) {
    BlockIQ4_XS b{};
    b.d = fp32_to_fp16(0.5f);
    // Six-bit scales 1, 10, 19, .., 55, 0 (every top-2-bit value): low nibbles
    // in scales_l, top 2 bits in scales_h.
    int ls[8];
    for (int s = 0; s < 8; ++s) {
        ls[s] = (9 * s + 1) & 63;
        b.scales_l[s / 2] |= (uint8_t)((ls[s] & 0xF) << (4 * (s % 2)));
        b.scales_h |= (uint16_t)((ls[s] >> 4) << (2 * s));
    }
    // Element 32s + l: code (l + s) % 16 (low nibble, l < 16) or (15 - l % 16).
    for (int s = 0; s < 8; ++s)
        for (int l = 0; l < 16; ++l) b.qs[16 * s + l] = (uint8_t)(((l + s) % 16) | ((15 - l) << 4));
    std::vector<float> y(256);
    dequantize_row(TensorType::IQ4_XS, &b, y.data(), 256);
    for (int s = 0; s < 8; ++s) {
        for (int l = 0; l < 32; ++l) {
            const int code = l < 16 ? (l + s) % 16 : 15 - (l - 16);
            EXPECT_EQ(y[32 * s + l], 0.5f * (float)(ls[s] - 32) * (float)kIq4nlValues[code]) << s << " " << l;
        }
    }
}

TEST(QuantDequant, MXFP4KnownBlocks) {
    // The OCP MX E2M1 levels: code c (bit 3 the sign) is +-{0, .5, 1, 1.5, 2, 3, 4, 6}.
    const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    BlockMXFP4 b[4]{};
    const uint8_t exps[4] = {127, 130, 1, 0};  // scales 1, 8, 2^-126, 2^-127 (E8M0: 2^(e-127))
    const float scale[4] = {1.0f, 8.0f, std::ldexp(1.0f, -126), std::ldexp(1.0f, -127)};
    for (int k = 0; k < 4; ++k) {
        b[k].e = exps[k];
        for (int j = 0; j < 16; ++j) b[k].qs[j] = (uint8_t)(j | ((15 - j) << 4));
    }
    std::vector<float> y(128);
    dequantize_row(TensorType::MXFP4, b, y.data(), 128);
    for (int k = 0; k < 4; ++k) {
        for (int j = 0; j < 32; ++j) {
            const int code = j < 16 ? j : 15 - (j - 16);
            const float v = (code & 8 ? -1.0f : 1.0f) * e2m1[code & 7] * scale[k];
            EXPECT_EQ(y[32 * k + j], v) << k << " " << j;
        }
    }
    BlockMXFP4 big{};
    big.e = 255;  // 2^128 in E8M0 (NaN in the spec); ggml reads it as 2^127 * level
    big.qs[0] = 0x11;  // level 1 (E2M1 0.5) in both nibbles
    dequantize_row(TensorType::MXFP4, &big, y.data(), 32);
    EXPECT_EQ(y[0], std::ldexp(1.0f, 127));
    EXPECT_EQ(y[16], std::ldexp(1.0f, 127));
    EXPECT_EQ(y[1], 0.0f);
}

TEST(QuantDequant, RejectsBadInput) {
    float y[64];
    BlockQ4_0 b[2]{};
    EXPECT_THROW(dequantize_row(TensorType::Q4_0, b, y, 33), std::invalid_argument);
    EXPECT_THROW(dequantize_row((TensorType)16 /* IQ2_XXS */, b, y, 256), std::invalid_argument);
    EXPECT_FALSE(is_supported_weight_type(TensorType::Q8_K));
    EXPECT_TRUE(is_supported_weight_type(TensorType::Q4_K));
}

TEST(QuantActivation, Q8_0RoundsLikeGgml) {
    float x[32];
    for (int j = 0; j < 32; ++j) x[j] = (float)(j - 16) * 0.1f;  // amax = 1.6 at j=0
    BlockQ8_0 b;
    quantize_row_q8_0(x, &b, 32);
    const float d = 1.6f / 127.0f;
    EXPECT_EQ(b.d, fp32_to_fp16(d));
    for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], (int8_t)std::nearbyintf(x[j] * (127.0f / 1.6f)));
    EXPECT_EQ(b.qs[0], -127);
}

TEST(QuantActivation, Q8_0And8_1TiesToEvenLikeGgmlX86) {
    // amax = 127 makes id = 1: x*id lands exactly on .5 and ggml's x86 SIMD
    // quantizer (llama.cpp's path here) rounds half to even, not away from 0.
    float x[32];
    for (int j = 0; j < 32; ++j) x[j] = (float)(j - 16) + 0.5f;  // -15.5 .. 15.5
    x[0] = 127.0f;
    BlockQ8_0 b;
    quantize_row_q8_0(x, &b, 32);
    EXPECT_EQ(b.qs[0], 127);
    EXPECT_EQ(b.qs[1], -14);  // -14.5 -> -14 (roundf: -15)
    EXPECT_EQ(b.qs[2], -14);  // -13.5 -> -14
    EXPECT_EQ(b.qs[17], 2);   // 1.5 -> 2
    EXPECT_EQ(b.qs[18], 2);   // 2.5 -> 2 (roundf: 3)
    BlockQ8_1 c;
    quantize_row_q8_1(x, &c, 32);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
        EXPECT_EQ(c.qs[j], b.qs[j]);
        sum += c.qs[j];
    }
    EXPECT_EQ(c.s, fp32_to_fp16((float)sum * 1.0f));
    // The multiplier is 127/amax, not 1/(amax/127): these differ in the last
    // bit for amax = 0.3, which moves x = 0.3 * 61.5/127 off the tie.
    float z[32] = {};
    z[0] = 0.3f;
    z[1] = 0.3f * 61.5f / 127.0f;
    quantize_row_q8_0(z, &b, 32);
    EXPECT_EQ(b.qs[1], (int8_t)std::nearbyintf(z[1] * (127.0f / 0.3f)));
}

TEST(QuantActivation, Q8_1StoresScaledSum) {
    float x[32];
    for (int j = 0; j < 32; ++j) x[j] = (float)j;
    BlockQ8_1 b;
    quantize_row_q8_1(x, &b, 32);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += b.qs[j];
    EXPECT_EQ(b.qs[31], 127);
    EXPECT_EQ(b.s, fp32_to_fp16((float)sum * (31.0f / 127.0f)));
}

TEST(QuantActivation, Q8_KUsesSignedMaxAndBsums) {
    std::vector<float> x(256, 0.0f);
    x[3] = -2.0f;  // largest magnitude, negative: iscale = -127 / -2 > 0
    x[10] = 1.0f;
    x[200] = 0.01f;
    BlockQ8_K b;
    quantize_row_q8_K(x.data(), &b, 256);
    EXPECT_EQ(b.qs[3], -127);
    EXPECT_EQ(b.qs[10], 64);  // 63.5 rounds half to even
    EXPECT_EQ(b.qs[200], 1);
    EXPECT_FLOAT_EQ(b.d, -2.0f / -127.0f);
    EXPECT_EQ(b.bsums[0], -127 + 64);
    EXPECT_EQ(b.bsums[12], 1);
    std::vector<float> z(256, 0.0f);
    quantize_row_q8_K(z.data(), &b, 256);
    EXPECT_EQ(b.d, 0.0f);
    EXPECT_EQ(b.bsums[0], 0);
}

TEST(QuantActivation, FastPathSameBytesAsScalar) {
    // matmul quantizes with quantize_act_row_fast (SIMD on AVX-512): every
    // byte must equal the scalar quantizer's, ties, zero blocks and a
    // largest magnitude present with both signs included.
    IsaGuard guard;
    force_isa(Isa::Avx512);  // capped at the CPU: scalar fallback elsewhere
    std::mt19937 rng(77);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t n = 4 * 256;
    for (TensorType w : {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q5_0, TensorType::Q8_0, TensorType::Q4_0}) {
        for (int trial = 0; trial < 40; ++trial) {
            std::vector<float> x(n);
            for (auto& v : x) v = nd(rng) * (trial % 3 == 0 ? 1000.0f : 1.0f);
            if (trial % 4 == 1) std::fill(x.begin(), x.begin() + 256, 0.0f);           // zero blocks
            if (trial % 4 == 2) for (size_t i = 0; i < x.size(); ++i) x[i] = (float)((int)i % 11 - 5) * 0.5f;  // ties
            if (trial % 4 == 3) { x[300] = 9.0f; x[301] = -9.0f; x[600] = -9.0f; x[601] = 9.0f; }  // sign of max
            const size_t bytes = act_row_bytes(w, n);
            std::vector<uint8_t> a(bytes, 0xAB), b(bytes, 0xAB);
            quantize_act_row(w, x.data(), a.data(), n);
            quantize_act_row_fast(w, x.data(), b.data(), n);
            ASSERT_EQ(a, b) << tensor_type_name(w) << " trial " << trial;
        }
    }
}

// ---- matmul sweeps ----------------------------------------------------------

const TensorType kAllTypes[] = {TensorType::Q4_1, TensorType::Q5_0, TensorType::Q8_0,
                                TensorType::Q4_K, TensorType::Q6_K, TensorType::F32,
                                TensorType::F16,  TensorType::BF16, TensorType::Q4_0,
                                TensorType::Q5_1, TensorType::Q5_K, TensorType::Q2_K, TensorType::Q3_K, TensorType::IQ4_NL,
                                TensorType::IQ4_XS, TensorType::MXFP4};

// Per-type tolerance of the float product on dequantized weights, relative to
// sum |w| * max |x|: the error of quantizing the activations.
double act_quant_tol(TensorType t) {
    switch (t) {
        case TensorType::F32: return 1e-6;
        case TensorType::F16: return 1e-3;
        case TensorType::BF16: return 8e-3;
        default: return 1.0 / 127.0;
    }
}

struct Case {
    TensorType type;
    int64_t n_in, n_out, n_tok;
    int misalign;  // floats of offset of x and y from an aligned buffer
};

void run_case(const Case& c, std::mt19937& rng, ThreadPool& pool1, ThreadPool& pool2) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> wf((size_t)(c.n_out * c.n_in));  // (n_out, n_in)
    for (auto& v : wf) v = nd(rng);
    const std::vector<uint8_t> wq = quantize_weights(c.type, wf.data(), c.n_out, c.n_in);
    WeightMatrix w{c.type, wq.data(), c.n_in, c.n_out, tensor_row_bytes(c.type, c.n_in)};

    std::vector<float> xbuf((size_t)(c.n_tok * c.n_in) + 4);  // x: (n_tok, n_in) at +misalign
    float* x = xbuf.data() + c.misalign;
    for (int64_t i = 0; i < c.n_tok * c.n_in; ++i) x[i] = nd(rng) * (i % 7 == 0 ? 3.0f : 1.0f);

    std::vector<float> ref((size_t)(c.n_tok * c.n_out));  // (n_tok, n_out)
    matmul_reference(w, x, c.n_tok, ref.data());

    // Float product on dequantized weights: checks the reference itself.
    std::vector<float> wd((size_t)(c.n_out * c.n_in));
    for (int64_t r = 0; r < c.n_out; ++r)
        dequantize_row(c.type, wq.data() + r * w.row_bytes, wd.data() + r * c.n_in, c.n_in);
    for (int64_t t = 0; t < c.n_tok; ++t) {
        double xmax = 0;
        for (int64_t i = 0; i < c.n_in; ++i) xmax = std::max(xmax, (double)std::fabs(x[t * c.n_in + i]));
        for (int64_t r = 0; r < c.n_out; ++r) {
            double s = 0, wabs = 0;
            for (int64_t i = 0; i < c.n_in; ++i) {
                s += (double)wd[r * c.n_in + i] * x[t * c.n_in + i];
                wabs += std::fabs(wd[r * c.n_in + i]);
            }
            ASSERT_NEAR(ref[t * c.n_out + r], s, act_quant_tol(c.type) * wabs * xmax + 1e-4)
                << tensor_type_name(c.type) << " n_in=" << c.n_in << " t=" << t << " r=" << r;
        }
    }

    // Every ISA level and both pools against the reference. Summation order
    // differs, so compare relative to the magnitude of the row's terms.
    IsaGuard guard;
    for (int level = 0; level <= (int)cpu_max_isa(); ++level) {
        force_isa((Isa)level);
        for (ThreadPool* pool : {&pool1, &pool2}) {
            std::vector<float> ybuf((size_t)(c.n_tok * c.n_out) + 4, -7.0f);
            float* y = ybuf.data() + c.misalign;
            matmul(w, x, c.n_tok, y, *pool);
            for (int64_t i = 0; i < c.n_tok * c.n_out; ++i) {
                const double tol = 2e-5 * (std::fabs(ref[i]) + std::sqrt((double)c.n_in)) + 1e-5;
                ASSERT_NEAR(y[i], ref[i], tol)
                    << tensor_type_name(c.type) << " isa=" << isa_name((Isa)level)
                    << " threads=" << pool->size() << " n_in=" << c.n_in << " n_out=" << c.n_out
                    << " n_tok=" << c.n_tok << " t=" << i / c.n_out << " r=" << i % c.n_out;
            }
            // Nothing outside y (n_tok, n_out) may be written.
            for (int k = 0; k < c.misalign; ++k) ASSERT_EQ(ybuf[k], -7.0f);
            for (size_t k = (size_t)(c.misalign + c.n_tok * c.n_out); k < ybuf.size(); ++k)
                ASSERT_EQ(ybuf[k], -7.0f);
        }
    }
}

TEST(QuantMatmul, AllTypesAllIsasMatchReference) {
    std::mt19937 rng(1234);
    ThreadPool pool1(1), pool2(2);
    const int64_t n_toks[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 70};
    const int64_t n_outs[] = {1, 15, 16, 33, 70};
    for (TensorType t : kAllTypes) {
        const int64_t be = tensor_type_traits(t).block_elems == 1 ? 32
                                                                  : tensor_type_traits(t).block_elems;
        const int64_t big = be == 256 ? 3 : 9;
        for (int64_t n_in : {be, 2 * be, big * be}) {
            int k = 0;
            for (int64_t n_out : n_outs) {
                for (int64_t n_tok : n_toks) {
                    ++k;
                    // Thin the full cross product: all n_tok for n_out=33, a
                    // rotating subset otherwise.
                    if (n_out != 33 && k % 3 != 0) continue;
                    run_case({t, n_in, n_out, n_tok, (int)(k % 4)}, rng, pool1, pool2);
                    if (HasFatalFailure()) return;
                }
            }
        }
    }
}

TEST(QuantMatmul, OddFloatLengths) {
    // F32/F16/BF16 rows need not be multiples of 32.
    std::mt19937 rng(7);
    ThreadPool pool1(1), pool2(2);
    for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
        for (int64_t n_in : {1, 7, 33, 100}) {
            run_case({t, n_in, 19, 6, 1}, rng, pool1, pool2);
            if (HasFatalFailure()) return;
        }
    }
}

TEST(QuantMatmul, DotKernelsMatchScalarIntegerExact) {
    // Weights whose every block scale is 1 and activations whose every scale
    // is 1 make the float result an exact integer: SIMD must equal scalar.
    std::mt19937 rng(99);
    std::uniform_int_distribution<int> byte(0, 255);
    IsaGuard guard;
    ThreadPool pool(1);
    const int64_t n_in = 512, n_out = 5, n_tok = 6;
    for (TensorType t : {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q8_0}) {
        const size_t rb = tensor_row_bytes(t, n_in);
        const size_t bb = tensor_type_traits(t).block_bytes;
        std::vector<uint8_t> wq(rb * n_out);
        for (auto& v : wq) v = (uint8_t)byte(rng);
        for (size_t off = 0; off < wq.size(); off += bb) {
            const uint16_t one = fp32_to_fp16(1.0f);
            std::memcpy(&wq[off], &one, 2);
        }
        // x in [-127, 127] with 127 in each block: activation scale exactly 1.
        std::vector<float> x(n_tok * n_in);
        for (size_t i = 0; i < x.size(); ++i) x[i] = (float)(i % 32 == 5 ? 127 : byte(rng) % 255 - 127);
        WeightMatrix w{t, wq.data(), n_in, n_out, rb};
        std::vector<float> ref(n_tok * n_out), y(n_tok * n_out);
        matmul_reference(w, x.data(), n_tok, ref.data());
        for (int level = 0; level <= (int)cpu_max_isa(); ++level) {
            force_isa((Isa)level);
            matmul(w, x.data(), n_tok, y.data(), pool);
            for (size_t i = 0; i < y.size(); ++i) {
                ASSERT_EQ(y[i], ref[i]) << tensor_type_name(t) << " " << isa_name((Isa)level);
            }
        }
    }
}

// The paired K-quant kernels (vec_dot_avx2.cpp) add two maddubs results in
// int16 before applying the scales: at the largest quants (Q6_K 63, Q5_K 31,
// Q4_K 15) and activations of +-127 that sum is closest to overflowing
// (4 * 63 * 127 = 32004). Every quant and scale at its maximum, activations
// all -127 or all +127 (and a mix), 1..9 rows: the reference's bits.
TEST(QuantMatmul, PairedKQuantsAtInt16Limits) {
    IsaGuard guard;
    ThreadPool pool(1);
    const int64_t n_in = 512, n_out = 3, max_tok = 9;
    for (TensorType t : {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
        const size_t rb = tensor_row_bytes(t, n_in), bb = tensor_type_traits(t).block_bytes;
        std::vector<uint8_t> wq(rb * n_out, 0xFF);  // all quants and scales at their maximum
        const uint16_t d = fp32_to_fp16(0.01f);
        for (size_t off = 0; off < wq.size(); off += bb) {
            if (t == TensorType::Q6_K) {
                std::memcpy(&wq[off + offsetof(BlockQ6_K, d)], &d, 2);
                std::memset(&wq[off + offsetof(BlockQ6_K, scales)], 127, QK_K / 16);
            } else {
                std::memcpy(&wq[off], &d, 2);
                std::memcpy(&wq[off + 2], &d, 2);
            }
        }
        const WeightMatrix w{t, wq.data(), n_in, n_out, rb};
        for (int sign_case = 0; sign_case < 3; ++sign_case) {
            std::vector<float> x((size_t)(max_tok * n_in));
            for (size_t i = 0; i < x.size(); ++i)
                x[i] = sign_case == 0 ? -1.0f : sign_case == 1 ? 1.0f : (i / 64) % 2 ? 1.0f : -1.0f;
            std::vector<float> ref((size_t)(max_tok * n_out));
            matmul_reference(w, x.data(), max_tok, ref.data());
            for (int level = 1; level <= (int)cpu_max_isa(); ++level) {
                force_isa((Isa)level);
                for (int64_t n_tok = 1; n_tok <= max_tok; ++n_tok) {
                    std::vector<float> y((size_t)(n_tok * n_out));
                    matmul(w, x.data(), n_tok, y.data(), pool);
                    for (int64_t i = 0; i < n_tok * n_out; ++i)
                        ASSERT_EQ(std::memcmp(&y[(size_t)i], &ref[(size_t)i], 4), 0)
                            << tensor_type_name(t) << " isa=" << isa_name((Isa)level) << " n_tok=" << n_tok
                            << " case=" << sign_case << ": " << y[(size_t)i] << " vs " << ref[(size_t)i];
                }
            }
        }
    }
}

// The engine's losslessness needs a row's outputs to be the same bits
// whether it is computed alone or in a batch of any size, and llama.cpp
// parity needs them to be the scalar reference's bits. Sweeps the tile
// shapes of every SIMD level: token counts 1..17, 33, 64 (groups and their
// remainders), odd row counts and row blocks (101 rows at n_tok > 8), and
// activations with outliers, where any change of float order shows.
TEST(QuantMatmul, TilesBitIdenticalToReferenceAnyBatch) {
    std::mt19937 rng(4242);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    ThreadPool pool1(1), pool2(2);
    IsaGuard guard;
    const TensorType types[] = {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q5_0, TensorType::Q8_0,
                                TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_1, TensorType::Q5_K,
                                TensorType::Q2_K, TensorType::Q3_K, TensorType::IQ4_NL, TensorType::IQ4_XS,
                                TensorType::MXFP4};
    std::vector<int64_t> n_toks;
    for (int64_t n = 1; n <= 17; ++n) n_toks.push_back(n);
    n_toks.push_back(33);
    n_toks.push_back(64);
    for (TensorType type : types) {
        // IQ4_NL/MXFP4 with an odd block count: their kernels pair blocks and add the last one apart.
        const int64_t n_in = type == TensorType::IQ4_NL || type == TensorType::MXFP4 ? 9 * 32
                             : 2 * tensor_type_traits(type).block_elems * (tensor_type_traits(type).block_elems == 32 ? 4 : 1);
        for (int64_t n_out : {1, 2, 3, 17, 101}) {
            std::vector<float> wf((size_t)(n_out * n_in));
            for (auto& v : wf) v = nd(rng);
            const std::vector<uint8_t> wq = quantize_weights(type, wf.data(), n_out, n_in);
            const WeightMatrix w{type, wq.data(), n_in, n_out, tensor_row_bytes(type, n_in)};
            const int64_t max_tok = 64;
            std::vector<float> x((size_t)(max_tok * n_in));
            for (size_t i = 0; i < x.size(); ++i)
                x[i] = nd(rng) * (i % 37 == 3 ? 900.0f : i % 7 == 0 ? 3.0f : 1.0f);
            std::vector<float> ref((size_t)(max_tok * n_out));
            matmul_reference(w, x.data(), max_tok, ref.data());
            for (int level = 1; level <= (int)cpu_max_isa(); ++level) {
                force_isa((Isa)level);
                for (int64_t n_tok : n_toks) {
                    if (n_out == 101 && n_tok % 4 != 1 && n_tok < 33) continue;  // thinned: slow shape
                    // Tokens [off, off + n_tok): a batch starting mid-way checks batch invariance.
                    const int64_t off = (max_tok - n_tok) / 2;
                    for (ThreadPool* pool : {&pool1, &pool2}) {
                        std::vector<float> y((size_t)(n_tok * n_out));
                        matmul(w, x.data() + off * n_in, n_tok, y.data(), *pool);
                        for (int64_t i = 0; i < n_tok * n_out; ++i) {
                            const float want = ref[(size_t)(off * n_out + i)];
                            ASSERT_EQ(std::memcmp(&y[(size_t)i], &want, 4), 0)
                                << tensor_type_name(type) << " isa=" << isa_name((Isa)level) << " n_out=" << n_out
                                << " n_tok=" << n_tok << " threads=" << pool->size() << " t=" << i / n_out
                                << " r=" << i % n_out << ": " << y[(size_t)i] << " vs " << want;
                        }
                    }
                }
            }
        }
    }
}

// Kernels chosen by measurement (no level forced): each row bucket may run
// another level's tiles, and every result must still be the reference's bits.
TEST(QuantMatmul, MeasuredKernelChoiceBitIdenticalToReference) {
    std::mt19937 rng(77);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    ThreadPool pool2(2);
    IsaGuard guard;
    unforce_isa();
    for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q5_0, TensorType::Q8_0,
                            TensorType::Q4_1, TensorType::Q2_K, TensorType::Q3_K, TensorType::IQ4_NL,
                            TensorType::IQ4_XS, TensorType::MXFP4}) {
        ASSERT_TRUE(tiles_exact_across_levels(type));
        const int64_t n_in = 2 * tensor_type_traits(type).block_elems * (tensor_type_traits(type).block_elems == 32 ? 4 : 1);
        const int64_t n_out = 37, max_tok = 40;
        std::vector<float> wf((size_t)(n_out * n_in));
        for (auto& v : wf) v = nd(rng);
        const std::vector<uint8_t> wq = quantize_weights(type, wf.data(), n_out, n_in);
        const WeightMatrix w{type, wq.data(), n_in, n_out, tensor_row_bytes(type, n_in)};
        std::vector<float> x((size_t)(max_tok * n_in));
        for (size_t i = 0; i < x.size(); ++i) x[i] = nd(rng) * (i % 37 == 3 ? 900.0f : 1.0f);
        std::vector<float> ref((size_t)(max_tok * n_out));
        matmul_reference(w, x.data(), max_tok, ref.data());
        const KernelChoiceReport rep = kernel_choice_report(type);
        EXPECT_NE(rep.how, "forced");
        for (int b = 0; b < kRowBuckets; ++b) EXPECT_NE(kernel_table(rep.isa[b]), nullptr);
        for (int64_t n_tok : {1, 2, 3, 4, 5, 8, 9, 16, 17, 40}) {
            std::vector<float> y((size_t)(n_tok * n_out));
            matmul(w, x.data(), n_tok, y.data(), pool2);
            ASSERT_EQ(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)), 0)
                << tensor_type_name(type) << " n_tok=" << n_tok << " (" << kernel_choice_summary(type) << ")";
        }
    }
}

TEST(QuantDispatch, PickFastestPerBucket) {
    using A = std::array<double, kRowBuckets>;
    // level 0 scalar (absent), 1 avx2, 2 avx512: avx2 wins at 1 row, avx512 from 2 on.
    std::vector<A> ns = {A{-1, -1, -1, -1, -1, -1}, A{1.0, 1.0, 1.0, 1.0, 1.0, 1.0}, A{2.3, 0.8, 0.6, 0.5, 0.5, 0.5}};
    auto p = pick_fastest(ns);
    EXPECT_EQ(p[0], Isa::Avx2);
    for (int b = 1; b < kRowBuckets; ++b) EXPECT_EQ(p[b], Isa::Avx512) << b;
    // Within the tie margin the higher level keeps the bucket; beyond it the faster one takes it.
    ns[2] = A{1.02, 1.2, 0.9, 0.9, 0.9, 0.9};
    p = pick_fastest(ns, 0.03);
    EXPECT_EQ(p[0], Isa::Avx512);
    EXPECT_EQ(p[1], Isa::Avx2);
    // A level with no kernel is never picked, even when it is the only "fast" one.
    ns = {A{0.1, 0.1, 0.1, 0.1, 0.1, 0.1}, A{-1, -1, -1, -1, -1, -1}, A{1, 1, 1, 1, 1, 1}};
    p = pick_fastest(ns);
    EXPECT_EQ(p[0], Isa::Scalar);
    EXPECT_EQ(row_bucket(1), 0);
    EXPECT_EQ(row_bucket(2), 1);
    EXPECT_EQ(row_bucket(4), 2);
    EXPECT_EQ(row_bucket(5), 3);
    EXPECT_EQ(row_bucket(16), 4);
    EXPECT_EQ(row_bucket(17), 5);
    for (int b = 0; b < kRowBuckets; ++b) EXPECT_EQ(row_bucket(row_bucket_probe_rows(b)), b);
}

TEST(QuantDispatch, ForcedLevelPinsEveryBucket) {
    IsaGuard guard;
    force_isa(Isa::Avx2);
    for (TensorType t : {TensorType::Q4_K, TensorType::F16}) {
        const KernelChoiceReport r = kernel_choice_report(t);
        EXPECT_EQ(r.how, "forced");
        for (int b = 0; b < kRowBuckets; ++b) EXPECT_EQ((int)r.isa[b], (int)std::min(Isa::Avx2, cpu_max_isa()));
    }
    unforce_isa();
    EXPECT_FALSE(isa_forced());
    // Float types keep one level for all row counts (their sums differ by level).
    const KernelChoiceReport f = kernel_choice_report(TensorType::F16);
    for (int b = 1; b < kRowBuckets; ++b) EXPECT_EQ(f.isa[b], f.isa[0]);
}

TEST(QuantMatmul, RejectsUnsupported) {
    ThreadPool pool(1);
    std::vector<uint8_t> data(84);
    float x[256] = {}, y[1];
    WeightMatrix w{(TensorType)16 /* IQ2_XXS */, data.data(), 256, 1, 66};
    EXPECT_THROW(matmul(w, x, 1, y, pool), std::invalid_argument);
    WeightMatrix w2{TensorType::Q4_0, data.data(), 48, 1, 27};
    EXPECT_THROW(matmul(w2, x, 1, y, pool), std::invalid_argument);
}

TEST(QuantDispatch, ForceIsaCapsAtCpu) {
    IsaGuard guard;
    EXPECT_EQ(force_isa(Isa::Scalar), Isa::Scalar);
    EXPECT_EQ(active_isa(), Isa::Scalar);
    EXPECT_EQ((int)force_isa(Isa::Avx512), (int)cpu_max_isa());
    EXPECT_NE(kernel_table(Isa::Scalar), nullptr);
}

}  // namespace
}  // namespace specdec
