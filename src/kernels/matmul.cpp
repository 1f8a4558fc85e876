// matmul: quantize the activation rows once, then split weight rows across
// the pool; each worker runs the active ISA's tile kernel on its rows against
// all activation rows (the tile does the register blocking over tokens).
#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/quantize_act.h"

namespace specdec::kernels {

namespace {

// Per-thread scratch for quantized activations, grown on demand and kept: a
// forward pass calls matmul hundreds of times with the same few sizes.
class ActBuffer {
public:
    ~ActBuffer() { release(); }
    uint8_t* get(size_t bytes) {
        if (bytes > cap_) {
            release();
            cap_ = std::max(bytes, cap_ * 2);
            data_ = static_cast<uint8_t*>(::operator new(cap_, std::align_val_t{64}));
        }
        return data_;
    }

private:
    void release() {
        if (data_) ::operator delete(data_, std::align_val_t{64});
        data_ = nullptr;
    }
    uint8_t* data_ = nullptr;
    size_t cap_ = 0;
};

void check(const WeightMatrix& w) {
    const int64_t be = tensor_type_traits(w.type).block_elems;
    if (!is_supported_weight_type(w.type) || w.n_in % be != 0 ||
        w.row_bytes < tensor_row_bytes(w.type, w.n_in)) {
        throw std::invalid_argument("matmul: unsupported weight " +
                                    std::string(tensor_type_name(w.type)) + " n_in=" +
                                    std::to_string(w.n_in));
    }
}

// Rows per work item: a multiple of 16 keeps y chunk boundaries on cache lines
// (16 floats) and gives the tile kernels whole groups of rows.
constexpr int64_t kRowGrain = 16;

}  // namespace

void matmul(const WeightMatrix& w, const float* x, int64_t n_tok, float* y, ThreadPool& pool) {
    check(w);
    if (n_tok <= 0 || w.n_out <= 0) return;
    const TileFn tile = active_tile(w.type);
    const auto* wdata = static_cast<const uint8_t*>(w.data);

    // act: n_tok rows of a_stride bytes in the dot type (F32 weights read x directly).
    const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
    size_t a_stride = (size_t)w.n_in * sizeof(float);
    if (w.type != TensorType::F32) {
        thread_local ActBuffer buf;
        // Round rows to 64 bytes so each starts on its own cache line.
        a_stride = (act_row_bytes_ext(w.type, w.n_in) + 63) & ~(size_t)63;
        uint8_t* dst = buf.get(a_stride * (size_t)n_tok);
        auto quant = [&](int64_t b, int64_t e, int) {
            for (int64_t t = b; t < e; ++t) {
                quantize_act_row_fast(w.type, x + t * w.n_in, dst + (size_t)t * a_stride, w.n_in);
                add_act_row_extras(w.type, dst + (size_t)t * a_stride, w.n_in);
            }
        };
        // Many rows: spread the quantization too; each row still once.
        if (n_tok >= 4 && pool.size() > 1) pool.parallel_for(n_tok, 1, quant);
        else quant(0, n_tok, 0);
        act = dst;
    }

    pool.parallel_for(w.n_out, kRowGrain, [&](int64_t b, int64_t e, int) {
        tile(w.n_in, wdata + (size_t)b * w.row_bytes, w.row_bytes, e - b, act, a_stride, n_tok,
             y + b, w.n_out);
    });
}

void matmul_reference(const WeightMatrix& w, const float* x, int64_t n_tok, float* y) {
    check(w);
    const TileFn tile = scalar_kernel_table().get(w.type);
    const size_t a_stride = act_row_bytes(w.type, w.n_in);
    std::vector<uint8_t> act(a_stride * (size_t)n_tok);  // (n_tok, a_stride)
    for (int64_t t = 0; t < n_tok; ++t) {
        quantize_act_row(w.type, x + t * w.n_in, act.data() + (size_t)t * a_stride, w.n_in);
    }
    tile(w.n_in, static_cast<const uint8_t*>(w.data), w.row_bytes, w.n_out, act.data(), a_stride,
         n_tok, y, w.n_out);
}

}  // namespace specdec::kernels
