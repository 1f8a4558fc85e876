// EAGLE-3 heads on synthetic models: the head's forward reads speculative
// slots written by earlier forwards exactly as it reads committed ones (the
// tree mask inside the draft); the target captures each committed token's
// features in the forward that verified it, bit for bit what one plain
// forward over the final sequence gives; and greedy output of chain and tree
// drafting from a random head, and of auto choosing between the head's
// chains, lookup and plain steps, equals greedy AR, in both modes and in batches.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>

#include "model/eagle3_forward.h"
#include "sched/cost_calibration.h"
#include "sched/spec_batch.h"
#include "sched/sync_scheduler.h"
#include "spec/adaptive_proposer.h"
#include "spec/draft_model_proposer.h"
#include "spec/eagle3_proposer.h"
#include "spec/lookup_first_proposer.h"
#include "unit/distribution_test_support.h"
#include "unit/eagle3_test_support.h"
#include "unit/spec_test_support.h"

using namespace specdec;
namespace fs = std::filesystem;

namespace {

test::SyntheticModelSpec target_spec() {
    test::SyntheticModelSpec s;
    s.weight_scale = 0.6f;
    s.n_layer = 8;  // feature layers 2, 4, 5
    return s;
}

struct HeadFixture {
    std::string dir;
    std::unique_ptr<model::Eagle3Head> head;
    std::unique_ptr<model::Eagle3Forward> fwd;
    explicit HeadFixture(test::TinyModel& target, const std::string& name, uint32_t seed = 11) {
        dir = (fs::temp_directory_path() / ("specdec_e3spec_" + name + "_" + std::to_string(::getpid()))).string();
        test::HeadSpec hs;
        hs.seed = seed;
        test::write_eagle3_head(dir, hs);
        const auto& c = target.model->config();
        head = model::Eagle3Head::load(dir, {"synthetic", c.n_layer, c.n_embd, c.n_vocab});
        fwd = std::make_unique<model::Eagle3Forward>(*head, target.model->weights().tok_embd);
    }
    ~HeadFixture() { fs::remove_all(dir); }
};

}  // namespace

TEST(Eagle3Forward, SpeculativeSlotsReadLikeCommittedRows) {
    ThreadPool pool(2);
    test::TinyModel target(target_spec(), 64, 1);
    HeadFixture hf(target, "slots");
    const int H = 32, n = 5;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    std::vector<float> g((size_t)n * H);
    for (float& x : g) x = nd(rng);
    const std::vector<int32_t> toks{3, 17, 42, 8, 63};
    kv::KvCache cache(hf.fwd->kv_options(32, 1));
    // A: one forward, a chain of 5 rows.
    model::Eagle3Batch b;
    model::Eagle3Output all, one;
    b.clear();
    std::vector<int32_t> anc;
    for (int j = 0; j < n; ++j) {
        b.add(toks[j], 4 + j, 0, j, anc, true, g.data() + (size_t)j * H, H);
        anc.push_back(j);
    }
    // Four committed rows first (positions 0..3) so that the prefix is not empty.
    model::Eagle3Batch pre;
    pre.clear();
    std::vector<int32_t> panc;
    for (int j = 0; j < 4; ++j) {
        pre.add(toks[j], j, 0, j, panc, false, g.data() + (size_t)j * H, H);
        panc.push_back(j);
    }
    hf.fwd->forward(pre, cache, pool, one);
    cache.commit_length(0, 4);
    hf.fwd->forward(b, cache, pool, all);
    ASSERT_EQ(all.logit_rows.size(), (size_t)n);
    const int V = hf.head->config().draft_vocab;
    // B: one row per forward, each seeing its ancestors' uncommitted slots.
    anc.clear();
    for (int j = 0; j < n; ++j) {
        b.clear();
        b.add(toks[j], 4 + j, 0, j, anc, true, g.data() + (size_t)j * H, H);
        anc.push_back(j);
        hf.fwd->forward(b, cache, pool, one);
        for (int d = 0; d < H; ++d) ASSERT_EQ(one.prenorm[d], all.prenorm[(size_t)j * H + d]) << j;
        for (int v = 0; v < V; ++v) ASSERT_EQ(one.logits[v], all.logits[(size_t)j * V + v]) << j;
    }
    // C: committed one by one.
    for (int j = 0; j < n; ++j) {
        b.clear();
        b.add(toks[j], 4 + j, 0, 0, {}, true, g.data() + (size_t)j * H, H);
        hf.fwd->forward(b, cache, pool, one);
        cache.commit_length(0, 1);
        for (int v = 0; v < V; ++v) ASSERT_EQ(one.logits[v], all.logits[(size_t)j * V + v]) << j;
    }
    // A sibling branch (slot 1 seeing slot 0's sibling? no: a fresh branch
    // from the same parent) must not see the other branch's row.
    b.clear();
    b.add(toks[0], 9, 0, 0, {}, true, g.data(), H);
    b.add(toks[1], 9, 0, 1, {}, true, g.data() + H, H);  // sibling of row 0
    hf.fwd->forward(b, cache, pool, all);
    b.clear();
    b.add(toks[1], 9, 0, 0, {}, true, g.data() + H, H);
    hf.fwd->forward(b, cache, pool, one);
    for (int v = 0; v < V; ++v) ASSERT_EQ(one.logits[v], all.logits[(size_t)V + v]);
    // Invalid batches are errors.
    b.clear();
    b.add(toks[0], 99, 0, 0, {}, true, g.data(), H);
    EXPECT_THROW(hf.fwd->forward(b, cache, pool, one), Error);
    b.clear();
    b.add(70, 9, 0, 0, {}, true, g.data(), H);
    EXPECT_THROW(hf.fwd->forward(b, cache, pool, one), Error);
}

namespace {

// Wraps a proposer and records every feature row delivered, by position.
class FeatureSpy final : public spec::Proposer {
public:
    explicit FeatureSpy(std::unique_ptr<spec::Proposer> inner) : inner_(std::move(inner)) {}
    void begin(int seq) override {
        inner_->begin(seq);
        rows[seq].clear();
    }
    void prefill(int seq, std::span<const int32_t> h) override { inner_->prefill(seq, h); }
    void propose(std::span<const spec::ProposeInput> in, std::span<spec::DraftTree> out, Rng& rng) override {
        inner_->propose(in, out, rng);
    }
    std::span<const int> feature_layers() const override { return layers_; }
    void observe_features(const spec::TargetFeatures& f) override {
        auto& v = rows[f.seq];
        ASSERT_EQ((int)v.size(), f.pos0) << "features out of order";
        for (int r : f.rows) {
            std::vector<float> row;
            for (const auto* l : f.layers) row.insert(row.end(), l->begin() + (size_t)r * f.n_embd,
                                                      l->begin() + (size_t)(r + 1) * f.n_embd);
            v.push_back(std::move(row));
        }
    }
    std::map<int, std::vector<std::vector<float>>> rows;

private:
    std::unique_ptr<spec::Proposer> inner_;
    std::vector<int> layers_{2, 4, 8};  // 8 = the last layer's output
};

}  // namespace

TEST(Eagle3Capture, FeaturesOfAcceptedPathsEqualOnePlainForward) {
    ThreadPool pool(2);
    test::TinyModel target(target_spec(), 128, 2), twin(target_spec(), 128, 2);
    sample::SamplingParams params;
    for (auto shape : {spec::DraftShape::Chain, spec::DraftShape::Tree}) {
        spec::DraftModelOptions o;
        o.shape = shape;
        o.chain_k = 3;
        o.tree_topk = 3;
        o.tree_depth = 3;
        o.tree_budget = 8;
        o.target_n_vocab = target.n_vocab();
        FeatureSpy spy(std::make_unique<spec::DraftModelProposer>(*twin.model, *twin.cache, pool, o));
        sched::TargetContext tc{target.model.get(), target.cache.get(), &pool, 3};  // prefill in chunks of 3
        sched::SchedulerOptions so;
        so.distinct_siblings = true;
        sched::SyncScheduler s(tc, spy, params, so);
        const std::vector<std::vector<int32_t>> prompts{{1, 2, 3, 4, 5, 6, 7}, {9}};
        sched::SpecStats st;
        const auto out = test::run_collecting(s, prompts, 20, st);
        EXPECT_GT(st.accepted, 0);
        for (size_t i = 0; i < prompts.size(); ++i) {
            std::vector<int32_t> seq = prompts[i];
            seq.insert(seq.end(), out[i].begin(), out[i].end());
            // Every committed token (all but the last emitted) has its features.
            const auto& got = spy.rows[(int)i];
            ASSERT_EQ(got.size(), seq.size() - 1) << i;
            kv::KvCache cache(target.model->kv_options(128, 1));
            model::ForwardBatch b;
            model::ForwardResult r;
            b.add_chain(std::vector<int32_t>(seq.begin(), seq.end() - 1), 0, 0, false);
            b.capture_layers = {1, 3, 7};
            target.model->forward(b, cache, pool, r);
            const int E = target.model->config().n_embd;
            for (size_t p = 0; p < got.size(); ++p)
                for (int l = 0; l < 3; ++l)
                    for (int d = 0; d < E; ++d)
                        ASSERT_EQ(got[p][(size_t)l * E + d], r.hidden[l][p * E + d])
                            << "seq " << i << " position " << p << " layer " << l;
        }
    }
}

TEST(Eagle3Sched, GreedyIdentityChainAndTree) {
    // One thread: a random head accepts almost nothing, so every run is ~30
    // rounds of up to 9 tiny forwards, where pool wake-ups would dominate.
    ThreadPool pool(1);
    test::TinyModel target(target_spec(), 256, 3);
    HeadFixture hf(target, "greedy");
    const std::vector<std::vector<int32_t>> prompts{{1, 2, 3, 4}, {9, 8, 7, 9, 8, 7, 9}, {5}};
    const int n = 30;
    std::vector<std::vector<int32_t>> ref;
    for (const auto& p : prompts) ref.push_back(test::greedy_ar(target, pool, p, n));
    struct Case {
        const char* name;
        bool tree;
        int k, topk, depth, budget;
        int lookup_min = 0;
        int chunk = 128;
    };
    const std::vector<Case> cases{
        {"chain 1", false, 1, 1, 1, 2},       {"chain 4", false, 4, 1, 1, 2},
        {"tree 2/3/6", true, 1, 2, 3, 6},     {"tree 4/5/16", true, 1, 4, 5, 16},
        {"tree 3/8/24", true, 1, 3, 8, 24},   {"chain 3 lookup 2", false, 3, 1, 1, 2, 2},
        {"tree 3/4/10 catch-up chunk 2", true, 1, 3, 4, 10, 0, 2},
    };
    kv::KvCache hcache(hf.fwd->kv_options(256 + 64, 3));
    for (const auto& c : cases)
        for (spec::ExecMode mode : {spec::ExecMode::Reference, spec::ExecMode::Performance})
            for (size_t bs : {1u, 3u}) {
                spec::Eagle3ProposerOptions eo;
                eo.tree = c.tree;
                eo.chain_k = c.k;
                eo.tree_topk = c.topk;
                eo.tree_depth = c.depth;
                eo.tree_budget = c.budget;
                eo.catch_up_chunk = c.chunk;
                std::unique_ptr<spec::Proposer> prop =
                    std::make_unique<spec::Eagle3Proposer>(*hf.fwd, hcache, pool, eo);
                if (c.lookup_min > 0)
                    prop = std::make_unique<spec::LookupFirstProposer>(
                        std::move(prop), spec::LookupFirstOptions{c.lookup_min, 3, 5});
                sched::TargetContext tc{target.model.get(), target.cache.get(), &pool, 4};
                sched::SchedulerOptions so;
                so.mode = mode;
                so.distinct_siblings = true;
                so.tree_budget = c.tree ? c.budget : std::max(c.k + 1, 6);
                so.tree_depth = c.tree ? c.depth : std::max(c.k, 5);
                sched::SyncScheduler s(tc, *prop, {}, so);
                std::vector<std::vector<int32_t>> ps(prompts.begin(), prompts.begin() + (long)bs);
                sched::SpecStats st;
                const auto out = test::run_collecting(s, ps, n, st);
                for (size_t i = 0; i < bs; ++i)
                    ASSERT_EQ(out[i], ref[i]) << c.name << " mode " << sched::mode_name(mode) << " batch " << bs;
                EXPECT_GT(st.drafted, 0) << c.name;
            }
}

TEST(Eagle3Sched, AutoWithAHeadIsGreedyIdenticalUnderEveryCostModel) {
    // Auto mixes plain steps, lookup chains and the head's chains: the head
    // must get the features of every committed token, also of the rounds it
    // did not draft (else its next propose throws), and output stays AR's.
    ThreadPool pool(1);
    test::TinyModel target(target_spec(), 256, 3);
    HeadFixture hf(target, "auto");
    const std::vector<std::vector<int32_t>> prompts{{1, 2, 3, 4}, {9, 8, 7, 9, 8, 7, 9}, {5}};
    const int n = 30;
    std::vector<std::vector<int32_t>> ref;
    for (const auto& p : prompts) ref.push_back(test::greedy_ar(target, pool, p, n));
    const auto& costs = test::auto_cost_cases();
    kv::KvCache hcache(hf.fwd->kv_options(256 + 64, 3));
    for (const auto& c : costs)
        for (spec::ExecMode mode : {spec::ExecMode::Reference, spec::ExecMode::Performance})
            for (size_t bs : {1u, 3u}) {
                spec::Eagle3ProposerOptions eo;
                eo.chain_k = 4;
                spec::AdaptiveOptions ao;
                ao.draft_max = 4;
                ao.lookup_max = 4;
                ao.sibling_max = 4;  // greedy: the head's second choices may stand beside its chain
                ao.draft_keeps_accepted = false;
                if (c.tb < 1.0) ao.explore_share = 0.25;  // probes of idle drafters often
                ao.learn_costs = false;   // the synthetic curves decide, not this machine's timings
                spec::AdaptiveProposer prop(std::make_unique<spec::Eagle3Proposer>(*hf.fwd, hcache, pool, eo),
                                            test::linear_curve(c.ta, c.tb), test::linear_curve(c.da, c.db), ao);
                ASSERT_EQ(prop.feature_layers().size(), 3u);
                sched::TargetContext tc{target.model.get(), target.cache.get(), &pool, 4};
                sched::SchedulerOptions so;
                so.mode = mode;
                so.distinct_siblings = true;
                so.tree_depth = 4;
                so.tree_budget = 9;
                sched::SyncScheduler s(tc, prop, {}, so);
                std::vector<std::vector<int32_t>> ps(prompts.begin(), prompts.begin() + (long)bs);
                sched::SpecStats st;
                const auto out = test::run_collecting(s, ps, n, st);
                const std::string label = std::string(c.name) + " batch=" + std::to_string(bs) + " " +
                                          sched::mode_name(mode);
                for (size_t i = 0; i < bs; ++i) ASSERT_EQ(out[i], ref[i]) << label << " seq " << i;
                EXPECT_EQ(st.auto_none + st.auto_lookup + st.auto_draft, st.seq_rounds) << label;
                // A random head is rarely right, so once its acceptance is
                // learnt even free drafts stop paying: each case drafts with
                // the head at first (the prior), then mostly steps plainly.
                if (c.tb < 1.0) {
                    EXPECT_GT(st.auto_draft, 0) << label;
                    // Rows nearly free: its chains start with sibling leaves
                    // (the prior says the second choice is sometimes right).
                    if (c.tb < 0.05) {
                        EXPECT_GT(st.auto_sibling_drafts, 0) << label;
                    }
                } else {
                    EXPECT_GT(st.auto_none, st.auto_draft + st.auto_lookup) << label;
                }
                // Plain rounds between head rounds: the head caught up on the
                // features of what it missed (the case that needs them all).
                if (c.tb == 0.2) {
                    EXPECT_GT(st.auto_none, 0) << label;
                }
            }
}

TEST(Eagle3Sched, HeadTimerTimesWithoutCommitting) {
    ThreadPool pool(1);
    test::TinyModel target(target_spec(), 64, 1);
    HeadFixture hf(target, "timer");
    kv::KvCache hcache(hf.fwd->kv_options(32, 1));
    auto timer = sched::eagle3_forward_timer(*hf.fwd, hcache, pool, 0);
    for (int rows : {1, 4, 16}) {
        EXPECT_GT(timer(rows), 0.0) << rows;
        EXPECT_EQ(hcache.committed(0), 0) << rows;
    }
    EXPECT_EQ(timer(32), 0.0);  // no room past the committed rows: left unmeasured
    spec::RowCostCurve curve(16);
    spec::calibrate(curve, timer, std::vector<int>{1, 2, 8}, 1);
    EXPECT_TRUE(curve.measured(1) && curve.measured(2) && curve.measured(8));
}

TEST(Eagle3Sched, MissingFeaturesAreAClearError) {
    ThreadPool pool(1);
    test::TinyModel target(target_spec(), 64, 1);
    HeadFixture hf(target, "missing");
    kv::KvCache hcache(hf.fwd->kv_options(96, 1));
    spec::Eagle3Proposer p(*hf.fwd, hcache, pool, {});
    p.begin(0);
    const std::vector<int32_t> hist{1, 2, 3};
    spec::ProposeInput in{0, hist, 4};
    spec::DraftTree t;
    Rng rng(1);
    try {
        p.propose(std::span(&in, 1), std::span(&t, 1), rng);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("features"), std::string::npos) << e.what();
    }
}

namespace {

// Sampled output of EAGLE-3 drafting follows the target's distribution
// exactly: the joint of the 2nd and 3rd generated tokens over many seeds
// against the exact target joint (chi-square at false-alarm rate 1e-4), as
// tests/unit/test_spec_sampling.cpp does for the draft-model methods. The
// head's drafts are deterministic (top-k of its distribution), verified as
// sampling without replacement; a 12-of-16 draft vocabulary leaves target
// tokens the head can never propose. A warm temperature without truncation
// gives a random head's drafts a fair chance of acceptance, so the accept,
// reject and bonus paths all occur often.
void expect_eagle3_lossless(bool tree) {
    constexpr int kV = 16;
    const std::vector<int32_t> prompt{1, 2, 3};
    sample::SamplingParams params;
    params.temperature = 1.5f;
    ThreadPool pool(1);
    test::SyntheticModelSpec ts = target_spec();
    ts.n_vocab = kV;
    ts.weight_scale = 0.15f;  // a flat target: drafts are often accepted
    test::TinyModel target(ts, 32, 1);
    const std::string dir =
        (fs::temp_directory_path() / ("specdec_e3sampling_" + std::to_string(::getpid()))).string();
    test::HeadSpec hs;
    hs.vocab = kV;
    hs.draft_vocab = 12;
    hs.lm_scale = 0.2f;  // a spread draft distribution: tree and chain pick differently
    test::write_eagle3_head(dir, hs);
    const auto& c = target.model->config();
    auto head = model::Eagle3Head::load(dir, {"synthetic", c.n_layer, c.n_embd, c.n_vocab});
    fs::remove_all(dir);
    model::Eagle3Forward fwd(*head, target.model->weights().tok_embd);
    kv::KvCache hcache(fwd.kv_options(32 + 32, 1));
    spec::Eagle3ProposerOptions eo;
    eo.tree = tree;
    eo.chain_k = 3;
    eo.tree_topk = 3;
    eo.tree_depth = 3;
    eo.tree_budget = 8;
    spec::Eagle3Proposer prop(fwd, hcache, pool, eo);
    const auto exact = test::exact_pair_joint(*target.model, pool, prompt, 1, kV, params);
    const int n = test::sampling_draws(10000);
    std::vector<int> counts(kV * kV, 0);
    long accepted = 0, drafted = 0;
    sched::SchedulerOptions so;
    so.distinct_siblings = true;
    for (int s = 0; s < n; ++s) {
        sample::SamplingParams p = params;
        p.seed = 1000 + s;
        sched::SyncScheduler sch({target.model.get(), target.cache.get(), &pool, 256}, prop, p, so);
        std::vector<int32_t> out;
        sched::SpecStats st;
        sch.run({prompt}, {6}, [&](int, int32_t t, spec::TokenSource) { out.push_back(t); return false; }, st);
        counts[out[1] * kV + out[2]]++;
        accepted += st.accepted;
        drafted += st.drafted;
    }
    EXPECT_GT(accepted, n / 5) << "too few accepted drafts to test the accept path";
    const auto [stat, crit] = test::chi_square(counts, exact, n);
    std::printf("[ eagle3 %s ] %ld drafted, %ld accepted, chi-square %.1f, critical (1e-4) %.1f\n",
                tree ? "tree" : "chain", drafted, accepted, stat, crit);
    EXPECT_LT(stat, crit);
}

}  // namespace

TEST(Eagle3Sampling, ChainIsLossless) { expect_eagle3_lossless(false); }
TEST(Eagle3Sampling, TreeIsLossless) { expect_eagle3_lossless(true); }
