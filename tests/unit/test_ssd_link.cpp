// SSD with a draft side that can fail (a remote placement's faults, injected
// through test::WireLoopbackSide): whatever the fault (timeout, disconnect,
// error reply, invalid reply) and wherever it falls, greedy output equals
// target-only AR token for token, every fault is counted, the next round
// resyncs (a new worker rebuilt from the histories), and the cache hits
// again after it. Also: the in-process placement still fails loudly on an
// error (it cannot lose messages, so an error is a bug, not a fault).
#include <gtest/gtest.h>

#include "unit/ssd_link_test_support.h"
#include "unit/ssd_test_support.h"

using namespace specdec;

namespace {

struct LinkRun {
    std::vector<std::vector<int32_t>> out;
    sched::SsdStats st;
    int restarts = 0;
};

LinkRun run_link(test::TinyModel& target, ThreadPool& pool, test::TinyModel& draft,
                 const std::vector<std::vector<int32_t>>& prompts, int n, const sched::SsdConfig& cfg,
                 const std::map<int, std::string>& faults) {
    LinkRun r;
    r.out.resize(prompts.size());
    sched::TargetContext tc{target.model.get(), target.cache.get(), &pool, 256};
    sched::DraftContext dc{draft.model.get(), draft.cache.get(), 256};
    const sched::DraftSideFactory make = [&](const sched::DraftSideSpec& spec) {
        EXPECT_EQ(spec.n_batch, (int)prompts.size());
        EXPECT_EQ(spec.target_n_vocab, target.n_vocab());
        return std::make_unique<test::WireLoopbackSide>(dc, spec, faults, &r.restarts);
    };
    sched::SsdScheduler sch(tc, make, sample::SamplingParams{}, cfg);
    sch.run(prompts, std::vector<int>(prompts.size(), n),
            [&](int i, int32_t t, sched::TokenSource) {
                r.out[i].push_back(t);
                return false;
            },
            r.st);
    return r;
}

sched::SsdConfig link_cfg() {
    sched::SsdConfig cfg;
    cfg.k = 3;
    cfg.fanout_budget = 6;
    cfg.interrupt = false;  // deterministic hits: every cache is finished
    return cfg;
}

}  // namespace

TEST(SsdLink, EveryFaultKeepsGreedyOutputEqualToAr) {
    ThreadPool pool{1};
    test::TinyModel target(test::ssd_model_spec(7), 256, 3), self(test::ssd_model_spec(7), 256, 3 * 7),
        other(test::ssd_model_spec(11), 256, 3 * 7);
    const int n = 40;
    std::vector<std::vector<int32_t>> ref;
    for (const auto& p : test::kSsdPrompts) ref.push_back(test::greedy_ar(target, pool, p, n));
    for (const std::string fault : {"timeout", "disconnected", "error", "garbage"})
        for (test::TinyModel* d : {&self, &other})
            for (int batch : {1, 3}) {
                const std::vector<std::vector<int32_t>> prompts(test::kSsdPrompts.begin(),
                                                                test::kSsdPrompts.begin() + batch);
                // The first reply, one early, and two in a row later (a backoff).
                const std::map<int, std::string> faults{{0, fault}, {3, fault}, {9, fault}, {10, fault}};
                const LinkRun r = run_link(target, pool, *d, prompts, n, link_cfg(), faults);
                const std::string what = fault + (d == &self ? " self-draft" : " other draft") + " batch " +
                                         std::to_string(batch);
                for (int i = 0; i < batch; ++i) EXPECT_EQ(r.out[i], ref[i]) << what << " seq " << i;
                const sched::SsdFallbackStats& fb = r.st.fallback;
                const int expected = fault == "garbage" ? fb.invalid
                                     : fault == "timeout" ? fb.timeout
                                     : fault == "error"   ? fb.error
                                                          : fb.disconnected;
                EXPECT_EQ(expected, 4) << what;
                EXPECT_EQ(fb.rounds, 4 + fb.backoff) << what;
                // Two faults in a row back off one round, unless the fault costs no wait.
                EXPECT_EQ(fb.backoff, fault == "disconnected" ? 0 : 1) << what;
                EXPECT_EQ(fb.resyncs, 4) << what;
                EXPECT_EQ(r.restarts, 4) << what;
                if (d == &self) {
                    EXPECT_GT(r.st.draft.hits, 0) << what << ": no hit after the resyncs";
                }
            }
}

TEST(SsdLink, HealthyLinkMatchesTheInProcessPlacement) {
    // No fault: the wire round trip changes nothing, so the speculations (and
    // the counters) are those of the thread in this process.
    ThreadPool pool{1};
    test::TinyModel target(test::ssd_model_spec(7), 256, 3), draft(test::ssd_model_spec(11), 256, 3 * 7);
    const sched::SsdConfig cfg = link_cfg();
    const LinkRun remote = run_link(target, pool, draft, test::kSsdPrompts, 30, cfg, {});
    const test::SsdRun local = test::run_ssd_greedy(target, pool, draft, test::kSsdPrompts, {30, 30, 30}, cfg);
    EXPECT_EQ(remote.out, local.out);
    EXPECT_EQ(remote.st.draft.hits, local.st.draft.hits);
    EXPECT_EQ(remote.st.draft.lookups, local.st.draft.lookups);
    EXPECT_EQ(remote.st.spec.rounds, local.st.spec.rounds);
    EXPECT_EQ(remote.st.fallback.rounds, 0);
    EXPECT_EQ(remote.restarts, 0);
}
