// ForwardBatch::argmax_only: the LM head over vocabulary slices must give each
// row exactly sample::argmax of its full logits, and that logit bit for bit;
// and the forward's buffers must not stay sized for an earlier, larger batch.
#include <gtest/gtest.h>

#include <cstring>

#include "core/thread_pool.h"
#include "io/gguf.h"
#include "model/transformer.h"
#include "sample/sampler.h"
#include "unit/model_paths.h"
#include "unit/synthetic_model.h"

using namespace specdec;

namespace {

// A chain of n rows (all wanting logits) after nothing committed.
model::ForwardBatch chain(const std::vector<int32_t>& base, int n, int n_vocab) {
    std::vector<int32_t> toks;
    for (int i = 0; i < n; ++i) toks.push_back(base[(size_t)i % base.size()] % n_vocab);
    model::ForwardBatch b;
    b.add_chain(toks, 0, 0, true);
    return b;
}

void check_argmax_matches_full(model::Transformer& m, const std::vector<int32_t>& base, int n, int threads) {
    ThreadPool pool(threads);
    kv::KvCache cache(m.kv_options(256, 1));
    model::ForwardBatch b = chain(base, n, m.config().n_vocab);
    model::ForwardResult full, greedy;
    m.forward(b, cache, pool, full);
    b.argmax_only = true;
    m.forward(b, cache, pool, greedy);  // same rows, same slots: nothing was committed
    ASSERT_EQ(full.logit_rows, greedy.logit_rows);
    EXPECT_TRUE(greedy.logits.empty());
    ASSERT_EQ(greedy.argmax.size(), (size_t)n);
    ASSERT_EQ(greedy.max_logit.size(), (size_t)n);
    for (int k = 0; k < n; ++k) {
        const float* row = full.row_logits((size_t)k);
        const int32_t want = sample::argmax(row, full.n_vocab);
        EXPECT_EQ(greedy.argmax[(size_t)k], want) << "row " << k;
        EXPECT_EQ(std::memcmp(&greedy.max_logit[(size_t)k], &row[want], sizeof(float)), 0) << "row " << k;
    }
}

// After a wide forward, a 1-row forward gives the wide buffers back.
void check_logits_shrink(model::Transformer& m, const std::vector<int32_t>& base) {
    ThreadPool pool(1);
    kv::KvCache cache(m.kv_options(256, 1));
    model::ForwardResult r;
    model::ForwardBatch wide = chain(base, 48, m.config().n_vocab);
    m.forward(wide, cache, pool, r);
    EXPECT_EQ(r.logits.capacity(), (size_t)48 * m.config().n_vocab);  // exact, no growth slack
    model::ForwardBatch one = chain(base, 1, m.config().n_vocab);
    m.forward(one, cache, pool, r);
    EXPECT_EQ(r.logits.capacity(), (size_t)m.config().n_vocab);
}

const std::vector<int32_t> kToks = {504, 3575, 282, 4649, 314, 7042, 30, 198, 260, 1005, 42, 9};

}  // namespace

TEST(LmHeadArgmax, SyntheticMatchesFullLogits) {
    for (const char* arch : {"llama", "qwen2"}) {
        test::SyntheticModelSpec s;
        s.arch = arch;
        const auto bytes = test::synthetic_model_gguf(s);
        auto f = io::GgufFile::parse(bytes.data(), bytes.size(), "synthetic");
        model::Transformer m(*f);
        check_argmax_matches_full(m, kToks, 7, 2);
    }
}

TEST(RealLmHeadArgmax, SmolLMMatchesFullLogitsAcrossSlices) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    auto f = io::GgufFile::open(path);
    model::Transformer m(*f);
    // 40 rows: slices of 6528 tokens, the last one partial.
    check_argmax_matches_full(m, kToks, 40, 2);
    check_argmax_matches_full(m, kToks, 1, 1);
    check_logits_shrink(m, kToks);
}

TEST(RealLmHeadArgmax, GemmaMatchesFullLogitsAcrossSlices) {
    SPECDEC_REQUIRE_MODEL(path, test::kGemma);
    auto f = io::GgufFile::open(path);
    model::Transformer m(*f);
    check_argmax_matches_full(m, {2, 818, 5279, 529, 7001, 563, 9079, 236761}, 33, 2);
}
