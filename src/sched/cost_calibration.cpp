#include "sched/cost_calibration.h"

#include <map>
#include <mutex>

#include "core/clock.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/forward_batch.h"

namespace specdec::sched {

spec::ForwardTimer forward_timer(const CalibrationTarget& t, int seq) {
    SPECDEC_CHECK(t.model && t.cache && t.pool, "cost calibration: model, cache and pool are required");
    SPECDEC_CHECK(seq >= 0 && seq < t.cache->n_seq(), "cost calibration: no sequence ", seq);
    auto batch = std::make_shared<model::ForwardBatch>();
    auto result = std::make_shared<model::ForwardResult>();
    return [t, seq, batch, result](int rows) -> double {
        const int from = t.cache->committed(seq);
        const int room = t.cache->n_ctx() - from;
        if (rows < 1 || rows > room) return 0.0;  // no room to time it: left unmeasured
        batch->clear();
        // A chain hanging off the committed prefix, logits for every row, as
        // a verification asks; nothing is committed, so the rows are dead.
        for (int i = 0; i < rows; ++i) batch->add(1, from + i, seq, i - 1, true);
        const double t0 = now_s();
        t.model->forward(*batch, *t.cache, *t.pool, *result);
        return now_s() - t0;
    };
}

std::shared_ptr<spec::RowCostCurve> row_cost_curve(const CalibrationTarget& t, int max_rows,
                                                   std::span<const int> rows, double* calibration_s) {
    static std::mutex mu;
    static std::map<std::string, std::shared_ptr<spec::RowCostCurve>> curves;
    const std::string key = t.key + "|threads=" + std::to_string(t.pool ? t.pool->size() : 0);
    std::lock_guard lk(mu);
    if (calibration_s) *calibration_s = 0;
    auto& c = curves[key];
    if (c && c->max_rows() >= max_rows) return c;
    auto curve = std::make_shared<spec::RowCostCurve>(max_rows);
    const double t0 = now_s();
    spec::calibrate(*curve, forward_timer(t, 0), rows);
    if (calibration_s) *calibration_s = now_s() - t0;
    SPECDEC_CHECK(!curve->empty(), "cost calibration of ", t.key, ": no forward could be timed (context full)");
    c = curve;
    return c;
}

}  // namespace specdec::sched
