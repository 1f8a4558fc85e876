// SSD (Saguaro) under greedy decoding: the output must equal target-only
// greedy AR token for token, at batch 1 and batch > 1, with forced cache hits
// (the draft is the target itself, so every outcome is the draft's top guess),
// forced misses (the cache is ignored), a different draft (hits and misses
// mixed), every backup, interrupted and finished cache builds; plus stops
// mid-round, cancellation, the end of the context and long runs.
#include <gtest/gtest.h>

#include "unit/ssd_test_support.h"

using namespace specdec;

namespace {

struct Pair {
    ThreadPool pool{1};
    test::TinyModel target, other, self;
    explicit Pair(int n_ctx = 256, int n_seq = 3)
        : target(test::ssd_model_spec(7), n_ctx, n_seq), other(test::ssd_model_spec(11), n_ctx, n_seq),
          self(test::ssd_model_spec(7), n_ctx, n_seq) {}
};

using test::SsdRun;

SsdRun run_ssd(Pair& m, test::TinyModel& draft, const std::vector<std::vector<int32_t>>& prompts,
               const std::vector<int>& max_new, const sched::SsdConfig& cfg,
               const sched::OnToken& stop = [](int, int32_t, sched::TokenSource) { return false; }) {
    return test::run_ssd_greedy(m.target, m.pool, draft, prompts, max_new, cfg, stop);
}

const auto& kPrompts = test::kSsdPrompts;

// n_seq 3: branches re-fed through parent links; 21: each branch in its own
// scratch sequence slot (3 sequences x (1 + 6 branches)).
class SsdGreedyBranchMode : public ::testing::TestWithParam<int> {};

TEST_P(SsdGreedyBranchMode, MatchesArAcrossBackupsHitsAndMisses) {
    Pair m(256, GetParam());
    const int n = 40;
    std::vector<std::vector<int32_t>> ref;
    for (const auto& p : kPrompts) ref.push_back(test::greedy_ar(m.target, m.pool, p, n));
    for (sched::BackupKind b : {sched::BackupKind::Jit, sched::BackupKind::Ngram, sched::BackupKind::Random,
                                sched::BackupKind::Auto})
        for (bool force_miss : {false, true})
            for (bool interrupt : {false, true})
                for (test::TinyModel* d : {&m.other, &m.self})
                    for (int batch : {1, 3}) {
                        sched::SsdConfig cfg;
                        cfg.k = 3;
                        cfg.fanout_budget = 6;
                        cfg.backup = b;
                        cfg.force_miss = force_miss;
                        cfg.interrupt = interrupt;
                        const std::vector<std::vector<int32_t>> prompts(kPrompts.begin(), kPrompts.begin() + batch);
                        const SsdRun r = run_ssd(m, *d, prompts, std::vector<int>(batch, n), cfg);
                        const std::string what = std::string("backup ") + sched::backup_name(b) +
                                                 (force_miss ? " forced misses" : "") +
                                                 (interrupt ? " interrupt" : "") +
                                                 (d == &m.self ? " self-draft" : " other draft") +
                                                 " batch " + std::to_string(batch);
                        for (int i = 0; i < batch; ++i) EXPECT_EQ(r.out[i], ref[i]) << what << " seq " << i;
                        if (force_miss) {
                            EXPECT_EQ(r.st.draft.hits, 0) << what;
                        }
                        // Forced hits: with the target as its own draft, every
                        // outcome is the draft's best guess, so a finished
                        // cache always hits.
                        if (!force_miss && !interrupt && d == &m.self) {
                            EXPECT_EQ(r.st.draft.hits, r.st.draft.lookups) << what;
                            EXPECT_GT(r.st.draft.lookups, 0) << what;
                        }
                    }
}

INSTANTIATE_TEST_SUITE_P(Slots, SsdGreedyBranchMode, ::testing::Values(3, 21));

TEST(SsdGreedy, UniformFanoutAndZeroBudgetMatchAr) {
    Pair m;
    const auto ref = test::greedy_ar(m.target, m.pool, kPrompts[1], 30);
    for (auto [fan, budget] : {std::pair{sched::FanoutKind::Uniform, 9}, std::pair{sched::FanoutKind::Geometric, 0},
                               std::pair{sched::FanoutKind::Geometric, 1}}) {
        sched::SsdConfig cfg;
        cfg.k = 4;
        cfg.fanout = fan;
        cfg.fanout_budget = budget;
        cfg.interrupt = false;
        const SsdRun r = run_ssd(m, m.other, {kPrompts[1]}, {30}, cfg);
        EXPECT_EQ(r.out[0], ref) << sched::fanout_name(fan) << " budget " << budget;
        if (budget == 0) {
            EXPECT_EQ(r.st.draft.hits, 0);
        }
    }
}

TEST(SsdGreedy, StopsMidRoundAndPerSequenceLimits) {
    Pair m;
    const int n = 30;
    std::vector<std::vector<int32_t>> ref;
    for (const auto& p : kPrompts) ref.push_back(test::greedy_ar(m.target, m.pool, p, n));
    sched::SsdConfig cfg;
    cfg.k = 4;
    // Self-draft: rounds emit K + 1 tokens, so limits fall inside rounds.
    const SsdRun r = run_ssd(m, m.self, kPrompts, {7, 1, 13}, cfg);
    const std::vector<int> lim{7, 1, 13};
    for (int i = 0; i < 3; ++i) EXPECT_EQ(r.out[i], std::vector<int32_t>(ref[i].begin(), ref[i].begin() + lim[i]));
    // A stop signalled by the callback (EOS, stop string, cancellation) ends
    // that sequence after the token; the others run on unharmed.
    std::vector<int> seen(3, 0);
    const SsdRun s = run_ssd(m, m.other, kPrompts, {n, n, n}, cfg, [&](int i, int32_t, sched::TokenSource) { return i == 1 && ++seen[i] == 6; });
    EXPECT_EQ(s.out[0], ref[0]);
    EXPECT_EQ(s.out[1], std::vector<int32_t>(ref[1].begin(), ref[1].begin() + 6));
    EXPECT_EQ(s.out[2], ref[2]);
    // Every sequence cancelled at once.
    const SsdRun c = run_ssd(m, m.self, kPrompts, {n, n, n}, cfg, [](int, int32_t, sched::TokenSource) { return true; });
    for (int i = 0; i < 3; ++i) EXPECT_EQ(c.out[i].size(), 1u);
}

TEST(SsdGreedy, RunsToTheEndOfTheContextLikeAr) {
    Pair m(24, 1);
    sched::SsdConfig cfg;
    cfg.k = 4;
    cfg.fanout_budget = 8;
    for (test::TinyModel* d : {&m.other, &m.self}) {
        const SsdRun r = run_ssd(m, *d, {{1, 2, 3}}, {100}, cfg);
        // AR stops when the context is full: 21 tokens fit after 3 of prompt,
        // plus the last one sampled from the final slot.
        EXPECT_EQ(r.out[0], test::greedy_ar(m.target, m.pool, {1, 2, 3}, 22));
    }
}

TEST(SsdGreedy, LongBatchedRunsRepeatWithoutDeadlock) {
    Pair m(512, 3 * 9);  // branch slots for budgets up to 8
    const int n = 200;
    std::vector<std::vector<int32_t>> ref;
    for (const auto& p : kPrompts) ref.push_back(test::greedy_ar(m.target, m.pool, p, n));
    for (int rep = 0; rep < 4; ++rep) {
        sched::SsdConfig cfg;
        cfg.k = 1 + rep;
        cfg.interrupt = rep % 2 == 0;
        const SsdRun r = run_ssd(m, rep % 2 ? m.self : m.other, kPrompts, {n, n - 50, n}, cfg);
        EXPECT_EQ(r.out[0], ref[0]);
        EXPECT_EQ(r.out[1], std::vector<int32_t>(ref[1].begin(), ref[1].begin() + n - 50));
        EXPECT_EQ(r.out[2], ref[2]);
        EXPECT_GT(r.st.spec.rounds, 0);
    }
}

// Prompt lookup first: a sequence whose history repeats an n-gram takes the
// lookup chain and the draft side is not asked; the next round it drafts,
// the draft side is begun again from the history. With the target as its
// own draft every draft of a correctly caught-up draft side is accepted, so
// a draft side left out of step would show as rejected drafts.
TEST(SsdGreedy, LookupFirstMatchesArAndCatchesTheDraftSideUp) {
    Pair m(256, 3 * 7);
    const int n = 60;
    // Repeating prompts, so that lookups find chains from the first rounds.
    const std::vector<std::vector<int32_t>> prompts{{1, 2, 3, 4, 1, 2, 3, 4, 1, 2}, {5, 9, 2, 7, 5, 9, 2}, {40, 41}};
    std::vector<std::vector<int32_t>> ref;
    for (const auto& p : prompts) ref.push_back(test::greedy_ar(m.target, m.pool, p, n));
    for (test::TinyModel* d : {&m.self, &m.other})
        for (int batch : {1, 3})
            for (bool interrupt : {false, true}) {
                sched::SsdConfig cfg;
                cfg.k = 3;
                cfg.fanout_budget = 6;
                cfg.interrupt = interrupt;
                cfg.lookup = {2, 3, 5};
                cfg.backup = sched::BackupKind::Jit;  // a miss drafts with the draft too (auto may take n-grams)
                const std::vector<std::vector<int32_t>> ps(prompts.begin(), prompts.begin() + batch);
                const SsdRun r = run_ssd(m, *d, ps, std::vector<int>(batch, n), cfg);
                const std::string what = std::string(d == &m.self ? "self-draft" : "other draft") + " batch " +
                                         std::to_string(batch) + (interrupt ? " interrupt" : "");
                for (int i = 0; i < batch; ++i) EXPECT_EQ(r.out[i], ref[i]) << what << " seq " << i;
                EXPECT_GT(r.st.spec.lookup_rounds, 0) << what;
                EXPECT_GT(r.st.spec.rounds, r.st.spec.lookup_rounds) << what << ": the draft side drafted no round";
                EXPECT_GT(r.st.draft.lookups, 0) << what;
                if (d == &m.self) {
                    // Lookup chains may be rejected; the draft side's never
                    // (hits and JIT backups alike are the target's own choices).
                    const int draft_drafted = r.st.spec.drafted - r.st.spec.lookup_drafted;
                    const int draft_accepted = r.st.spec.accepted - r.st.spec.lookup_accepted;
                    EXPECT_EQ(draft_accepted, draft_drafted) << what;
                    if (!interrupt) {
                        EXPECT_EQ(r.st.draft.hits, r.st.draft.lookups) << what;
                    }
                }
            }
}

TEST(SsdGreedy, DraftCacheSmallerThanTargetIsRejected) {
    ThreadPool pool(1);
    test::TinyModel target(test::ssd_model_spec(7), 64, 1), draft(test::ssd_model_spec(7), 32, 1);
    sched::TargetContext tc{target.model.get(), target.cache.get(), &pool, 256};
    sched::DraftContext dc{draft.model.get(), draft.cache.get(), 256};
    sched::SsdScheduler sch(tc, dc, {}, {});
    sched::SsdStats st;
    EXPECT_THROW(sch.run({{1, 2}}, {4}, [](int, int32_t, sched::TokenSource) { return false; }, st), Error);
}

}  // namespace
