// The synchronous speculative loop on synthetic models: greedy output of every
// method, mode, tree shape and batch size equals one-token-at-a-time greedy AR;
// SpecBatch admits and retires sequences between rounds without changing that.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <sstream>

#include "sched/spec_batch.h"
#include "sched/sync_scheduler.h"
#include "spec/draft_model_proposer.h"
#include "spec/lookup_first_proposer.h"
#include "spec/ngram_proposer.h"
#include "unit/spec_test_support.h"

using namespace specdec;

namespace {

struct Case {
    const char* name;
    spec::DraftShape shape;
    bool ngram;
    int k, topk, depth, budget;
    int width = 0;            // tree frontier width (0: topk)
    float min_prob = 0.0f;    // adaptive chain stop
    int lookup_min = 0;       // >0: prompt lookup first (LookupFirstProposer), chains of lookup_k
    int lookup_k = 8;
};

std::vector<std::vector<int32_t>> run_sched(test::TinyModel& target, test::TinyModel* draft, ThreadPool& pool,
                                            const Case& c, spec::ExecMode mode,
                                            const std::vector<std::vector<int32_t>>& prompts, int n,
                                            sched::SpecStats& st, int64_t* lookups = nullptr) {
    sample::SamplingParams params;  // greedy
    std::unique_ptr<spec::Proposer> prop;
    if (c.ngram) {
        prop = std::make_unique<spec::NgramProposer>(spec::NgramOptions{1, 3, c.k});
    } else {
        spec::DraftModelOptions o;
        o.shape = c.shape;
        o.chain_k = c.k;
        o.tree_topk = c.topk;
        o.tree_depth = c.depth;
        o.tree_budget = c.budget;
        o.tree_width = c.width;
        o.chain_min_prob = c.min_prob;
        o.target_n_vocab = target.n_vocab();
        o.params = params;
        prop = std::make_unique<spec::DraftModelProposer>(*draft->model, *draft->cache, pool, o);
        if (c.lookup_min > 0)
            prop = std::make_unique<spec::LookupFirstProposer>(
                std::move(prop), spec::LookupFirstOptions{c.lookup_min, std::max(3, c.lookup_min), c.lookup_k});
    }
    sched::TargetContext tc{target.model.get(), target.cache.get(), &pool, 256};
    sched::SchedulerOptions so;
    so.mode = mode;
    so.distinct_siblings = true;
    sched::SyncScheduler s(tc, *prop, params, so);
    std::vector<std::vector<int32_t>> out = test::run_collecting(s, prompts, n, st);
    if (lookups) {
        auto* lf = dynamic_cast<spec::LookupFirstProposer*>(prop.get());
        *lookups = lf ? lf->lookup_rounds() : -1;
    }
    return out;
}

}  // namespace

TEST(SchedSync, GreedyIdentityAllMethodsModesBatches) {
    ThreadPool pool(2);
    test::GreedyModels gm;  // an unrelated draft (rejections) and the target's twin (long accepted paths)
    test::TinyModel &target = gm.target, &other = gm.other, &self = gm.self;
    const auto& prompts = gm.prompts;
    const int n = 40;
    std::vector<std::vector<int32_t>> ref;
    for (const auto& p : prompts) ref.push_back(test::greedy_ar(target, pool, p, n));
    const std::vector<Case> cases{
        {"chain k=1", spec::DraftShape::Chain, false, 1, 4, 5, 16},
        {"chain k=4", spec::DraftShape::Chain, false, 4, 4, 5, 16},
        {"tree 2/3/6", spec::DraftShape::Tree, false, 1, 2, 3, 6},
        {"tree 4/5/16", spec::DraftShape::Tree, false, 1, 4, 5, 16},
        {"tree 3/8/24", spec::DraftShape::Tree, false, 1, 3, 8, 24},
        {"tree 4/6/12 width 1", spec::DraftShape::Tree, false, 1, 4, 6, 12, 1},
        {"tree 3/5/10 width 2", spec::DraftShape::Tree, false, 1, 3, 5, 10, 2},
        {"chain k=6 min q 0.4", spec::DraftShape::Chain, false, 6, 4, 5, 16, 0, 0.4f},
        {"ngram k=5", spec::DraftShape::Chain, true, 5, 4, 5, 16},
        // Lookup chains (8 deep, past the draft's own depth) in some rounds,
        // draft trees in the others, sequences of one batch mixed.
        {"chain k=3 lookup 1", spec::DraftShape::Chain, false, 3, 4, 5, 16, 0, 0.0f, 1},
        {"tree 3/4/10 lookup 2", spec::DraftShape::Tree, false, 1, 3, 4, 10, 0, 0.0f, 2},
    };
    for (const auto& c : cases)
        for (test::TinyModel* d : {&other, &self})
            for (spec::ExecMode mode : {spec::ExecMode::Reference, spec::ExecMode::Performance})
                for (size_t bs : {1u, 3u}) {
                    std::vector<std::vector<int32_t>> ps(prompts.begin(), prompts.begin() + bs);
                    sched::SpecStats st;
                    int64_t lookups = -1;
                    const auto out = run_sched(target, d, pool, c, mode, ps, n, st, &lookups);
                    std::ostringstream label;
                    label << c.name << " draft=" << (d == &self ? "self" : "other") << " mode=" << sched::mode_name(mode)
                          << " batch=" << bs;
                    for (size_t i = 0; i < bs; ++i) ASSERT_EQ(out[i], ref[i]) << label.str() << " seq " << i;
                    if (d == &self && !c.ngram) {
                        EXPECT_GT(st.mean_accept_len(), 1.5) << c.name;
                    }
                    EXPECT_GE(st.mean_accept_len(), 1.0);
                    // The stats count the rounds the proposer served by lookup;
                    // the second prompt repeats "9 8 7", so with it some occur.
                    if (lookups >= 0) {
                        EXPECT_EQ(st.lookup_rounds, lookups) << label.str();
                    }
                    if (c.lookup_min == 0 && !c.ngram) {
                        EXPECT_EQ(st.lookup_rounds, 0) << label.str();
                    }
                    if ((c.lookup_min > 0 || c.ngram) && bs > 1) {
                        EXPECT_GT(st.lookup_rounds, 0) << label.str();
                    }
                    EXPECT_LE(st.lookup_accepted, st.accepted) << label.str();
                    if (c.ngram) break;  // ngram ignores the draft model
                }
}

TEST(SchedSync, StopsExactlyAtMaxNewAndContextEnd) {
    ThreadPool pool(1);
    test::SyntheticModelSpec ts;
    test::TinyModel target(ts, 24, 1);
    test::TinyModel draft(ts, 24, 1);
    sample::SamplingParams params;
    spec::DraftModelOptions o;
    o.shape = spec::DraftShape::Tree;
    o.target_n_vocab = target.n_vocab();
    spec::DraftModelProposer prop(*draft.model, *draft.cache, pool, o);
    sched::SyncScheduler s({target.model.get(), target.cache.get(), &pool, 256}, prop, params, {});
    std::vector<int32_t> out;
    sched::SpecStats st;
    s.run({{1, 2, 3}}, {7}, [&](int, int32_t t, sched::TokenSource) { out.push_back(t); return false; }, st);
    EXPECT_EQ(out.size(), 7u);
    // Context of 24 with a 3-token prompt: like AR, 22 tokens fit (the last
    // emitted token is never fed), then generation ends.
    out.clear();
    s.run({{1, 2, 3}}, {100}, [&](int, int32_t t, sched::TokenSource) { out.push_back(t); return false; }, st);
    EXPECT_EQ(out.size(), 22u);
    EXPECT_EQ(out, test::greedy_ar(target, pool, {1, 2, 3}, 22));
}

// Continuous batching: sequences join and leave a running SpecBatch between
// rounds, each with its own method (chain, n-gram, tree, AR), and every one
// still gets exactly greedy AR's tokens.
TEST(SchedSpecBatch, AdmitRetireBetweenRoundsMixedMethods) {
    ThreadPool pool(2);
    test::SyntheticModelSpec ts;
    ts.weight_scale = 0.6f;
    test::TinyModel target(ts, 256, 3);
    test::TinyModel draft(ts, 256, 3);  // the target itself: long accepted paths
    sample::SamplingParams greedy;
    spec::DraftModelOptions co;
    co.shape = spec::DraftShape::Chain;
    co.chain_k = 4;
    co.target_n_vocab = target.n_vocab();
    spec::DraftModelProposer chain(*draft.model, *draft.cache, pool, co);
    spec::DraftModelOptions to = co;
    to.shape = spec::DraftShape::Tree;
    to.tree_topk = 3;
    to.tree_depth = 4;
    to.tree_budget = 10;
    spec::DraftModelProposer tree(*draft.model, *draft.cache, pool, to);  // shares the draft cache with `chain`
    spec::NgramProposer ngram(spec::NgramOptions{1, 3, 5});
    spec::NoProposer ar;
    const sched::SlotSpec chain_spec{&chain, 5, 4, true}, tree_spec{&tree, 10, 4, true}, ngram_spec{&ngram, 6, 5, true},
        ar_spec{&ar, 1, 0, true};

    const std::vector<std::vector<int32_t>> prompts{{1, 2, 3, 4}, {9, 8, 7, 9, 8, 7, 9}, {5}, {3, 3, 1}, {7, 2}};
    const int n = 30;
    std::vector<std::vector<int32_t>> ref;
    for (const auto& p : prompts) ref.push_back(test::greedy_ar(target, pool, p, n));

    sched::SpecBatch sb({target.model.get(), target.cache.get(), &pool, 256}, spec::ExecMode::Reference);
    std::vector<int> job_of(3, -1);  // slot -> prompt index
    std::vector<std::vector<int32_t>> out(prompts.size());
    const sched::OnToken on_token = [&](int slot, int32_t t, sched::TokenSource) {
        out[job_of[slot]].push_back(t);
        return false;
    };
    auto admit = [&](int slot, int job, const sched::SlotSpec& spec) {
        job_of[slot] = job;
        sb.admit(slot, prompts[job], spec, greedy, n, on_token);
    };
    auto retire_done = [&] {
        for (int s = 0; s < 3; ++s)
            if (sb.admitted(s) && !sb.running(s)) sb.retire(s);
    };

    admit(0, 0, chain_spec);
    sb.step(on_token);
    sb.step(on_token);
    admit(1, 1, ngram_spec);  // joins a running batch
    sb.step(on_token);
    admit(2, 2, ar_spec);
    sb.step(on_token);
    // Leaves early (a client that went away): its slot is reused at once, by
    // another method that shares the draft cache.
    const size_t cut = out[0].size();
    ASSERT_LT(cut, (size_t)n);
    sb.retire(0);
    admit(0, 3, tree_spec);
    int rounds = 0;
    bool fifth_admitted = false;
    while (sb.any_running() || !fifth_admitted) {
        ASSERT_LT(++rounds, 200);
        sb.step(on_token);
        retire_done();
        for (int s = 0; s < 3 && !fifth_admitted; ++s)
            if (!sb.admitted(s)) {
                admit(s, 4, chain_spec);
                fifth_admitted = true;
            }
    }
    EXPECT_EQ(out[0], std::vector<int32_t>(ref[0].begin(), ref[0].begin() + (long)cut));
    for (size_t j = 1; j < prompts.size(); ++j) EXPECT_EQ(out[j], ref[j]) << "prompt " << j;
    EXPECT_GT(sb.stats().mean_accept_len(), 1.2);
}

// Without a shared Rng each slot samples from its own seeded Rng and the drafts
// are deterministic, so a seeded request's sampled tokens do not depend on
// what else is in the batch.
TEST(SchedSpecBatch, SeededSamplingIndependentOfNeighbours) {
    ThreadPool pool(2);
    test::SyntheticModelSpec ts;
    ts.weight_scale = 0.6f;
    test::TinyModel target(ts, 256, 3);
    test::TinyModel draft(ts, 256, 3);
    spec::DraftModelOptions co;
    co.shape = spec::DraftShape::Chain;
    co.chain_k = 3;
    co.target_n_vocab = target.n_vocab();
    spec::DraftModelProposer chain(*draft.model, *draft.cache, pool, co);  // greedy drafts
    const sched::SlotSpec spec{&chain, 4, 3, true};
    sample::SamplingParams hot;
    hot.temperature = 0.9f;
    hot.seed = 5;
    const std::vector<int32_t> prompt{4, 6, 8};
    auto run = [&](bool neighbours) {
        sched::SpecBatch sb({target.model.get(), target.cache.get(), &pool, 256}, spec::ExecMode::Performance);
        std::vector<int32_t> out;
        const sched::OnToken on_token = [&](int slot, int32_t t, sched::TokenSource) {
            if (slot == 1) out.push_back(t);
            return false;
        };
        if (neighbours) {
            sample::SamplingParams other = hot;
            other.seed = 77;
            sb.admit(0, {1, 2, 3}, spec, other, 40, on_token);
            sb.step(on_token);
        }
        sb.admit(1, prompt, spec, hot, 25, on_token);
        if (neighbours) sb.admit(2, {9, 9}, spec, sample::SamplingParams{}, 10, on_token);
        while (sb.any_running()) sb.step(on_token);
        return out;
    };
    const auto alone = run(false);
    EXPECT_EQ(alone.size(), 25u);
    EXPECT_EQ(run(true), alone);
}

// Each emitted token says where it came from, as the verifier decided: a
// sequence's first token (from the prefill) and each round's last token (the
// bonus or corrected token) are the target's, the accepted draft tokens before
// it are drafts. Trees are capped at the tokens left, so no round is cut and
// the counts match the round statistics exactly: drafts == accepted, target
// tokens == sequence-rounds + one per sequence. AR: every token the target's.
TEST(SchedSync, TokenSourcesFollowTheVerifiersVerdicts) {
    ThreadPool pool(2);
    test::GreedyModels gm;
    const int n = 33;
    for (test::TinyModel* draft : {&gm.self, &gm.other, static_cast<test::TinyModel*>(nullptr)}) {
        spec::DraftModelOptions o;
        o.shape = spec::DraftShape::Chain;
        o.chain_k = 4;
        o.target_n_vocab = gm.target.n_vocab();
        std::unique_ptr<spec::Proposer> prop;
        if (draft) prop = std::make_unique<spec::DraftModelProposer>(*draft->model, *draft->cache, pool, o);
        else prop = std::make_unique<spec::NoProposer>();
        sched::SyncScheduler s({gm.target.model.get(), gm.target.cache.get(), &pool, 256}, *prop,
                               sample::SamplingParams{}, {});
        std::vector<std::vector<int32_t>> out(gm.prompts.size());
        std::vector<std::vector<sched::TokenSource>> src(gm.prompts.size());
        sched::SpecStats st;
        s.run(gm.prompts, std::vector<int>(gm.prompts.size(), n),
              [&](int i, int32_t t, sched::TokenSource from) {
                  out[i].push_back(t);
                  src[i].push_back(from);
                  return false;
              },
              st);
        const char* what = draft == &gm.self ? "self draft" : draft ? "other draft" : "ar";
        int drafts = 0, targets = 0;
        for (size_t i = 0; i < gm.prompts.size(); ++i) {
            EXPECT_EQ(out[i], test::greedy_ar(gm.target, pool, gm.prompts[i], n)) << what;
            ASSERT_EQ(src[i].size(), (size_t)n) << what;
            EXPECT_EQ(src[i].front(), sched::TokenSource::Target) << what;
            EXPECT_EQ(src[i].back(), sched::TokenSource::Target) << what << ": the last round was cut";
            // At most chain_k drafts in a row, each run ended by the target's token.
            int run = 0;
            for (sched::TokenSource f : src[i]) {
                run = f == sched::TokenSource::Draft ? run + 1 : 0;
                EXPECT_LE(run, 4) << what;
            }
            drafts += (int)std::count(src[i].begin(), src[i].end(), sched::TokenSource::Draft);
            targets += (int)std::count(src[i].begin(), src[i].end(), sched::TokenSource::Target);
        }
        EXPECT_EQ(drafts, st.accepted) << what;
        EXPECT_EQ(targets, st.seq_rounds + (int)gm.prompts.size()) << what;
        if (!draft) {
            EXPECT_EQ(drafts, 0);
        }
        if (draft == &gm.self) {
            EXPECT_GT(drafts, targets) << "the twin draft should be accepted (nearly) always";
        }
    }
}
