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

}  // namespace specdec::test
