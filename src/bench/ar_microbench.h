// AR micro-benchmark (issue #4): prefill and decode throughput, the cost of a
// verification-like forward of N rows relative to one row, and peak memory.
#pragma once

#include "bench/bench_runner.h"

namespace specdec::bench {

// Appends one row per thread count to r.micro (and the token workload to
// r.meta["micro_tokens"] for the llama.cpp baseline).
void run_ar_micro(BenchResult& r);

}  // namespace specdec::bench
