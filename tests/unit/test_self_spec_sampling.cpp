// Lossless sampling with a layer-skipping draft: the draft is the target's own
// file run through a subset of its layers (its own, shallower KV cache), so
// drafts are correlated with the target but not equal to it. As in
// test_spec_sampling.cpp (whose method this repeats on a 4-layer target): the
// joint distribution of the 2nd and 3rd generated tokens over many seeds
// against the exact target joint by enumeration, chi-square at false-alarm
// rate 1e-4; sampling from the draft itself must fail the same test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "sched/sync_scheduler.h"
#include "spec/draft_model_proposer.h"
#include "unit/distribution_test_support.h"
#include "unit/spec_test_support.h"

using namespace specdec;

namespace {

constexpr int kV = 16;
const std::vector<int32_t> kPrompt{1, 2, 3};

sample::SamplingParams sampling() {
    sample::SamplingParams p;
    p.temperature = 0.9f;
    p.top_k = 12;
    return p;
}

struct Models {
    ThreadPool pool{1};
    std::vector<uint8_t> bytes;
    std::unique_ptr<io::GgufFile> file;
    std::unique_ptr<model::Transformer> target, draft;
    std::unique_ptr<kv::KvCache> tcache, dcache;
    explicit Models(const std::vector<int>& keep) {
        test::SyntheticModelSpec s;
        s.n_vocab = kV;
        s.n_layer = 4;
        s.weight_scale = 1.0f;
        s.seed = 11;
        bytes = test::synthetic_model_gguf(s);
        file = io::GgufFile::parse(bytes.data(), bytes.size(), "synthetic");
        target = std::make_unique<model::Transformer>(*file);
        draft = std::make_unique<model::Transformer>(*file, keep);
        tcache = std::make_unique<kv::KvCache>(target->kv_options(32, 1));
        dcache = std::make_unique<kv::KvCache>(draft->kv_options(32, 1));
    }
};

// Exact joint of the 2nd and 3rd generated tokens (0-based 1 and 2).
std::vector<double> exact_joint(model::Transformer& m, ThreadPool& pool) {
    return test::exact_pair_joint(m, pool, kPrompt, 1, kV, sampling());
}
using test::chi_square;

enum class Kind { Chain, TreeTopK, TreeSampled, DraftOnly };

void expect_target_distribution(const std::vector<int>& keep, Kind kind, const char* name) {
    Models m(keep);
    const auto exact = exact_joint(*m.target, m.pool);
    spec::DraftModelOptions o;
    o.shape = kind == Kind::Chain ? spec::DraftShape::Chain : spec::DraftShape::Tree;
    o.chain_k = 3;
    o.tree_topk = 3;
    o.tree_depth = 3;
    o.tree_budget = 8;
    o.sampled = kind != Kind::TreeTopK;
    o.target_n_vocab = kV;
    o.params = sampling();
    spec::DraftModelProposer prop(*m.draft, *m.dcache, m.pool, o);
    spec::NoProposer none;
    // Negative control: plain sampling from the draft (its own cache as the "target").
    const bool control = kind == Kind::DraftOnly;
    model::Transformer& tgt = control ? *m.draft : *m.target;
    kv::KvCache& tcache = control ? *m.dcache : *m.tcache;
    spec::Proposer& pr = control ? (spec::Proposer&)none : (spec::Proposer&)prop;
    const int n = test::sampling_draws(20000);
    std::vector<int> counts(kV * kV, 0);
    long acc = 0, drafted = 0, rounds = 0;
    for (int s = 0; s < n; ++s) {
        sample::SamplingParams p = sampling();
        p.seed = 5000 + s;
        sched::SyncScheduler sch({&tgt, &tcache, &m.pool, 256}, pr, p, {});
        std::vector<int32_t> out;
        sched::SpecStats st;
        sch.run({kPrompt}, {6}, [&](int, int32_t t, sched::TokenSource) { out.push_back(t); return false; }, st);
        counts[out[1] * kV + out[2]]++;
        acc += st.accepted;
        drafted += st.drafted;
        rounds += st.seq_rounds;
    }
    const auto [stat, crit] = chi_square(counts, exact, n);
    std::printf("[ %s ] drafted %.2f accepted %.2f per round; chi-square %.1f, critical (1e-4) %.1f\n", name,
                (double)drafted / rounds, (double)acc / rounds, stat, crit);
    if (control) {
        EXPECT_GT(stat, crit) << name << ": the draft's own distribution passed as the target's (no test power)";
    } else {
        EXPECT_GT(acc, 0) << name << ": no draft was ever accepted (the test would not exercise acceptance)";
        EXPECT_LT(stat, crit) << name << ": chi-square " << stat << " exceeds the 1e-4 critical value " << crit;
    }
}

}  // namespace

TEST(SelfSpecSampling, SkipMiddleChainIsLossless) { expect_target_distribution({0, 3}, Kind::Chain, "0,3 chain"); }
TEST(SelfSpecSampling, SkipMiddleTreeTopKIsLossless) {
    expect_target_distribution({0, 2, 3}, Kind::TreeTopK, "0,2-3 tree top-k");
}
TEST(SelfSpecSampling, PrefixTreeSampledIsLossless) {
    expect_target_distribution({0, 1}, Kind::TreeSampled, "0-1 tree sampled");
}
TEST(SelfSpecSampling, NegativeControlDraftDistributionIsRejected) {
    expect_target_distribution({0, 3}, Kind::DraftOnly, "0,3 draft only");
}
