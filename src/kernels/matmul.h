// Matrix products against quantized weights: the engine's hot path.
//
// Semantics follow ggml's CPU backend exactly, so that logits match llama.cpp:
// activations are first quantized per block to the weight type's "dot type"
// (Q4_0/Q5_0/Q8_0 -> Q8_0; Q4_1/Q5_1 -> Q8_1; K-quants -> Q8_K; F16 -> F16;
// BF16 -> BF16; F32 -> F32), then each output is an integer (or plain) dot
// product of a weight row with the quantized activation row.
//
// Every path (scalar reference, AVX2, AVX-512) computes the same thing; the
// scalar reference is kept forever and the tests compare the others with it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor_type.h"

namespace specdec {
class ThreadPool;
}

namespace specdec::kernels {

// A weight matrix as stored in GGUF: n_out rows of n_in elements each
// (GGUF dims = {n_in, n_out}), rows contiguous, row_bytes apart.
struct WeightMatrix {
    TensorType type = TensorType::F32;
    const void* data = nullptr;
    int64_t n_in = 0;    // columns = GGUF dims[0]
    int64_t n_out = 0;   // rows    = GGUF dims[1]
    size_t row_bytes = 0;
};

// y (n_tok, n_out) = x (n_tok, n_in) * W^T. x and y are float row-major,
// contiguous. Uses the fastest kernel the CPU supports and all pool workers.
// Rows of x must not alias y.
void matmul(const WeightMatrix& w, const float* x, int64_t n_tok, float* y, ThreadPool& pool);

// Several products that read the same input x (n_in equal): ys[i] (n_tok,
// ws[i]->n_out) = x * ws[i]^T for i < count (Q/K/V, gate/up). One pool
// dispatch covers every matrix's rows, and x is quantized once per distinct
// weight type. Each output is bit-identical to matmul(*ws[i], x, n_tok, ys[i]).
// At most kMaxGroup matrices.
constexpr int kMaxGroup = 4;
void matmul_group(const WeightMatrix* const* ws, float* const* ys, int count, const float* x, int64_t n_tok,
                  ThreadPool& pool);

// The scalar reference of the same computation (single thread, no SIMD).
void matmul_reference(const WeightMatrix& w, const float* x, int64_t n_tok, float* y);

// Dequantize n elements (a multiple of the block size) of one row to float.
void dequantize_row(TensorType type, const void* src, float* dst, int64_t n);

// True if matmul/dequantize_row support this weight type.
bool is_supported_weight_type(TensorType type);

}  // namespace specdec::kernels
