// SSD's two threads (the target side and the asynchronous draft worker, each
// with a pool of its own) under the conditions where a lifecycle bug would
// show: long runs over many rounds with every backup, forced misses and hits,
// interrupted cache builds; stops and cancellations that land mid-round; a
// callback that throws while the draft is building. Every run must give the
// AR output, return (a watchdog aborts a hung run instead of letting the suite
// hang), join every thread it started and keep the speculation cache bounded
// by the fan-out budget. These suites are what the ThreadSanitizer step of
// scripts/test.sh runs; the AddressSanitizer step runs them for leaks.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "sched/spec_batch.h"
#include "sched/ssd_proposer.h"
#include "sched/ssd_scheduler.h"
#include "spec/draft_model_proposer.h"
#include "unit/ssd_test_support.h"

using namespace specdec;

namespace {

// Threads of this process right now (the kernel's list, so it also sees a
// thread that was started and never joined). The checks below compare with
// <=: a thread left over by an earlier test in the same process may end
// meanwhile, but a run must never leave one behind.
int thread_count() {
    int n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
    return n;
}

// The thread count once it has fallen to `at_most`, or after two seconds.
// pthread_join returns when the kernel clears the thread's id, which is a
// moment before the exited task leaves /proc/self/task; reading the list
// straight after a join can still see it (CI saw this once). A thread that
// was never joined keeps running, so it is still counted at the deadline.
int settled_thread_count(int at_most) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    int n = thread_count();
    while (n > at_most && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        n = thread_count();
    }
    return n;
}

// Aborts the test binary with a message if the guarded scope is still running
// after `limit`: a deadlocked run fails with its name instead of hanging CI.
class Watchdog {
public:
    Watchdog(std::string what, std::chrono::seconds limit)
        : what_(std::move(what)), thread_([this, limit] {
              std::unique_lock<std::mutex> lk(mu_);
              if (!cv_.wait_for(lk, limit, [&] { return done_; })) {
                  std::fprintf(stderr, "watchdog: '%s' still running after %lld s (deadlock?)\n", what_.c_str(),
                               (long long)limit.count());
                  std::abort();
              }
          }) {}
    ~Watchdog() {
        {
            std::lock_guard<std::mutex> lk(mu_);
            done_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }

private:
    std::string what_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool done_ = false;
    std::thread thread_;
};

// Generous: a sanitized run on a loaded 2-core machine takes seconds.
constexpr std::chrono::seconds kRunLimit{300};

using test::ssd_model_spec;
const auto& kPrompts = test::kSsdPrompts;

// Target with a pool of two threads (the pool's job hand-off runs inside
// every forward); `self` is the target's twin (forced hits), `other` a
// different model (hits and misses mixed). Branch slots for a budget of 6.
struct Models {
    ThreadPool pool{2};
    test::TinyModel target, other, self;
    explicit Models(int n_ctx = 512) : target(ssd_model_spec(7), n_ctx, 3), other(ssd_model_spec(11), n_ctx, 3 * 7),
                                       self(ssd_model_spec(7), n_ctx, 3 * 7) {}
};

using test::SsdRun;

SsdRun run_ssd(Models& m, test::TinyModel& draft, const std::vector<std::vector<int32_t>>& prompts,
               const std::vector<int>& max_new, const sched::SsdConfig& cfg, const sched::OnToken& stop,
               const std::string& what) {
    Watchdog dog(what, kRunLimit);
    return test::run_ssd_greedy(m.target, m.pool, draft, prompts, max_new, cfg, stop);
}

const sched::OnToken kNever = [](int, int32_t, sched::TokenSource) { return false; };

std::vector<int32_t> head(const std::vector<int32_t>& v, size_t n) {
    return std::vector<int32_t>(v.begin(), v.begin() + std::min(n, v.size()));
}

// Many rounds, three sequences of different lengths, every backup with and
// without forced misses, interrupted and finished builds, a draft pool of two
// threads: the output is AR's, every thread is joined after each run, and no
// round's speculation cache holds more branches than the budget allows.
TEST(SsdConcurrency, LongRunsJoinEveryThreadAndKeepTheCacheBounded) {
    Models m;
    const int n = 120;
    const std::vector<int> max_new{n, n - 37, n};
    std::vector<std::vector<int32_t>> ref;
    for (size_t i = 0; i < kPrompts.size(); ++i) ref.push_back(test::greedy_ar(m.target, m.pool, kPrompts[i], max_new[i]));
    const int threads_before = thread_count();
    int runs = 0;
    for (sched::BackupKind b : {sched::BackupKind::Jit, sched::BackupKind::Ngram, sched::BackupKind::Random,
                                sched::BackupKind::Auto})
        for (bool force_miss : {false, true})
            for (test::TinyModel* d : {&m.self, &m.other}) {
                sched::SsdConfig cfg;
                cfg.k = 3;
                cfg.fanout_budget = 6;
                cfg.backup = b;
                cfg.force_miss = force_miss;
                cfg.interrupt = (runs++ % 2) == 0;
                cfg.draft_threads = 2;
                const std::string what = std::string("backup ") + sched::backup_name(b) +
                                         (force_miss ? " forced misses" : "") +
                                         (cfg.interrupt ? " interrupt" : "") +
                                         (d == &m.self ? " self-draft" : " other draft");
                const SsdRun r = run_ssd(m, *d, kPrompts, max_new, cfg, kNever, what);
                for (size_t i = 0; i < kPrompts.size(); ++i) EXPECT_EQ(r.out[i], ref[i]) << what << " seq " << i;
                EXPECT_LE(settled_thread_count(threads_before), threads_before) << what << ": a thread outlived its run";
                // Many rounds, each answered by the draft side.
                EXPECT_GE(r.st.spec.rounds, n / (cfg.k + 1)) << what;
                EXPECT_EQ(r.st.draft.lookups + (int)kPrompts.size(), r.st.spec.seq_rounds) << what;
                // One cache build per reply at most, each within the budget
                // of every sequence it was built for.
                EXPECT_LE(r.st.draft.trees, r.st.spec.rounds) << what;
                EXPECT_LE(r.st.draft.branches, r.st.draft.trees * cfg.fanout_budget * (int)kPrompts.size()) << what;
                if (force_miss) {
                    EXPECT_EQ(r.st.draft.hits, 0) << what;
                    EXPECT_EQ(r.st.draft.branches, 0) << what;
                } else if (d == &m.self && !cfg.interrupt) {
                    EXPECT_EQ(r.st.draft.hits, r.st.draft.lookups) << what;
                }
                // The draft cache of each sequence holds its history, no more.
                for (size_t i = 0; i < kPrompts.size(); ++i)
                    EXPECT_LE(d->cache->committed((int)i), (int)(kPrompts[i].size() + max_new[i])) << what;
            }
}

// Stops that land inside a round (self-draft: each round emits K + 1 = 5
// tokens, so token 3, 8 and 12 are mid-round) end exactly there; the same
// scheduler state then runs again unharmed.
TEST(SsdConcurrency, CancellationsMidRoundThenARunAgain) {
    Models m;
    const int n = 40;
    std::vector<std::vector<int32_t>> ref;
    for (const auto& p : kPrompts) ref.push_back(test::greedy_ar(m.target, m.pool, p, n));
    const int threads_before = thread_count();
    const std::vector<size_t> cut{3, 8, 12};
    for (test::TinyModel* d : {&m.self, &m.other}) {
        for (bool interrupt : {false, true}) {
            sched::SsdConfig cfg;
            cfg.k = 4;
            cfg.fanout_budget = 6;
            cfg.interrupt = interrupt;
            cfg.draft_threads = 2;
            const std::string what = std::string(d == &m.self ? "self-draft" : "other draft") +
                                     (interrupt ? " interrupt" : "");
            std::vector<size_t> seen(3, 0);
            const SsdRun c = run_ssd(m, *d, kPrompts, {n, n, n}, cfg,
                                  [&](int i, int32_t, sched::TokenSource) { return ++seen[i] == cut[i]; }, what + " cancelled");
            for (int i = 0; i < 3; ++i) EXPECT_EQ(c.out[i], head(ref[i], cut[i])) << what << " seq " << i;
            if (d == &m.self && !interrupt) {
                // Every round verified K + 1 tokens (1 from the prefill, then
                // rounds of 5): 1, 2 and 3 rounds, whose tokens past the cuts
                // were verified and then dropped.
                EXPECT_EQ(c.st.spec.seq_rounds, 1 + 2 + 3) << what;
                EXPECT_EQ(c.st.spec.emitted, 6 * (cfg.k + 1)) << what;
            }
            const SsdRun again = run_ssd(m, *d, kPrompts, {n, n, n}, cfg, kNever, what + " after cancellation");
            for (int i = 0; i < 3; ++i) EXPECT_EQ(again.out[i], ref[i]) << what << " seq " << i;
            EXPECT_LE(settled_thread_count(threads_before), threads_before) << what;
        }
    }
}

// The target side fails mid-run (an exception from the token callback) while
// the draft worker is building its cache: the exception reaches the caller,
// the worker and its pool are joined, and the next run is AR's again.
TEST(SsdConcurrency, ExceptionMidRunJoinsTheDraftWorker) {
    Models m;
    const int n = 30;
    const auto ref = test::greedy_ar(m.target, m.pool, kPrompts[1], n);
    const int threads_before = thread_count();
    sched::SsdConfig cfg;
    cfg.k = 3;
    cfg.fanout_budget = 6;
    cfg.draft_threads = 2;
    for (int at : {1, 2, 7, 20}) {
        int seen = 0;
        const auto boom = [&](int, int32_t, sched::TokenSource) -> bool {
            if (++seen == at) throw std::runtime_error("callback failed");
            return false;
        };
        EXPECT_THROW(run_ssd(m, m.other, {kPrompts[1]}, {n}, cfg, boom, "throw at " + std::to_string(at)),
                     std::runtime_error);
        EXPECT_EQ(seen, at);
        EXPECT_LE(settled_thread_count(threads_before), threads_before) << "throw at " << at;
    }
    const SsdRun r = run_ssd(m, m.other, {kPrompts[1]}, {n}, cfg, kNever, "after the exceptions");
    EXPECT_EQ(r.out[0], ref);
}

// Negative control for the thread check: a thread that is still running is
// counted, so a worker that is never joined would fail the tests above.
TEST(SsdConcurrency, ThreadCountSeesALiveThread) {
    const int before = thread_count();
    std::mutex mu;
    std::condition_variable cv;
    bool go = false;
    std::thread t([&] {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return go; });
    });
    EXPECT_EQ(thread_count(), before + 1);
    {
        std::lock_guard<std::mutex> lk(mu);
        go = true;
    }
    cv.notify_all();
    t.join();
    EXPECT_EQ(settled_thread_count(before), before);
}

}  // namespace

// SSD as one proposer of a batch it shares with draft-model chains (the
// server's continuous batch): its draft side runs on a second Transformer over
// the draft's file and a cache of its own (SsdProposer::OwnDraft) with a fixed
// slot layout, while the chain proposer drafts on the first instance between
// rounds. Sequences join a running batch, one leaves early and its slot is
// taken by SSD again, another's by a chain: every output is greedy AR's, and
// under ThreadSanitizer the two instances never share scratch.
TEST(SsdConcurrency, SharesABatchWithDraftModelProposers) {
    Watchdog dog("SsdConcurrency.SharesABatchWithDraftModelProposers", kRunLimit);
    ThreadPool pool(2);
    test::TinyModel target(ssd_model_spec(7), 256, 3), draft(ssd_model_spec(11), 256, 3);
    const sample::SamplingParams greedy;
    spec::DraftModelOptions co;
    co.shape = spec::DraftShape::Chain;
    co.chain_k = 3;
    co.target_n_vocab = target.n_vocab();
    spec::DraftModelProposer chain(*draft.model, *draft.cache, pool, co);

    sched::SsdConfig cfg;
    cfg.k = 3;
    cfg.fanout_budget = 4;
    cfg.backup = sched::BackupKind::Jit;
    sched::SsdProposer::OwnDraft own;
    own.model = std::make_unique<model::Transformer>(*draft.file);
    own.cache = std::make_unique<kv::KvCache>(own.model->kv_options(256, 3 * (1 + cfg.fanout_budget)));
    sched::DraftWorkerOptions wo;
    wo.cfg = cfg;
    wo.params = greedy;
    wo.target_n_vocab = target.n_vocab();
    wo.n_batch = 3;
    sched::SsdProposer ssd(std::move(own), wo);
    const sched::SlotSpec ssd_spec{&ssd, cfg.k + 1, cfg.k, true}, chain_spec{&chain, 4, 3, true};

    const std::vector<std::vector<int32_t>> prompts{{1, 2, 3}, {5, 9, 2, 7, 7, 1}, {40}, {3, 3, 1}, {7, 2}};
    const int n = 24;
    std::vector<std::vector<int32_t>> ref;
    for (const auto& p : prompts) ref.push_back(test::greedy_ar(target, pool, p, n));

    sched::SpecBatch sb({target.model.get(), target.cache.get(), &pool, 256}, spec::ExecMode::Reference);
    std::vector<int> job_of(3, -1);
    std::vector<std::vector<int32_t>> out(prompts.size());
    const sched::OnToken on_token = [&](int slot, int32_t t, sched::TokenSource) {
        out[(size_t)job_of[(size_t)slot]].push_back(t);
        return false;
    };
    auto admit = [&](int slot, int job, const sched::SlotSpec& spec) {
        job_of[(size_t)slot] = job;
        sb.admit(slot, prompts[(size_t)job], spec, greedy, n, on_token);
    };
    admit(1, 0, ssd_spec);  // SSD in slot 1 first: the layout must not depend on which slot begins
    sb.step(on_token);
    admit(0, 1, chain_spec);
    sb.step(on_token);
    admit(2, 2, ssd_spec);  // joins a running batch
    sb.step(on_token);
    sb.step(on_token);
    const size_t cut = out[0].size();
    ASSERT_LT(cut, (size_t)n);
    sb.retire(1);  // leaves early; SSD begins again in its slot
    admit(1, 3, ssd_spec);
    bool fifth = false;
    int rounds = 0;
    while (sb.any_running() || !fifth) {
        ASSERT_LT(++rounds, 400);
        sb.step(on_token);
        for (int s = 0; s < 3; ++s)
            if (sb.admitted(s) && !sb.running(s)) sb.retire(s);
        for (int s = 0; s < 3 && !fifth; ++s)
            if (!sb.admitted(s)) {
                admit(s, 4, s == 0 ? ssd_spec : chain_spec);
                fifth = true;
            }
    }
    EXPECT_EQ(out[0], std::vector<int32_t>(ref[0].begin(), ref[0].begin() + (long)cut));
    for (size_t j = 1; j < prompts.size(); ++j) EXPECT_EQ(out[j], ref[j]) << "prompt " << j;
    EXPECT_GT(ssd.draft_stats().lookups, 0);
}
