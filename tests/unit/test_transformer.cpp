// The forward contract: a row's logits depend only on its committed prefix and
// its own ancestors, never on which other rows share the batch.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "model/transformer.h"
#include "unit/model_paths.h"
#include "unit/synthetic_model.h"

using namespace specdec;

namespace {

struct Loaded {
    std::vector<uint8_t> bytes;
    std::unique_ptr<io::GgufFile> file;
    std::unique_ptr<model::Transformer> model;
};

Loaded load_synthetic(const std::string& arch, int n_layer = 2) {
    Loaded l;
    test::SyntheticModelSpec s;
    s.arch = arch;
    s.n_layer = n_layer;
    l.bytes = test::synthetic_model_gguf(s);
    l.file = io::GgufFile::parse(l.bytes.data(), l.bytes.size(), "synthetic");
    l.model = std::make_unique<model::Transformer>(*l.file);
    return l;
}

// Logits of each token of `toks` fed one at a time (plain AR), from `prefix` committed.
std::vector<std::vector<float>> sequential_logits(model::Transformer& m, ThreadPool& pool,
                                                  const std::vector<int32_t>& toks) {
    kv::KvCache cache(m.kv_options(128, 1));
    std::vector<std::vector<float>> out;
    model::ForwardBatch b;
    model::ForwardResult r;
    for (size_t i = 0; i < toks.size(); ++i) {
        b.clear();
        b.add(toks[i], (int32_t)i, 0, -1, true);
        m.forward(b, cache, pool, r);
        cache.commit_length(0, 1);
        out.emplace_back(r.row_logits(0), r.row_logits(0) + r.n_vocab);
    }
    return out;
}

double max_abs_diff(const float* a, const std::vector<float>& b) {
    double d = 0;
    for (size_t i = 0; i < b.size(); ++i) d = std::max(d, (double)std::fabs(a[i] - b[i]));
    return d;
}

// Runs the forward-contract checks on any model; tol bounds batch-vs-single
// differences (kernels may sum in another order for several rows).
void check_forward_contract(model::Transformer& m, const std::vector<int32_t>& prompt,
                            const std::vector<int32_t>& branch_a, const std::vector<int32_t>& branch_b, double tol) {
    ThreadPool pool(2);
    std::vector<int32_t> seq_a = prompt, seq_b = prompt;
    seq_a.insert(seq_a.end(), branch_a.begin(), branch_a.end());
    seq_b.insert(seq_b.end(), branch_b.begin(), branch_b.end());
    const auto ref_a = sequential_logits(m, pool, seq_a);
    const auto ref_b = sequential_logits(m, pool, seq_b);
    const int P = (int)prompt.size();

    // 1. The whole sequence as one chain batch.
    {
        kv::KvCache cache(m.kv_options(128, 1));
        model::ForwardBatch b;
        model::ForwardResult r;
        b.add_chain(seq_a, 0, 0, true);
        m.forward(b, cache, pool, r);
        for (size_t i = 0; i < seq_a.size(); ++i) EXPECT_LE(max_abs_diff(r.row_logits(i), ref_a[i]), tol) << "row " << i;
    }
    // 2. Prompt committed, then a tree holding both branches interleaved.
    {
        kv::KvCache cache(m.kv_options(128, 1));
        model::ForwardBatch b;
        model::ForwardResult r;
        b.add_chain(prompt, 0, 0, false);
        m.forward(b, cache, pool, r);
        cache.commit_length(0, P);
        b.clear();
        int pa = -1, pb = -1;
        std::vector<int> rows_a, rows_b;
        for (size_t j = 0; j < std::max(branch_a.size(), branch_b.size()); ++j) {
            if (j < branch_b.size()) rows_b.push_back(pb = b.add(branch_b[j], P + (int)j, 0, pb, true));
            if (j < branch_a.size()) rows_a.push_back(pa = b.add(branch_a[j], P + (int)j, 0, pa, true));
        }
        m.forward(b, cache, pool, r);
        for (size_t j = 0; j < rows_a.size(); ++j)
            EXPECT_LE(max_abs_diff(r.row_logits(rows_a[j]), ref_a[P + j]), tol) << "branch a row " << j;
        for (size_t j = 0; j < rows_b.size(); ++j)
            EXPECT_LE(max_abs_diff(r.row_logits(rows_b[j]), ref_b[P + j]), tol) << "branch b row " << j;
        // 3. Commit branch b by path: its entries move after the prefix, and the
        // next token sees exactly the sequence prompt + branch b.
        std::vector<int> spec_idx(rows_b.begin(), rows_b.end());
        cache.commit_path(0, spec_idx);
        ASSERT_EQ(cache.committed(0), P + (int)branch_b.size());
    }
    // 4. Two sequences in one batch, each its own chain.
    {
        kv::KvCache cache(m.kv_options(128, 2));
        model::ForwardBatch b;
        model::ForwardResult r;
        b.add_chain(seq_b, 0, 1, true);
        b.add_chain(seq_a, 0, 0, true);
        m.forward(b, cache, pool, r);
        for (size_t i = 0; i < seq_b.size(); ++i) EXPECT_LE(max_abs_diff(r.row_logits(i), ref_b[i]), tol);
        for (size_t i = 0; i < seq_a.size(); ++i)
            EXPECT_LE(max_abs_diff(r.row_logits(seq_b.size() + i), ref_a[i]), tol);
    }
}

}  // namespace

TEST(Transformer, ForwardContractSyntheticLlama) {
    auto l = load_synthetic("llama");
    check_forward_contract(*l.model, {1, 5, 9, 3}, {7, 8, 2}, {11, 4, 6, 10}, 1e-4);
}

TEST(Transformer, ForwardContractSyntheticQwen2) {
    auto l = load_synthetic("qwen2");
    check_forward_contract(*l.model, {3, 2, 1}, {60, 61}, {5, 6, 7}, 1e-4);
}

TEST(Transformer, ForwardContractSyntheticQwen3) {
    auto l = load_synthetic("qwen3");
    check_forward_contract(*l.model, {3, 2, 1, 9}, {60, 61, 5}, {5, 6, 7}, 1e-4);
}

TEST(Transformer, ForwardContractSyntheticSmolLM3) {
    auto l = load_synthetic("smollm3", 4);  // layer 3 has no RoPE
    ASSERT_TRUE(l.model->config().layer_no_rope[3]);
    check_forward_contract(*l.model, {3, 2, 1, 9}, {60, 61, 5}, {5, 6, 7}, 1e-4);
}

TEST(Transformer, ForwardContractSyntheticOlmo2) {
    auto l = load_synthetic("olmo2");
    check_forward_contract(*l.model, {3, 2, 1, 9}, {60, 61, 5}, {5, 6, 7}, 1e-4);
}

TEST(Transformer, ForwardContractSyntheticQwen35) {
    // Recurrent layers: each row's state comes from its parent's (tree
    // branches, two sequences, commit by path), and matches plain decoding.
    auto l = load_synthetic("qwen35", 4);
    ASSERT_TRUE(l.model->config().layer_is_recurrent[0]);
    ASSERT_FALSE(l.model->config().layer_is_recurrent[3]);
    check_forward_contract(*l.model, {3, 2, 1, 9}, {60, 61, 5}, {5, 6, 7, 8}, 1e-4);
}

class CommitPath : public ::testing::TestWithParam<std::string> {};

TEST_P(CommitPath, MatchesFromScratch) {
    auto l = load_synthetic(GetParam(), 4);
    ThreadPool pool(1);
    model::Transformer& m = *l.model;
    // Tree after prefix [1,2]: a=[3,4], b=[5,6]; commit b by path, then decode 7.
    kv::KvCache cache(m.kv_options(64, 1));
    model::ForwardBatch b;
    model::ForwardResult r;
    b.add_chain({1, 2}, 0, 0, false);
    m.forward(b, cache, pool, r);
    cache.commit_length(0, 2);
    b.clear();
    int a0 = b.add(3, 2, 0, -1, false);
    int b0 = b.add(5, 2, 0, -1, false);
    b.add(4, 3, 0, a0, false);
    int b1 = b.add(6, 3, 0, b0, false);
    m.forward(b, cache, pool, r);
    cache.commit_path(0, std::vector<int>{b0, b1});
    b.clear();
    b.add(7, 4, 0, -1, true);
    m.forward(b, cache, pool, r);
    const auto ref = sequential_logits(m, pool, {1, 2, 5, 6, 7});
    EXPECT_LE(max_abs_diff(r.row_logits(0), ref[4]), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Transformer, CommitPath, ::testing::Values("llama", "qwen35"));

TEST(Transformer, Qwen35LongChainsAndRollback) {
    // A chain longer than the per-row states kept (a prefill chunk) commits
    // whole and matches plain decoding; part of it cannot be committed, and
    // the cache can go back to the prompt's end (its checkpoint) or to 0 but
    // to no other length.
    auto l = load_synthetic("qwen35", 4);
    model::Transformer& m = *l.model;
    ThreadPool pool(2);
    std::vector<int32_t> toks;
    for (int i = 0; i < 90; ++i) toks.push_back((i * 7 + 3) % 64);
    const auto ref = sequential_logits(m, pool, toks);
    kv::KvCache cache(m.kv_options(128, 1));
    model::ForwardBatch b;
    model::ForwardResult r;
    const std::vector<int32_t> head(toks.begin(), toks.begin() + 80);
    b.add_chain(head, 0, 0, false);  // logits for the last row only (a prefill chunk)
    m.forward(b, cache, pool, r);
    EXPECT_THROW(cache.commit_length(0, 50), Error);  // row 49 has no logits: its state was not kept
    b.clear();
    b.add_chain(head, 0, 0, true);  // every row's logits: the first 64 keep their state
    m.forward(b, cache, pool, r);
    EXPECT_THROW(cache.commit_length(0, 70), Error);  // row 69 shares the tail state, which row 79 overwrote
    cache.commit_length(0, 80);
    cache.checkpoint(0);
    for (int i = 80; i < 90; ++i) {
        b.clear();
        b.add(toks[i], i, 0, -1, true);
        m.forward(b, cache, pool, r);
        EXPECT_LE(max_abs_diff(r.row_logits(0), ref[i]), 1e-4) << "row " << i;
        cache.commit_length(0, 1);
    }
    EXPECT_THROW(cache.truncate(0, 85), Error);
    cache.truncate(0, 80);  // the checkpoint
    b.clear();
    b.add(toks[80], 80, 0, -1, true);
    m.forward(b, cache, pool, r);
    EXPECT_LE(max_abs_diff(r.row_logits(0), ref[80]), 1e-4);
    cache.truncate(0, 0);
    b.clear();
    b.add(toks[0], 0, 0, -1, true);
    m.forward(b, cache, pool, r);
    EXPECT_LE(max_abs_diff(r.row_logits(0), ref[0]), 1e-4);
}

TEST(Transformer, BadBatchesAreErrors) {
    auto l = load_synthetic("llama");
    ThreadPool pool(1);
    kv::KvCache cache(l.model->kv_options(8, 1));
    model::ForwardBatch b;
    model::ForwardResult r;
    b.add(999, 0, 0, -1, true);
    EXPECT_THROW(l.model->forward(b, cache, pool, r), Error);  // token outside vocabulary
    b.clear();
    b.add(1, 0, 3, -1, true);
    EXPECT_THROW(l.model->forward(b, cache, pool, r), Error);  // unknown sequence
    b.clear();
    b.add_chain({1, 2, 3, 4, 5, 6, 7, 8, 9}, 0, 0, false);
    EXPECT_THROW(l.model->forward(b, cache, pool, r), Error);  // context overflow
    b.clear();
    b.add(1, 0, 0, -1, true);
    b.parents[0] = 5;
    EXPECT_THROW(l.model->forward(b, cache, pool, r), Error);  // parent after row
}

TEST(RealTransformer, ForwardContractSmolLM) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    auto f = io::GgufFile::open(path);
    model::Transformer m(*f);
    // Every kernel sums a row in the same order whatever the batch, so batching
    // must not change a row's logits by a single bit (tolerance 0).
    check_forward_contract(m, {504, 3575, 282, 4649, 314}, {7042, 30, 198}, {260, 1005, 42, 9}, 0.0);
}

TEST(RealTransformer, ForwardContractGemmaSlidingWindow) {
    SPECDEC_REQUIRE_MODEL(path, test::kGemma);
    auto f = io::GgufFile::open(path);
    model::Transformer m(*f);
    check_forward_contract(m, {2, 818, 5279, 529, 7001, 563}, {9079, 236761}, {496, 1023, 108}, 0.0);
}
