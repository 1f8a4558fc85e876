// Shared pieces of the synthetic SSD tests (greedy, concurrency, traces):
// the tiny models, the prompts and one greedy SsdScheduler run.
#pragma once

#include <string>
#include <vector>

#include "sched/ssd_scheduler.h"
#include "unit/spec_test_support.h"

namespace specdec::test {

// A 64-token synthetic model; seed 7 is the usual target, 11 another draft
// (hits and misses mixed), 7 again the target's twin (every guess hits).
inline SyntheticModelSpec ssd_model_spec(uint32_t seed) {
    SyntheticModelSpec s;
    s.n_vocab = 64;
    s.weight_scale = 1.0f;
    s.seed = seed;
    return s;
}

// Three sequences of different lengths (batch > 1 runs use a prefix of them).
inline const std::vector<std::vector<int32_t>> kSsdPrompts{{1, 2, 3}, {5, 9, 2, 7, 7, 1}, {40}};

struct SsdRun {
    std::vector<std::vector<int32_t>> out;
    sched::SsdStats st;
};

// One greedy SSD run; `stop` is called after each token is recorded.
inline SsdRun run_ssd_greedy(TinyModel& target, ThreadPool& pool, TinyModel& draft,
                             const std::vector<std::vector<int32_t>>& prompts, const std::vector<int>& max_new,
                             const sched::SsdConfig& cfg,
                             const sched::OnToken& stop = [](int, int32_t, sched::TokenSource) { return false; }) {
    SsdRun r;
    r.out.resize(prompts.size());
    sched::TargetContext tc{target.model.get(), target.cache.get(), &pool, 256};
    sched::DraftContext dc{draft.model.get(), draft.cache.get(), 256};
    sched::SsdScheduler sch(tc, dc, sample::SamplingParams{}, cfg);  // greedy
    sch.run(prompts, max_new,
            [&](int i, int32_t t, sched::TokenSource source) {
                r.out[i].push_back(t);
                return stop(i, t, source);
            },
            r.st);
    return r;
}

}  // namespace specdec::test
