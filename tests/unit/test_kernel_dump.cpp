// Kernel dumper for the bit-level parity test against ggml
// (tests/python/test_kernel_parity_ggml.py). Skipped unless SPECDEC_KDUMP_IN
// and SPECDEC_KDUMP_OUT are set.
//
// Input (little endian): "KDMP", int32 weight type, int64 n_in, int64 n_rows,
// int64 n_tok, uint64 row_bytes, then n_rows weight rows of row_bytes bytes,
// then n_tok activation rows of n_in floats.
// Output: int32 n_levels, uint64 act_row_bytes, the n_tok activation rows
// quantized to the weight's dot type (quantize_act_row, act_row_bytes each),
// then for each ISA level 0 (scalar) .. n_levels-1 the product y (n_tok, n_rows)
// of matmul at that level on a 1-thread pool.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/quantize_act.h"

namespace specdec {
namespace {

using namespace specdec::kernels;

template <class T>
T read_pod(std::ifstream& in) {
    T v{};
    in.read(reinterpret_cast<char*>(&v), sizeof(T));
    return v;
}

template <class T>
void write_pod(std::ofstream& out, const T& v) {
    out.write(reinterpret_cast<const char*>(&v), sizeof(T));
}

TEST(KernelDump, Dump) {
    const char* in_path = std::getenv("SPECDEC_KDUMP_IN");
    const char* out_path = std::getenv("SPECDEC_KDUMP_OUT");
    if (!in_path || !out_path) GTEST_SKIP() << "SPECDEC_KDUMP_IN/OUT not set";
    std::ifstream in(in_path, std::ios::binary);
    ASSERT_TRUE(in.good()) << in_path;
    char magic[4];
    in.read(magic, 4);
    ASSERT_EQ(std::memcmp(magic, "KDMP", 4), 0);
    const auto type = (TensorType)read_pod<int32_t>(in);
    const auto n_in = read_pod<int64_t>(in);
    const auto n_rows = read_pod<int64_t>(in);
    const auto n_tok = read_pod<int64_t>(in);
    const auto row_bytes = read_pod<uint64_t>(in);
    ASSERT_TRUE(is_supported_weight_type(type));
    std::vector<uint8_t> w(row_bytes * (size_t)n_rows);
    in.read(reinterpret_cast<char*>(w.data()), (std::streamsize)w.size());
    std::vector<float> x((size_t)(n_tok * n_in));
    in.read(reinterpret_cast<char*>(x.data()), (std::streamsize)(x.size() * sizeof(float)));
    ASSERT_TRUE(in.good()) << "short input";

    std::ofstream out(out_path, std::ios::binary);
    const int32_t n_levels = (int32_t)cpu_max_isa() + 1;
    const uint64_t arb = act_row_bytes(type, n_in);
    write_pod(out, n_levels);
    write_pod(out, arb);
    std::vector<uint8_t> act(arb);
    for (int64_t t = 0; t < n_tok; ++t) {
        quantize_act_row(type, x.data() + t * n_in, act.data(), n_in);
        out.write(reinterpret_cast<const char*>(act.data()), (std::streamsize)arb);
    }
    const WeightMatrix wm{type, w.data(), n_in, n_rows, (size_t)row_bytes};
    ThreadPool pool(1);
    const Isa saved = active_isa();
    std::vector<float> y((size_t)(n_tok * n_rows));
    for (int level = 0; level < n_levels; ++level) {
        force_isa((Isa)level);
        matmul(wm, x.data(), n_tok, y.data(), pool);
        out.write(reinterpret_cast<const char*>(y.data()), (std::streamsize)(y.size() * sizeof(float)));
    }
    force_isa(saved);
    ASSERT_TRUE(out.good());
}

}  // namespace
}  // namespace specdec
