// Lossless sampling: the tokens speculative decoding emits follow the target's
// own distribution exactly. A tiny synthetic target (16 tokens) and an
// close synthetic draft (6 tokens generated per seed, so rounds carry
// several drafts); many seeds; the joint distribution of the 2nd and
// 3rd generated tokens (both produced by verification rounds: accepts,
// residual samples and bonus tokens) is compared with the exact target joint,
// computed by enumeration, with a chi-square test at false-alarm rate 1e-4 per
// method. A negative control (sampling from the draft) must fail the same test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "sched/sync_scheduler.h"
#include "spec/adaptive_proposer.h"
#include "spec/draft_model_proposer.h"
#include "spec/lookup_first_proposer.h"
#include "unit/distribution_test_support.h"
#include "unit/spec_test_support.h"

using namespace specdec;

namespace {

constexpr int kV = 16;
const std::vector<int32_t> kPrompt{1, 2, 3};

sample::SamplingParams sampling() {
    sample::SamplingParams p;
    p.temperature = 0.9f;
    p.top_k = 12;  // processors must apply identically to p and q
    return p;
}

// Exact joint of the 2nd and 3rd generated tokens (0-based 1 and 2).
std::vector<double> exact_joint(test::TinyModel& m, ThreadPool& pool) {
    return test::exact_pair_joint(*m.model, pool, kPrompt, 1, kV, sampling());
}
using test::chi_square;

enum class Kind {
    ChainSampled,
    TreeTopK,
    TreeSampled,
    DraftOnly,
    TreeTopKFast,
    ChainTopKAdaptive,
    TreeSampledSubset,
    ChainSampledLookupFirst,
    Auto,
};

std::vector<int> sample_counts(test::TinyModel& target, test::TinyModel& draft, ThreadPool& pool, Kind kind, int n) {
    std::vector<int> counts(kV * kV, 0);
    spec::DraftModelOptions o;
    const bool chain = kind == Kind::ChainSampled || kind == Kind::ChainTopKAdaptive ||
                       kind == Kind::ChainSampledLookupFirst || kind == Kind::Auto;
    o.shape = chain ? spec::DraftShape::Chain : spec::DraftShape::Tree;
    o.chain_k = 3;
    o.tree_topk = 3;
    o.tree_depth = 3;
    o.tree_budget = 8;
    o.sampled = kind == Kind::ChainSampled || kind == Kind::TreeSampled || kind == Kind::TreeSampledSubset ||
                kind == Kind::ChainSampledLookupFirst || kind == Kind::Auto;
    // A draft vocabulary subset of 11 of the 16 tokens, through the subset LM
    // head: the target's tokens outside it still come out at their rate.
    const std::vector<std::vector<int32_t>> corpus{{0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14}};
    const spec::VocabSubset subset = spec::VocabSubset::from_corpus(corpus, kV, 11);
    if (kind == Kind::TreeSampledSubset) o.subset = &subset;
    o.target_n_vocab = kV;
    o.params = sampling();
    if (kind == Kind::TreeTopKFast || kind == Kind::ChainTopKAdaptive) {
        // Deterministic drafts ranked straight from the logits (partial
        // selection path): any fixed choice is verified exactly.
        o.params.top_k = 0;
        o.tree_width = 1;
        o.chain_min_prob = 0.3f;
    }
    std::unique_ptr<spec::Proposer> owner =
        std::make_unique<spec::DraftModelProposer>(*draft.model, *draft.cache, pool, o);
    spec::LookupFirstProposer* lookup = nullptr;
    if (kind == Kind::ChainSampledLookupFirst) {
        // Prompt lookup first from 1-grams: with 16 tokens many rounds find an
        // earlier occurrence of the last token and verify its deterministic
        // continuation; the others (the first round of every seed among them)
        // verify the draft's sampled chain.
        auto l = std::make_unique<spec::LookupFirstProposer>(std::move(owner), spec::LookupFirstOptions{1, 3, 3});
        lookup = l.get();
        owner = std::move(l);
    }
    spec::AdaptiveProposer* adaptive = nullptr;
    if (kind == Kind::Auto) {
        // The cost model picks, round by round, a sampled draft chain of 1-3,
        // a lookup chain (1-grams match often in 16 tokens) or no draft, from
        // acceptance it learns as it goes: a synthetic cost curve (fixed, so
        // the test does not depend on this machine's timings) under which
        // every shape wins somewhere.
        auto t = std::make_shared<spec::RowCostCurve>(16);
        auto d = std::make_shared<spec::RowCostCurve>(16);
        for (int r = 1; r <= 16; ++r) t->set(r, 1.0 + 0.25 * (r - 1)), d->set(r, 0.15 + 0.02 * (r - 1));
        spec::AdaptiveOptions ao;
        ao.draft_max = 3;
        ao.lookup_max = 3;
        ao.lookup_min_n = 1;
        ao.explore_share = 0.3;  // frequent probes of idle drafters
        ao.learn_costs = false;
        auto a = std::make_unique<spec::AdaptiveProposer>(std::move(owner), t, d, ao);
        adaptive = a.get();
        owner = std::move(a);
    }
    spec::Proposer& prop = *owner;
    spec::NoProposer none;
    long acc = 0, drafted = 0, rounds = 0;
    // Negative control: plain sampling from the draft model.
    test::TinyModel& tgt = kind == Kind::DraftOnly ? draft : target;
    spec::Proposer& pr = kind == Kind::DraftOnly ? (spec::Proposer&)none : (spec::Proposer&)prop;
    for (int s = 0; s < n; ++s) {
        sample::SamplingParams p = sampling();
        p.seed = 1000 + s;
        sched::SyncScheduler sch({tgt.model.get(), tgt.cache.get(), &pool, 256}, pr, p, {});
        std::vector<int32_t> out;
        sched::SpecStats st;
        sch.run({kPrompt}, {6}, [&](int, int32_t t, sched::TokenSource) { out.push_back(t); return false; }, st);
        counts[out[1] * kV + out[2]]++;
        acc += st.accepted;
        drafted += st.drafted;
        rounds += st.seq_rounds;
    }
    std::printf("[ kind %d ] drafted %.2f accepted %.2f per round\n", (int)kind, (double)drafted / rounds,
                (double)acc / rounds);
    if (adaptive) {
        const spec::AdaptiveStats& as = adaptive->stats();
        std::printf("[ auto ] sequence-rounds: %lld none, %lld lookup, %lld draft\n", (long long)as.rounds_none,
                    (long long)as.rounds_lookup, (long long)as.rounds_draft);
        // Every kind of round occurs, so the test covers their mixture.
        EXPECT_GT(as.rounds_none, n / 20);
        EXPECT_GT(as.rounds_lookup, n / 20);
        EXPECT_GT(as.rounds_draft, n / 20);
    }
    if (lookup) {
        std::printf("[ lookup first ] %lld lookup rounds, %lld draft rounds\n", (long long)lookup->lookup_rounds(),
                    (long long)lookup->draft_rounds());
        EXPECT_GT(lookup->lookup_rounds(), n / 10);  // both kinds of round occur
        EXPECT_GE(lookup->draft_rounds(), n);
    }
    return counts;
}

struct Models {
    ThreadPool pool{1};
    test::TinyModel target, draft;
    // The draft is the target with its weights shrunk: close enough that most
    // drafts are accepted, different enough that rejections and residuals occur.
    Models() : target(spec(1.0f), 32, 1), draft(spec(0.7f), 32, 1) {}
    static test::SyntheticModelSpec spec(float scale) {
        test::SyntheticModelSpec s;
        s.n_vocab = kV;
        s.weight_scale = scale;
        s.seed = 7;
        return s;
    }
};

void expect_target_distribution(Kind kind, const char* name) {
    Models m;
    const auto exact = exact_joint(m.target, m.pool);
    const int n = test::sampling_draws(20000);
    const auto counts = sample_counts(m.target, m.draft, m.pool, kind, n);
    const auto [stat, crit] = chi_square(counts, exact, n);
    std::printf("[ %s ] chi-square %.1f, critical (1e-4) %.1f\n", name, stat, crit);
    EXPECT_LT(stat, crit) << name << ": chi-square " << stat << " exceeds the 1e-4 critical value " << crit;
}

}  // namespace

TEST(SpecSampling, ChainWithSampledDraftsIsLossless) { expect_target_distribution(Kind::ChainSampled, "chain"); }
TEST(SpecSampling, TreeWithTopKDraftsIsLossless) { expect_target_distribution(Kind::TreeTopK, "tree top-k"); }
TEST(SpecSampling, TreeWithSampledDraftsIsLossless) { expect_target_distribution(Kind::TreeSampled, "tree sampled"); }
TEST(SpecSampling, ChainWithLookupFirstIsLossless) {
    expect_target_distribution(Kind::ChainSampledLookupFirst, "chain, prompt lookup first");
}

TEST(SpecSampling, TreeWithSampledDraftsOverVocabSubsetIsLossless) {
    expect_target_distribution(Kind::TreeSampledSubset, "tree sampled, vocab subset head");
}
TEST(SpecSampling, TreeWithTopKDraftsFastPathWidthOneIsLossless) {
    expect_target_distribution(Kind::TreeTopKFast, "tree top-k, fast path, width 1");
}
TEST(SpecSampling, AdaptiveTopKChainIsLossless) {
    expect_target_distribution(Kind::ChainTopKAdaptive, "adaptive top-k chain");
}

TEST(SpecSampling, AutoMixingDraftLookupAndArRoundsIsLossless) { expect_target_distribution(Kind::Auto, "auto"); }
TEST(SpecSampling, NegativeControlDraftDistributionIsRejected) {
    Models m;
    const auto exact = exact_joint(m.target, m.pool);
    const int n = test::sampling_draws(20000);
    const auto counts = sample_counts(m.target, m.draft, m.pool, Kind::DraftOnly, n);
    const auto [stat, crit] = chi_square(counts, exact, n);
    std::printf("[ draft-only control ] chi-square %.1f, critical (1e-4) %.1f\n", stat, crit);
    EXPECT_GT(stat, crit) << "the test cannot tell the draft from the target: it has no power";
}
