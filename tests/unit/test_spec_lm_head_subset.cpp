// Draft LM head over a vocabulary subset (model/lm_head_subset.h): its logits
// are exactly the full head's on the subset rows, and a draft proposer using
// it makes exactly the trees (tokens, scores, proposal distributions) of the
// same proposer computing full logits and masking them, which is what keeps
// verification lossless. Plus greedy identity with a subset on a real model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/rng.h"
#include "runtime/engine.h"
#include "sched/sync_scheduler.h"
#include "spec/draft_model_proposer.h"
#include "unit/model_paths.h"
#include "unit/spec_test_support.h"

using namespace specdec;

namespace {

std::vector<int32_t> some_ids(int n_vocab, int n, uint32_t seed) {
    std::vector<int32_t> all(n_vocab);
    for (int i = 0; i < n_vocab; ++i) all[i] = i;
    std::mt19937 g(seed);
    std::shuffle(all.begin(), all.end(), g);
    all.resize(n);
    std::sort(all.begin(), all.end());
    return all;
}

// Full logits of every row of a chain vs the subset head on the captured hidden state.
void expect_same_logits(model::Transformer& m, kv::KvCache& cache, ThreadPool& pool,
                        const std::vector<int32_t>& prompt, const std::vector<int32_t>& ids) {
    model::LmHeadSubset head(m, ids);
    ASSERT_EQ(head.size(), (int)ids.size());
    model::ForwardBatch b;
    b.add_chain(prompt, 0, 0, true);
    model::ForwardResult full;
    m.forward(b, cache, pool, full);
    b.capture_layers = {head.hidden_layer()};
    std::fill(b.want_logits.begin(), b.want_logits.end(), 0);
    model::ForwardResult cap;
    m.forward(b, cache, pool, cap);
    ASSERT_TRUE(cap.logit_rows.empty());
    ASSERT_EQ(cap.hidden.size(), 1u);
    std::vector<int> rows(prompt.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = (int)i;
    std::vector<float> sub;
    head.logits(cap.hidden[0].data(), rows, pool, sub);
    ASSERT_EQ(sub.size(), rows.size() * ids.size());
    for (size_t r = 0; r < rows.size(); ++r)
        for (size_t j = 0; j < ids.size(); ++j)
            ASSERT_EQ(sub[r * ids.size() + j], full.row_logits(r)[ids[j]]) << "row " << r << " id " << ids[j];
}

}  // namespace

TEST(SpecLmHeadSubset, LogitsEqualFullHeadOnSubsetRows) {
    test::SyntheticModelSpec s;
    s.arch = "qwen2";
    s.n_vocab = 96;
    test::TinyModel m(s, 64, 1);
    ThreadPool pool(2);
    expect_same_logits(*m.model, *m.cache, pool, {1, 5, 9, 33, 2, 71}, some_ids(96, 30, 1));
    expect_same_logits(*m.model, *m.cache, pool, {4}, {0, 95});
}

TEST(SpecLmHeadSubset, RejectsBadIds) {
    test::TinyModel m({}, 32, 1);
    EXPECT_THROW(model::LmHeadSubset(*m.model, {}), Error);
    EXPECT_THROW(model::LmHeadSubset(*m.model, {3, 2}), Error);
    EXPECT_THROW(model::LmHeadSubset(*m.model, {1, 64}), Error);
}

// The same proposer with the subset head and with full logits + mask: same
// trees, bit for bit, over several rounds of a history that grows by the
// first draft of each round (so the caches roll back and catch up too).
TEST(SpecLmHeadSubset, ProposerTreesIdenticalToMaskedFullLogits) {
    constexpr int kV = 64;
    std::vector<std::vector<int32_t>> corpus{some_ids(kV, 24, 3)};
    const spec::VocabSubset subset = spec::VocabSubset::from_corpus(corpus, kV, 24);
    struct Case {
        const char* name;
        spec::DraftShape shape;
        float temp;
        int top_k;
        float rep;
        bool sampled;
        int width;
    };
    const Case cases[] = {
        {"greedy chain", spec::DraftShape::Chain, 0.0f, 0, 1.0f, false, 0},
        {"greedy tree", spec::DraftShape::Tree, 0.0f, 0, 1.0f, false, 0},
        {"top-k tree, processors", spec::DraftShape::Tree, 0.8f, 10, 1.3f, false, 0},
        {"top-k tree width 1, penalty", spec::DraftShape::Tree, 0.8f, 0, 1.3f, false, 1},
        {"sampled chain", spec::DraftShape::Chain, 0.9f, 0, 1.0f, true, 0},
        {"sampled tree, penalty", spec::DraftShape::Tree, 0.7f, 12, 1.2f, true, 0},
    };
    test::SyntheticModelSpec s;
    s.n_vocab = kV;
    s.weight_scale = 0.8f;
    for (const Case& c : cases) {
        test::TinyModel a(s, 128, 1), b(s, 128, 1);
        ThreadPool pool(1);
        spec::DraftModelOptions o;
        o.shape = c.shape;
        o.chain_k = 4;
        o.tree_topk = 3;
        o.tree_depth = 4;
        o.tree_budget = 12;
        o.tree_width = c.width;
        o.sampled = c.sampled;
        o.target_n_vocab = kV;
        o.params.temperature = c.temp;
        o.params.top_k = c.top_k;
        o.params.repeat_penalty = c.rep;
        o.subset = &subset;
        o.subset_lm_head = true;
        spec::DraftModelProposer with_head(*a.model, *a.cache, pool, o);
        o.subset_lm_head = false;
        spec::DraftModelProposer masked(*b.model, *b.cache, pool, o);
        ASSERT_TRUE(with_head.uses_subset_head());
        ASSERT_FALSE(masked.uses_subset_head());
        std::vector<int32_t> hist{1, 7, 3, 12, 5};
        with_head.begin(0);
        masked.begin(0);
        with_head.prefill(0, hist);
        masked.prefill(0, hist);
        Rng ra(11), rb(11);
        int nodes = 0;
        for (int round = 0; round < 5; ++round) {
            spec::ProposeInput in;
            in.seq = 0;
            in.history = hist;
            in.max_nodes = 64;
            spec::DraftTree ta, tb;
            with_head.propose({&in, 1}, {&ta, 1}, ra);
            masked.propose({&in, 1}, {&tb, 1}, rb);
            SCOPED_TRACE(std::string(c.name) + ", round " + std::to_string(round));
            ASSERT_EQ(ta.tokens, tb.tokens);
            ASSERT_EQ(ta.parents, tb.parents);
            ASSERT_EQ(ta.scores, tb.scores);
            ASSERT_EQ(ta.q_of, tb.q_of);
            ASSERT_EQ(ta.q_pool, tb.q_pool);
            for (int i = 1; i < ta.size(); ++i) EXPECT_TRUE(subset.contains(ta.tokens[i])) << ta.tokens[i];
            nodes += ta.size() - 1;
            hist.push_back(ta.size() > 1 ? ta.tokens[1] : 0);
            hist.push_back(9);  // a "bonus" the draft did not propose: the cache must roll back
        }
        EXPECT_GT(nodes, 5) << c.name;
    }
}

// Greedy speculative output with a subset (subset head on) equals greedy AR.
TEST(RealSpecLmHeadSubset, GreedyChainAndTreeWithSubsetEqualAr) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    runtime::EngineOptions eo;
    eo.model_path = path;
    eo.n_ctx = 512;
    eo.n_threads = 2;
    auto target = runtime::Engine::load(eo);
    auto draft = runtime::Engine::load(eo);
    const auto dir = std::filesystem::temp_directory_path();
    const std::string corpus = (dir / "specdec_lm_head_subset_corpus.jsonl").string();
    {
        std::ofstream f(corpus);
        f << "{\"turns\": [\"def add(a, b):\\n    return a + b\\n\", \"The colours of the rainbow are red, "
             "orange, yellow, green, blue, indigo and violet.\"]}\n";
    }
    runtime::GenerateRequest req;
    req.prompt = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n";
    req.max_tokens = 40;
    req.ignore_eos = true;
    const auto ref = runtime::generate_ar(*target, req).tokens;
    for (const char* m : {"chain", "tree"}) {
        sched::SpecConfig c;
        c.method = sched::parse_method(m);
        c.draft_k = 4;
        c.tree_budget = 10;
        c.tree_depth = 4;
        c.vocab_subset_n = 4096;  // of 49152
        c.vocab_subset_path = (dir / ("specdec_lm_head_subset_" + std::string(m) + ".txt")).string();
        std::filesystem::remove(c.vocab_subset_path);
        c.vocab_corpus_path = corpus;
        sched::SpecStats st;
        const auto r = sched::generate_speculative(*target, draft.get(), req, c, &st);
        EXPECT_EQ(r.tokens, ref) << m;
        EXPECT_GT(st.accepted, 0) << m;
    }
}
