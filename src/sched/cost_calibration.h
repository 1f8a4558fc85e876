// The row cost curves the adaptive proposer plans with (spec/cost_model.h),
// measured on this machine: a forward of n rows (verification-shaped: every
// row wants logits) timed for a few row counts, in the sequence slot given,
// past its committed prefix and never committed, so the cache's contents are
// untouched. One curve per (model file, variant, thread count) per process, shared by
// every proposer made after it and corrected online by all of them.
//
// The calibrated points are also kept in a file (row-costs.json in
// $SPECDEC_CACHE_DIR, else $XDG_CACHE_HOME/specdec, else ~/.cache/specdec),
// keyed by CPU name, model file (path, size, mtime), variant, thread count, forced
// ISA level and engine version, so only the first process on a machine pays
// the calibration (the best of 3 timings per row count: about 3 s for the
// 1.5B target and 0.5B draft on two cores). SPECDEC_COST_CACHE=off skips the file (always calibrate). A missing
// or unreadable file just means calibrating; a cache that cannot be written
// is not an error.
//
// Only calibrations go to the file, never a process's online corrections: a
// process's rounds are timed under whatever else runs beside it (a loaded
// server, a test suite's parallel clients), and a correction written back
// would hold every later process to those costs. Worse, it sticks where it is
// too high: the planner then avoids those row counts and never times them
// again (seen: a curve corrected under test load kept t(3), t(4) 1.4x above
// their quiet cost, so auto never drafted 2-3 tokens). Each process corrects
// its own copy from its own rounds.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "kv/kv_cache.h"
#include "model/eagle3_forward.h"
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
    std::string path;     // the model file
    std::string variant;  // what else tells this model apart from the file's full one ("layers=0-11"), or ""
    // Set: times the forwards instead of model/cache (a drafter that is not a
    // Transformer, e.g. an EAGLE-3 head: eagle3_forward_timer); pool still
    // names the thread count of the key.
    spec::ForwardTimer timer;
};

// Where a curve came from.
enum class CostOrigin { Calibrated, File, Process };
inline const char* cost_origin_name(CostOrigin o) {
    return o == CostOrigin::File ? "file" : o == CostOrigin::Process ? "process" : "calibrated";
}
struct CostSource {
    CostOrigin origin = CostOrigin::Calibrated;
    double calibration_s = 0;  // time the calibration took (0 unless calibrated now)
};

// The process's curve for `t` over rows 1..max_rows: this process's (shared
// and corrected online), else the cache file's, else calibrated now (`rows`
// are the counts measured, the rest interpolated) and written to the file.
std::shared_ptr<spec::RowCostCurve> row_cost_curve(const CalibrationTarget& t, int max_rows,
                                                   std::span<const int> rows, CostSource* src = nullptr);

// Where the file lives ("" when SPECDEC_COST_CACHE=off or no directory is known).
std::string cost_cache_path();

// A timer of verification-shaped forwards for `t`, in sequence `seq`.
spec::ForwardTimer forward_timer(const CalibrationTarget& t, int seq);

// The same for an EAGLE-3 head's forwards (a draft chain of `rows` rows, every
// one with logits, past sequence `seq`'s committed rows of the head's cache,
// never committed), in `pool`.
spec::ForwardTimer eagle3_forward_timer(model::Eagle3Forward& fwd, kv::KvCache& cache, ThreadPool& pool, int seq);

}  // namespace specdec::sched
