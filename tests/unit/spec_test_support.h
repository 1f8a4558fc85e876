// Test support for speculative decoding on synthetic models: a loaded tiny
// model with its own cache, and a plain one-token-per-forward AR reference.
#pragma once

#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "io/gguf.h"
#include "kv/kv_cache.h"
#include "model/transformer.h"
#include "sample/sampler.h"
#include "sched/sync_scheduler.h"
#include "spec/cost_model.h"
// GCC 12 reports a false -Wrestrict inside std::string operator+ once the
// synthetic writer is inlined into a large test; the code is fine.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#include "unit/synthetic_model.h"
#pragma GCC diagnostic pop

namespace specdec::test {

struct TinyModel {
    std::vector<uint8_t> bytes;
    std::unique_ptr<io::GgufFile> file;
    std::unique_ptr<model::Transformer> model;
    std::unique_ptr<kv::KvCache> cache;

    TinyModel(const SyntheticModelSpec& s, int n_ctx, int n_seq) {
        bytes = synthetic_model_gguf(s);
        file = io::GgufFile::parse(bytes.data(), bytes.size(), "synthetic");
        model = std::make_unique<model::Transformer>(*file);
        cache = std::make_unique<kv::KvCache>(model->kv_options(n_ctx, n_seq));
    }
    int n_vocab() const { return model->config().n_vocab; }
};

// Greedy AR, one row per forward (the decoding every method must reproduce).
inline std::vector<int32_t> greedy_ar(TinyModel& m, ThreadPool& pool, const std::vector<int32_t>& prompt, int n) {
    kv::KvCache cache(m.model->kv_options(m.cache->n_ctx(), 1));
    model::ForwardBatch b;
    model::ForwardResult r;
    b.add_chain(prompt, 0, 0, false);
    m.model->forward(b, cache, pool, r);
    cache.commit_length(0, (int)prompt.size());
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
        const int32_t t = sample::argmax(r.row_logits(0), m.n_vocab());
        out.push_back(t);
        if (i + 1 == n) break;
        b.clear();
        b.add(t, cache.committed(0), 0, -1, true);
        m.model->forward(b, cache, pool, r);
        cache.commit_length(0, 1);
    }
    return out;
}

// The greedy-identity setup: a target, an unrelated draft (low acceptance,
// many rejections), the target's twin as draft (every draft accepted), and
// three prompts (the second repeats "9 8 7", so prompt lookup finds matches).
struct GreedyModels {
    static SyntheticModelSpec target_spec() {
        SyntheticModelSpec s;
        s.weight_scale = 0.6f;
        return s;
    }
    static SyntheticModelSpec other_spec() {
        SyntheticModelSpec s = target_spec();
        s.seed = 99;
        return s;
    }
    TinyModel target{target_spec(), 256, 3}, other{other_spec(), 256, 3}, self{target_spec(), 256, 3};
    const std::vector<std::vector<int32_t>> prompts{{1, 2, 3, 4}, {9, 8, 7, 9, 8, 7, 9}, {5}};
};

// Runs the scheduler over the prompts, n tokens each, and returns what each emitted.
inline std::vector<std::vector<int32_t>> run_collecting(sched::SyncScheduler& s,
                                                         const std::vector<std::vector<int32_t>>& prompts, int n,
                                                         sched::SpecStats& st) {
    std::vector<std::vector<int32_t>> out(prompts.size());
    s.run(prompts, std::vector<int>(prompts.size(), n),
          [&](int i, int32_t t, sched::TokenSource) {
              out[i].push_back(t);
              return false;
          },
          st);
    return out;
}

// t(n) = a + b * (n - 1) for n = 1..max_rows: a synthetic row cost curve.
inline std::shared_ptr<spec::RowCostCurve> linear_curve(double a, double b, int max_rows = 32) {
    auto c = std::make_shared<spec::RowCostCurve>(max_rows);
    for (int n = 1; n <= max_rows; ++n) c->set(n, a + b * (n - 1));
    return c;
}

// Synthetic cost models for auto: the target's and the draft's linear curves.
struct CostCase {
    const char* name;
    double ta, tb, da, db;  // target t(n) = ta + tb (n - 1); draft da + db (n - 1)
};
// Drafts that never pay, that always pay, and a case in between.
inline const std::vector<CostCase>& auto_cost_cases() {
    static const std::vector<CostCase> cases{
        {"drafts never pay", 1.0, 1.0, 0.5, 0.5},
        {"drafts always pay", 1.0, 0.01, 0.01, 0.001},
        {"in between", 1.0, 0.2, 0.2, 0.05},
    };
    return cases;
}

}  // namespace specdec::test
