#include "sched/cost_calibration.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "core/cache_file.h"
#include "core/clock.h"
#include "core/cpu_name.h"
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

spec::ForwardTimer eagle3_forward_timer(model::Eagle3Forward& fwd, kv::KvCache& cache, ThreadPool& pool, int seq) {
    SPECDEC_CHECK(seq >= 0 && seq < cache.n_seq(), "cost calibration: no sequence ", seq, " in the head's cache");
    auto batch = std::make_shared<model::Eagle3Batch>();
    auto result = std::make_shared<model::Eagle3Output>();
    model::Eagle3Forward* f = &fwd;
    kv::KvCache* c = &cache;
    ThreadPool* p = &pool;
    return [f, c, p, seq, batch, result](int rows) -> double {
        const int from = c->committed(seq);
        if (rows < 1 || rows >= c->n_ctx() - from) return 0.0;  // no room to time it: left unmeasured
        const int H = f->head().config().hidden;
        const std::vector<float> g((size_t)H, 0.01f);
        std::vector<int32_t> anc;
        batch->clear();
        // A draft chain: row i sees the rows before it (speculative slots).
        for (int i = 0; i < rows; ++i) {
            batch->add(1, from + i, seq, i, anc, true, g.data(), H);
            anc.push_back(i);
        }
        const double t0 = now_s();
        f->forward(*batch, *c, *p, *result);
        return now_s() - t0;
    };
}

namespace {

namespace fs = std::filesystem;

// Bump when the timed forward or the kernels change what a curve means.
// 2: the file holds calibrations only (version 1 files also held online
// corrections, possibly made under load).
constexpr int kCostCacheVersion = 2;

std::string file_identity(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return path;
    std::error_code ec;
    const fs::path abs = fs::weakly_canonical(path, ec);
    return (ec ? path : abs.string()) + "|" + std::to_string((long long)st.st_size) + "|" +
           std::to_string((long long)st.st_mtime);
}

std::string variant_part(const CalibrationTarget& t) { return t.variant.empty() ? "" : "|" + t.variant; }

std::string cache_key(const CalibrationTarget& t) {
    const char* isa = std::getenv("SPECDEC_ISA");
    // Appended piece by piece: GCC 12 at -O3 raised a false -Wrestrict on the
    // same key written as one chain of operator+ with a literal first.
    std::string k = "v";
    for (const std::string& part : {std::to_string(kCostCacheVersion), std::string("|"), cpu_model_name(),
                                    std::string("|"), file_identity(t.path), variant_part(t),
                                    std::string("|threads="), std::to_string(t.pool ? t.pool->size() : 0),
                                    std::string("|isa="), std::string(isa ? isa : "")})
        k += part;
    return k;
}

// Points [(rows, seconds)] of `key` into `curve`; false if absent or unusable.
bool load_points(const nlohmann::json& cache, const std::string& key, spec::RowCostCurve& curve) {
    const auto it = cache.find(key);
    if (it == cache.end() || !it->is_array()) return false;
    int n_set = 0;
    for (const auto& p : *it) {
        if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number()) return false;
        const int rows = p[0].get<int>();
        const double s = p[1].get<double>();
        if (rows < 1 || !(s > 0) || s > 3600) return false;
        curve.set(rows, s);
        ++n_set;
    }
    return n_set > 0;
}

nlohmann::json points_json(const spec::RowCostCurve& curve) {
    nlohmann::json pts = nlohmann::json::array();
    for (int n = 1; n <= curve.max_rows(); ++n)
        if (curve.measured(n)) pts.push_back({n, curve.seconds(n)});
    return pts;
}

}  // namespace

std::string cost_cache_path() {
    const char* off = std::getenv("SPECDEC_COST_CACHE");
    if (off && std::string(off) == "off") return "";
    const std::string dir = cache_dir();
    return dir.empty() ? "" : dir + "/row-costs.json";
}

namespace {
struct ProcessCurves {
    std::mutex mu;
    std::map<std::string, std::shared_ptr<spec::RowCostCurve>> by_key;
};
ProcessCurves& process_curves() {
    static ProcessCurves pc;
    return pc;
}
}  // namespace

std::shared_ptr<spec::RowCostCurve> row_cost_curve(const CalibrationTarget& t, int max_rows,
                                                   std::span<const int> rows, CostSource* src) {
    ProcessCurves& pc = process_curves();
    const std::string key = t.path + variant_part(t) + "|threads=" + std::to_string(t.pool ? t.pool->size() : 0);
    std::lock_guard lk(pc.mu);
    CostSource local;
    CostSource& out = src ? *src : local;
    out = CostSource{CostOrigin::Process, 0.0};
    auto& c = pc.by_key[key];
    if (c && c->max_rows() >= max_rows) return c;
    auto curve = std::make_shared<spec::RowCostCurve>(max_rows);
    const std::string path = cost_cache_path();
    const std::string fkey = cache_key(t) + "|rows=" + std::to_string(max_rows);
    nlohmann::json cache = path.empty() ? nlohmann::json::object() : read_cache_file(path);
    if (load_points(cache, fkey, *curve)) {
        out.origin = CostOrigin::File;
        c = curve;
        return c;
    }
    const double t0 = now_s();
    spec::calibrate(*curve, t.timer ? t.timer : forward_timer(t, 0), rows, 3);
    out = CostSource{CostOrigin::Calibrated, now_s() - t0};
    SPECDEC_CHECK(!curve->empty(), "cost calibration of ", t.path, ": no forward could be timed (context full)");
    if (!path.empty()) {
        cache[fkey] = points_json(*curve);  // the calibration only (see the header)
        write_cache_file(path, cache);
    }
    c = curve;
    return c;
}

}  // namespace specdec::sched
