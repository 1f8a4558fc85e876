// Turns a BenchResult into bench.json, bench.csv and bench.md.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "bench/bench_runner.h"

namespace specdec::bench {

// Fills TurnRecord::speedup: the record's tok/s over the tok/s of the AR record
// of the same conversation turn with the same threads, temperature and batch
// (external llama.cpp records: specdec AR at batch 1).
void compute_speedups(BenchResult& r);

// Summary per configuration: decode tok/s, speedup mean/p50/p90/p99, mean
// accept length, time split.
nlohmann::json summarize(const BenchResult& r);

nlohmann::json record_json(const BenchResult& r, const TurnRecord& t);
nlohmann::json to_json(const BenchResult& r);

// Writes bench.json, bench.csv and bench.md into r.opts.out_dir.
void write_reports(const BenchResult& r);

// The markdown report (also printed to stdout).
std::string markdown(const BenchResult& r);

}  // namespace specdec::bench
