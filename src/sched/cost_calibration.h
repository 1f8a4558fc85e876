// The row cost curves the adaptive proposer plans with (spec/cost_model.h),
// measured on this machine: a forward of n rows (verification-shaped: every
// row wants logits) timed for a few row counts, in the sequence slot given,
// past its committed prefix and never committed, so the cache's contents are
// untouched. One curve per (model file, thread count) per process, shared by
// every proposer made after it and corrected online by all of them; the first
// request pays the calibration (about a dozen forwards), later ones none.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "kv/kv_cache.h"
#include "model/transformer.h"
#include "spec/cost_model.h"

namespace specdec {
class ThreadPool;
}

namespace specdec::sched {

struct CalibrationTarget {
    model::Transformer* model = nullptr;
    kv::KvCache* cache = nullptr;
    ThreadPool* pool = nullptr;
    std::string key;  // the model file (with the thread count, the curve's identity)
};

// The process's curve for `t` (calibrated now if this is its first use) over
// rows 1..max_rows; `rows` are the counts measured, the rest interpolated.
// Also returns how long the calibration took (0 when the curve was cached).
std::shared_ptr<spec::RowCostCurve> row_cost_curve(const CalibrationTarget& t, int max_rows,
                                                   std::span<const int> rows, double* calibration_s = nullptr);

// A timer of verification-shaped forwards for `t`, in sequence `seq`.
spec::ForwardTimer forward_timer(const CalibrationTarget& t, int seq);

}  // namespace specdec::sched
