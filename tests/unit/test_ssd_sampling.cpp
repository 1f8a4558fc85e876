// SSD under sampling is lossless: the emitted tokens follow the target's own
// distribution exactly, with Saguaro sampling off (C = 1) and on (C < 1), with
// every backup, and with forced misses. A tiny synthetic target (16 tokens), a
// close synthetic draft, K = 1 so that rounds 2.. are answered from the
// speculation cache; the joint distribution of generated tokens 3 and 4 over
// many seeds is compared with the exact target joint (enumerated) by a Pearson
// chi-square test at false-alarm rate 1e-4 per configuration. A negative
// control (the draft's own distribution) must fail the same test. The same
// test runs through the remote placement's wire format with faults injected
// (test::WireLoopbackSide): fallback rounds and resyncs keep it exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "sched/ssd_scheduler.h"
#include "unit/distribution_test_support.h"
#include "unit/ssd_link_test_support.h"
#include "unit/spec_test_support.h"

using namespace specdec;

namespace {

constexpr int kV = 16;
const std::vector<int32_t> kPrompt{1, 2, 3};
// Half the vocabulary: with lookups from one-token matches, about half the
// rounds are lookup chains and the others the draft side's.
const std::vector<int32_t> kLookupPrompt{1, 2, 3, 4, 5, 6, 7, 8};
constexpr int kFirst = 2;  // 0-based index of the first token of the tested pair

sample::SamplingParams sampling() {
    sample::SamplingParams p;
    p.temperature = 0.9f;
    p.top_k = 12;
    return p;
}

std::vector<float> next_dist(test::TinyModel& m, ThreadPool& pool, const std::vector<int32_t>& ctx) {
    return test::next_distribution(*m.model, pool, ctx, kV, sampling());
}
using test::chi_square;

struct Models {
    ThreadPool pool{1};
    test::TinyModel target, draft;
    // draft_seqs > 1: branch slots (1 + budget) instead of re-fed branch paths.
    explicit Models(int draft_seqs = 1) : target(spec(1.0f), 32, 1), draft(spec(0.7f), 32, draft_seqs) {}
    static test::SyntheticModelSpec spec(float scale) {
        test::SyntheticModelSpec s;
        s.n_vocab = kV;
        s.weight_scale = scale;
        s.seed = 7;
        return s;
    }
};

struct Counts {
    std::vector<int> counts = std::vector<int>(kV * kV, 0);
    long hits = 0, lookups = 0, fallbacks = 0;
    long lookup_rounds = 0, rounds = 0;  // sequence-rounds whose chain was a prompt lookup, and all
};

// faults (non-null): through test::WireLoopbackSide with these faults.
Counts sample_ssd(Models& m, const sched::SsdConfig& cfg, int n, bool draft_only,
                  const std::map<int, std::string>* faults = nullptr, const std::vector<int32_t>& prompt = kPrompt) {
    Counts c;
    for (int s = 0; s < n; ++s) {
        sample::SamplingParams p = sampling();
        p.seed = 5000 + s;
        std::vector<int32_t> out;
        if (draft_only) {  // negative control: sample the draft model itself
            test::TinyModel& d = m.draft;
            kv::KvCache cache(d.model->kv_options(32, 1));
            Rng rng(p.seed);
            std::vector<int32_t> ctx = prompt;
            std::vector<float> scratch;
            for (int j = 0; j <= kFirst + 1; ++j) {
                const auto q = next_dist(d, m.pool, ctx);
                const int32_t t = sample::sample_from(q, rng);
                out.push_back(t);
                ctx.push_back(t);
            }
        } else {
            sched::TargetContext tc{m.target.model.get(), m.target.cache.get(), &m.pool, 256};
            sched::DraftContext dc{m.draft.model.get(), m.draft.cache.get(), 256};
            const sched::DraftSideFactory link = [&](const sched::DraftSideSpec& spec) {
                return std::make_unique<test::WireLoopbackSide>(dc, spec, *faults);
            };
            sched::SsdScheduler sch = faults ? sched::SsdScheduler(tc, link, p, cfg) : sched::SsdScheduler(tc, dc, p, cfg);
            sched::SsdStats st;
            sch.run({prompt}, {kFirst + 2}, [&](int, int32_t t, sched::TokenSource) { out.push_back(t); return false; }, st);
            c.fallbacks += st.fallback.rounds;
            c.hits += st.draft.hits;
            c.lookups += st.draft.lookups;
            c.lookup_rounds += st.spec.lookup_rounds;
            c.rounds += st.spec.rounds;
        }
        c.counts[out[kFirst] * kV + out[kFirst + 1]]++;
    }
    return c;
}

const std::vector<double>& exact(const std::vector<int32_t>& prompt = kPrompt) {
    static std::map<std::vector<int32_t>, std::vector<double>> joints;
    auto it = joints.find(prompt);
    if (it == joints.end()) {
        Models m;
        it = joints.emplace(prompt, test::exact_pair_joint(*m.target.model, m.pool, prompt, kFirst, kV, sampling()))
                 .first;
    }
    return it->second;
}

void expect_lossless(const sched::SsdConfig& cfg, const char* name, bool expect_hits, int draft_seqs = 1,
                     const std::map<int, std::string>* faults = nullptr,
                     const std::vector<int32_t>& prompt = kPrompt) {
    Models m(draft_seqs);
    const int n = test::sampling_draws(12000);
    const Counts c = sample_ssd(m, cfg, n, false, faults, prompt);
    if (cfg.lookup.min_n > 0) {
        // Both kinds of rounds, and the draft side begun again after lookups.
        EXPECT_GT(c.lookup_rounds, c.rounds / 20) << name;
        EXPECT_LT(c.lookup_rounds, c.rounds - c.rounds / 20) << name;
    }
    if (faults) {
        EXPECT_EQ(c.fallbacks > 0, !faults->empty()) << name << ": " << c.fallbacks << " fallback rounds";
    }
    const auto [stat, crit] = chi_square(c.counts, exact(prompt), n);
    std::printf("[ %s ] chi-square %.1f, critical (1e-4) %.1f, cache hits %ld / %ld\n", name, stat, crit, c.hits,
                c.lookups);
    EXPECT_LT(stat, crit) << name;
    if (expect_hits) {
        EXPECT_GT(c.hits, c.lookups / 10) << name << ": the cache was barely exercised";
    }
}

sched::SsdConfig base() {
    sched::SsdConfig cfg;
    cfg.k = 1;
    cfg.fanout_budget = 4;
    cfg.interrupt = false;  // deterministic: every cache is finished
    cfg.backup = sched::BackupKind::Jit;
    return cfg;
}

}  // namespace

TEST(SsdSampling, CacheWithJitBackupIsLossless) { expect_lossless(base(), "ssd jit C=1", true); }

TEST(SsdSampling, SaguaroSamplingIsLossless) {
    sched::SsdConfig cfg = base();
    cfg.saguaro_c = 0.3f;
    expect_lossless(cfg, "ssd jit C=0.3", true);
}

TEST(SsdSampling, SaguaroUpWeightingIsLossless) {
    sched::SsdConfig cfg = base();
    cfg.saguaro_c = 2.0f;  // the cached guesses favoured: still verified against the same q'
    expect_lossless(cfg, "ssd jit C=2", true);
}

TEST(SsdSampling, BranchSlotsWithSaguaroAreLossless) {
    // K = 1: the tested tokens come from speculations built on glue reused
    // from a hit branch's slot.
    sched::SsdConfig cfg = base();
    cfg.saguaro_c = 0.5f;
    expect_lossless(cfg, "ssd branch slots C=0.5", true, 1 + cfg.fanout_budget);
}

TEST(SsdSampling, NgramBackupIsLossless) {
    sched::SsdConfig cfg = base();
    cfg.backup = sched::BackupKind::Ngram;
    cfg.saguaro_c = 0.5f;
    expect_lossless(cfg, "ssd ngram C=0.5", true);
}

// Prompt lookup first: deterministic lookup chains in some rounds, the draft
// side's sampled speculations (begun again from the history) in the others.
TEST(SsdSampling, LookupFirstIsLossless) {
    sched::SsdConfig cfg = base();
    cfg.k = 2;
    cfg.saguaro_c = 0.5f;
    cfg.lookup = {1, 2, 2};
    expect_lossless(cfg, "ssd lookup first C=0.5", true, 1, nullptr, kLookupPrompt);
    // The same through the remote placement's wire format (Begins in_cache
    // after lookup rounds cross it too).
    const std::map<int, std::string> none;
    expect_lossless(cfg, "ssd lookup first over the wire", true, 1, &none, kLookupPrompt);
}

TEST(SsdSampling, RandomBackupIsLossless) {
    sched::SsdConfig cfg = base();
    cfg.backup = sched::BackupKind::Random;
    cfg.k = 2;
    expect_lossless(cfg, "ssd random", false);
}

TEST(SsdSampling, ForcedMissesAreLossless) {
    sched::SsdConfig cfg = base();
    cfg.force_miss = true;
    cfg.k = 2;
    cfg.saguaro_c = 0.2f;
    expect_lossless(cfg, "ssd forced misses C=0.2", false);
}

TEST(SsdSampling, RemoteWireWithFaultsIsLossless) {
    // Four tokens per run (K = 1): a healthy first reply, a timeout for the
    // second (a local n-gram round), then the resync's reply, then an
    // invalid one: the tested pair (tokens 3, 4) comes from remote and local
    // rounds. A run that always resyncs never looks its cache up, hence no
    // hits; the healthy run below hits as the in-process one does.
    const std::map<int, std::string> timeout_then_garbage{{1, "timeout"}, {3, "garbage"}};
    expect_lossless(base(), "ssd over the wire, faults", false, 1, &timeout_then_garbage);
    const std::map<int, std::string> none;
    sched::SsdConfig cfg = base();
    cfg.saguaro_c = 0.5f;
    expect_lossless(cfg, "ssd over the wire, C=0.5", true, 1, &none);
}

TEST(SsdSampling, NegativeControlDraftDistributionIsRejected) {
    Models m;
    const int n = test::sampling_draws(12000);
    const Counts c = sample_ssd(m, base(), n, true);
    const auto [stat, crit] = chi_square(c.counts, exact(), n);
    std::printf("[ draft-only control ] chi-square %.1f, critical (1e-4) %.1f\n", stat, crit);
    EXPECT_GT(stat, crit) << "the test cannot tell the draft from the target: it has no power";
}
