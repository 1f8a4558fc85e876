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
#include "kernels/kernel_choice.h"
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
    const WeightMatrix* ws[1] = {&w};
    float* ys[1] = {y};
    matmul_group(ws, ys, 1, x, n_tok, pool);  // a group of one: the same quantization, split and tiles
}

void matmul_group(const WeightMatrix* const* ws, float* const* ys, int count, const float* x, int64_t n_tok,
                  ThreadPool& pool) {
    if (count < 1 || count > kMaxGroup)
        throw std::invalid_argument("matmul_group: " + std::to_string(count) + " matrices (1.." +
                                    std::to_string(kMaxGroup) + ")");
    const int64_t n_in = ws[0]->n_in;
    for (int i = 0; i < count; ++i) {
        check(*ws[i]);
        if (ws[i]->n_in != n_in)
            throw std::invalid_argument("matmul_group: matrices read inputs of different sizes (" +
                                        std::to_string(n_in) + ", " + std::to_string(ws[i]->n_in) + ")");
    }
    if (n_tok <= 0) return;

    // One activation buffer per distinct weight type; act_of[i] is matrix i's.
    struct Act {
        TensorType type;
        const uint8_t* data;
        size_t stride;
    };
    Act acts[kMaxGroup];
    int n_act = 0, act_of[kMaxGroup];
    for (int i = 0; i < count; ++i) {
        int a = 0;
        while (a < n_act && acts[a].type != ws[i]->type) ++a;
        if (a == n_act) acts[n_act++] = Act{ws[i]->type, reinterpret_cast<const uint8_t*>(x), (size_t)n_in * sizeof(float)};
        act_of[i] = a;
    }
    thread_local ActBuffer bufs[kMaxGroup];
    uint8_t* dsts[kMaxGroup] = {};
    int n_quant = 0, quant_act[kMaxGroup];
    for (int a = 0; a < n_act; ++a) {
        if (acts[a].type == TensorType::F32) continue;  // F32 weights read x directly
        // Round rows to 64 bytes so each starts on its own cache line.
        acts[a].stride = (act_row_bytes_ext(acts[a].type, n_in) + 63) & ~(size_t)63;
        dsts[a] = bufs[a].get(acts[a].stride * (size_t)n_tok);
        acts[a].data = dsts[a];
        quant_act[n_quant++] = a;
    }
    if (n_quant > 0) {
        auto quant = [&](int64_t b, int64_t e, int) {
            for (int64_t u = b; u < e; ++u) {
                const Act& A = acts[quant_act[u / n_tok]];
                const int64_t t = u % n_tok;
                uint8_t* row = dsts[quant_act[u / n_tok]] + (size_t)t * A.stride;
                quantize_act_row_fast(A.type, x + t * n_in, row, n_in);
                add_act_row_extras(A.type, row, n_in);
            }
        };
        // Many rows: spread the quantization too; each row still once.
        const int64_t units = (int64_t)n_quant * n_tok;
        if (n_tok >= 4 && pool.size() > 1) pool.parallel_for(units, 1, quant);
        else quant(0, units, 0);
    }

    // Rows of all matrices, concatenated; a chunk may span two matrices.
    int64_t first_row[kMaxGroup + 1] = {0};
    TileFn tiles[kMaxGroup];
    for (int i = 0; i < count; ++i) {
        first_row[i + 1] = first_row[i] + ws[i]->n_out;
        tiles[i] = choose_tile(ws[i]->type, n_tok);  // by measurement, per row bucket
    }
    pool.parallel_for(first_row[count], kRowGrain, [&](int64_t b, int64_t e, int) {
        for (int i = 0; i < count; ++i) {
            const int64_t lo = std::max(b, first_row[i]), hi = std::min(e, first_row[i + 1]);
            if (lo >= hi) continue;
            const WeightMatrix& w = *ws[i];
            const Act& A = acts[act_of[i]];
            const int64_t r0 = lo - first_row[i];
            tiles[i](w.n_in, static_cast<const uint8_t*>(w.data) + (size_t)r0 * w.row_bytes, w.row_bytes, hi - lo,
                     A.data, A.stride, n_tok, ys[i] + r0, w.n_out);
        }
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
