// Which tile kernel runs a weight type for a given number of activation rows,
// chosen by measurement on this CPU rather than by ISA rank.
//
// Why: the highest level is not always the fastest. On Zen 4 the AVX-512
// level's 2-row 512-bit tiles decode one row 2.3x slower than the AVX2 tiles,
// while they win from a few rows on; on another CPU the order may differ.
// So for every weight type whose tiles are bit-identical at every level (the
// integer-dot types: QuantMatmul.TilesBitIdenticalToReferenceAnyBatch), each
// row bucket gets the level that ran fastest in a short calibration, done
// per type at first use (and kept: see below), and only when the CPU has more than
// one SIMD level to choose from (about 1 s per type on a 2-core AVX-512 Xeon VM,
// most of it streaming a flushed matrix for the buckets up to 8 rows; none on an
// AVX2-only CPU). Mixing levels across buckets cannot change a bit of any
// result, so batch invariance and llama.cpp parity hold as before.
//
// The float types (F32/F16/BF16) sum in a different order at each level, so
// they keep one level for every row count (the highest), which keeps a row's
// result independent of how many rows ran with it.
//
// The choice is kept across processes in a small file (kernel_choice_cache.h:
// kernel-choice.json in $SPECDEC_CACHE_DIR, else $XDG_CACHE_HOME/specdec, else
// ~/.cache/specdec, keyed by CPU name, highest SIMD level and build), so only a
// build's first process on a machine calibrates. SPECDEC_KERNEL_CACHE=off
// measures in every process; SPECDEC_KERNEL_CACHE=<file> moves the file.
//
// SPECDEC_ISA (or force_isa) pins every type and bucket to one level, for
// tests; it neither reads nor writes the file.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dispatch.h"

namespace specdec::kernels {

// Row buckets: 1, 2, 3-4, 5-8, 9-16, 17 and more activation rows.
constexpr int kRowBuckets = 6;
int row_bucket(int64_t n_rows);
const char* row_bucket_name(int bucket);
// The row count a bucket is calibrated at.
int64_t row_bucket_probe_rows(int bucket);

// True for types whose SIMD tiles at every level give the scalar reference's
// bits, so the level may differ between row counts.
bool tiles_exact_across_levels(TensorType type);

// The tile for n_rows activation rows of this weight type (calibrating the
// type first if needed).
TileFn choose_tile(TensorType type, int64_t n_rows);
// The level choose_tile uses for this type and bucket.
Isa chosen_isa(TensorType type, int bucket);

// How a type's kernels were chosen, for reports.
struct KernelChoiceReport {
    TensorType type{};
    std::array<Isa, kRowBuckets> isa{};
    // Calibration time per row of each (bucket, level), ns per output row
    // and activation row; empty when nothing was measured (one level only,
    // a forced level, or a float type).
    std::vector<std::array<double, kRowBuckets>> ns_per_row;  // [i]: timings of levels[i]
    std::vector<Isa> levels;                                  // the levels timed
    // "measured", "cached" (the file's measurement), "only level", "forced",
    // "float: highest level".
    std::string how;
};
KernelChoiceReport kernel_choice_report(TensorType type);
// "avx2" when every bucket uses one level, else "1:avx2 2:avx512 ...".
std::string kernel_choice_summary(TensorType type);

// The selection rule on its own (tested on synthetic timings): per bucket the
// level with the smallest time; a level within `tie` (relative) of the best
// loses to a higher one, so noise does not flip equal kernels. ns[level][bucket];
// a negative time means the level has no kernel for the type.
std::array<Isa, kRowBuckets> pick_fastest(const std::vector<std::array<double, kRowBuckets>>& ns, double tie = 0.03);

}  // namespace specdec::kernels
