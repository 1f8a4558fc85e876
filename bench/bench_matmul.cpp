// Quantized matmul micro-benchmarks: per weight type and shape, n_tok in
// {1, 2, 4, 8, 16, 64}, 1 and 2 threads. Reports GB/s of weight bytes streamed and
// GFLOP/s (2 n_in n_out n_tok), next to the machine's measured read-bandwidth
// ceiling (BM_memory_read: the most a decode step, which streams every weight
// once, could reach).
//
// Weights rotate over copies totalling SPECDEC_BENCH_MB (default 192 MiB) so
// that, as in a real decode step, they come from DRAM rather than from cache.
// SPECDEC_ISA=scalar|avx2|avx512 picks the kernel level.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "core/fp16.h"
#include "core/page_buffer.h"
#include "core/tensor_type.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"

namespace {

using specdec::TensorType;
using specdec::ThreadPool;
using specdec::kernels::WeightMatrix;

// Offsets of the fp16 scale fields in each block type: random bytes there
// could be NaN/denormal and distort the timing, so they get a sane value.
std::vector<size_t> scale_offsets(TensorType t) {
    switch (t) {
        case TensorType::Q4_1:
        case TensorType::Q5_1:
        case TensorType::Q4_K:
        case TensorType::Q5_K: return {0, 2};
        case TensorType::Q6_K: return {208};
        default: return {0};
    }
}

struct Weights {
    specdec::PageBuffer data;  // n_copies matrices of (n_out, row_bytes), in huge pages as a model's are
    size_t matrix_bytes = 0;
    size_t n_copies = 0;
};

const Weights& weights_for(TensorType t, int64_t n_in, int64_t n_out) {
    static std::map<std::tuple<int, int64_t, int64_t>, std::unique_ptr<Weights>> cache;
    auto& slot = cache[{(int)t, n_in, n_out}];
    if (slot) return *slot;
    slot = std::make_unique<Weights>();
    Weights& w = *slot;
    w.matrix_bytes = specdec::tensor_row_bytes(t, n_in) * (size_t)n_out;
    const char* env = std::getenv("SPECDEC_BENCH_MB");
    const size_t total = (size_t)(env ? std::atol(env) : 192) << 20;
    w.n_copies = std::max<size_t>(1, total / w.matrix_bytes);
    std::vector<uint8_t> one(w.matrix_bytes);
    std::mt19937 rng(42);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    if (t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16) {
        for (size_t i = 0; i < (size_t)(n_in * n_out); ++i) {
            const float v = nd(rng);
            if (t == TensorType::F32) std::memcpy(&one[4 * i], &v, 4);
            else {
                const uint16_t h = t == TensorType::F16 ? specdec::fp32_to_fp16(v)
                                                        : specdec::fp32_to_bf16(v);
                std::memcpy(&one[2 * i], &h, 2);
            }
        }
    } else {
        for (auto& b : one) b = (uint8_t)rng();
        const size_t bb = specdec::tensor_type_traits(t).block_bytes;
        const uint16_t s = specdec::fp32_to_fp16(0.01f);
        for (size_t off = 0; off < one.size(); off += bb)
            for (size_t so : scale_offsets(t)) std::memcpy(&one[off + so], &s, 2);
    }
    w.data = specdec::PageBuffer(w.matrix_bytes * w.n_copies, "the benchmark weights", specdec::PageBuffer::Pages::Huge);
    auto* dst = static_cast<uint8_t*>(w.data.data());
    for (size_t c = 0; c < w.n_copies; ++c) std::memcpy(dst + c * w.matrix_bytes, one.data(), one.size());
    return w;
}

ThreadPool& pool_of(int n) {
    static ThreadPool p1(1), p2(2);
    return n == 1 ? p1 : p2;
}

// args: type, n_in, n_out, n_tok, threads
void BM_matmul(benchmark::State& state) {
    const auto type = (TensorType)state.range(0);
    const int64_t n_in = state.range(1), n_out = state.range(2), n_tok = state.range(3);
    ThreadPool& pool = pool_of((int)state.range(4));
    const Weights& w = weights_for(type, n_in, n_out);
    std::vector<float> x((size_t)(n_tok * n_in)), y((size_t)(n_tok * n_out));  // (n_tok, n_in), (n_tok, n_out)
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& v : x) v = nd(rng);
    size_t c = 0;
    for (auto _ : state) {
        WeightMatrix wm{type, static_cast<const uint8_t*>(w.data.data()) + c * w.matrix_bytes, n_in, n_out,
                        specdec::tensor_row_bytes(type, n_in)};
        specdec::kernels::matmul(wm, x.data(), n_tok, y.data(), pool);
        benchmark::DoNotOptimize(y.data());
        c = (c + 1) % w.n_copies;
    }
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)w.matrix_bytes);
    state.counters["FLOP"] = benchmark::Counter(2.0 * (double)n_in * (double)n_out * (double)n_tok *
                                                    (double)state.iterations(),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
    state.SetLabel(std::string(specdec::tensor_type_name(type)));
}

void args(benchmark::internal::Benchmark* b) {
    struct Shape {
        TensorType t;
        int64_t n_in, n_out;
    };
    const Shape shapes[] = {
        {TensorType::Q4_1, 576, 1536}, {TensorType::Q5_0, 896, 4864}, {TensorType::Q8_0, 896, 4864},
        // K-quants need n_in % 256 == 0: the 896x4864 FFN's down projection.
        {TensorType::Q4_K, 4864, 896}, {TensorType::Q6_K, 4864, 896}, {TensorType::F32, 896, 896},
        {TensorType::Q4_0, 896, 4864}, {TensorType::Q5_1, 896, 4864}, {TensorType::Q5_K, 4864, 896},
        {TensorType::F16, 896, 4864},  {TensorType::BF16, 896, 4864},
        // the 1.5B target's FFN (issue #4's largest model): Q4_K up/gate, Q6_K down
        {TensorType::Q4_K, 1536, 8960}, {TensorType::Q6_K, 8960, 1536},
        // and its other shapes: the Q4_K half of ffn_down, Q/O and K/V
        // projections, and the Q6_K LM head (151936 rows: 1 copy of ~190 MiB)
        {TensorType::Q4_K, 8960, 1536}, {TensorType::Q4_K, 1536, 1536}, {TensorType::Q4_K, 1536, 256},
        {TensorType::Q6_K, 1536, 151936},
    };
    for (const Shape& s : shapes)
        for (int threads : {1, 2})
            for (int64_t n_tok : {1, 2, 4, 8, 16, 64})
                b->Args({(int64_t)s.t, s.n_in, s.n_out, n_tok, threads});
    b->ArgNames({"type", "n_in", "n_out", "n_tok", "threads"});
    b->UseRealTime();
    b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_matmul)->Apply(args);

// The DRAM read-bandwidth ceiling: every pool worker sums its share of a
// buffer far larger than the caches (SPECDEC_BENCH_MB x 4), as decode streams
// the weights. args: threads.
void BM_memory_read(benchmark::State& state) {
    ThreadPool& pool = pool_of((int)state.range(0));
    const char* env = std::getenv("SPECDEC_BENCH_MB");
    const size_t n = ((size_t)(env ? std::atol(env) : 192) << 22) / sizeof(uint64_t);
    static specdec::PageBuffer page;  // huge pages, as the weights above
    if (page.bytes() != n * sizeof(uint64_t)) {
        page = specdec::PageBuffer(n * sizeof(uint64_t), "the read benchmark", specdec::PageBuffer::Pages::Huge);
        for (size_t i = 0; i < n; ++i) static_cast<uint64_t*>(page.data())[i] = i * 0x9E3779B97F4A7C15ull;
    }
    const uint64_t* buf = static_cast<const uint64_t*>(page.data());
    std::vector<uint64_t> sums(64, 0);
    for (auto _ : state) {
        pool.parallel_for((int64_t)n, 1 << 16, [&](int64_t b, int64_t e, int worker) {
            uint64_t acc[8] = {};
            int64_t i = b;
            for (; i + 8 <= e; i += 8)
                for (int k = 0; k < 8; ++k) acc[k] += buf[(size_t)(i + k)];
            for (; i < e; ++i) acc[0] += buf[(size_t)i];
            uint64_t s = 0;
            for (uint64_t a : acc) s += a;
            sums[(size_t)worker % sums.size()] += s;
        });
        benchmark::DoNotOptimize(sums.data());
    }
    state.SetBytesProcessed((int64_t)state.iterations() * (int64_t)(n * sizeof(uint64_t)));
}
BENCHMARK(BM_memory_read)->Arg(1)->Arg(2)->ArgName("threads")->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
