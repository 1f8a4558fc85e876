// SSD round traces (sched/ssd_trace.h): one line per sequence per round whose
// structure and counts agree with the run's statistics (rounds, accepted and
// emitted tokens, cache lookups and hits per accept point, backups) and with
// the tokens delivered; plus the draft vocabulary subset in the SSD draft
// worker (greedy output still equals AR, drafts stay inside the subset).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "sched/ssd_scheduler.h"
#include "unit/ssd_test_support.h"

using namespace specdec;

namespace {

const auto model_spec = test::ssd_model_spec;
const auto& kPrompts = test::kSsdPrompts;

struct Traced {
    std::vector<std::vector<int32_t>> out;
    sched::SsdStats st;
    std::vector<nlohmann::json> lines;
};

Traced run_traced(test::TinyModel& target, test::TinyModel& draft, ThreadPool& pool, const sched::SsdConfig& cfg,
                  const std::vector<int>& max_new, const spec::VocabSubset* subset = nullptr) {
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("specdec_ssd_trace_" + std::to_string(::getpid()) + ".jsonl"))
                                 .string();
    Traced t;
    t.out.resize(max_new.size());
    {
        spec::TraceWriter w(path);
        sched::TargetContext tc{target.model.get(), target.cache.get(), &pool, 256};
        sched::DraftContext dc{draft.model.get(), draft.cache.get(), 256, subset};
        sched::SsdScheduler sch(tc, dc, {}, cfg, spec::ExecMode::Performance, &w);
        const std::vector<std::vector<int32_t>> prompts(kPrompts.begin(), kPrompts.begin() + max_new.size());
        sch.run(prompts, max_new,
                [&](int i, int32_t tok, sched::TokenSource) {
                    t.out[i].push_back(tok);
                    return false;
                },
                t.st);
    }
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) t.lines.push_back(nlohmann::json::parse(line));
    std::filesystem::remove(path);
    return t;
}

// Every structural and counting property a trace must have.
void expect_consistent(const Traced& t, const sched::SsdConfig& cfg, const std::string& what) {
    const int B = (int)t.out.size(), K = cfg.k;
    ASSERT_EQ((int)t.lines.size(), t.st.spec.seq_rounds) << what;
    int accepted = 0, emitted = 0, lookups = 0, hits = 0, misses = 0, last_batch_round = -1;
    std::vector<int> lookups_k(K + 1, 0), hits_k(K + 1, 0);
    std::vector<std::vector<int32_t>> delivered(B);
    std::vector<int> next_round(B, 0), next_prefix(B, -1);
    for (const auto& j : t.lines) {
        ASSERT_EQ(j.at("type"), "ssd_round") << what;
        const int i = j.at("seq");
        ASSERT_TRUE(i >= 0 && i < B) << what;
        EXPECT_EQ(j.at("round"), next_round[i]++) << what;
        const int b = j.at("batch_round");
        EXPECT_GE(b, last_batch_round) << what;  // lines come in round order
        last_batch_round = b;
        const int prefix = j.at("prefix_len");
        if (next_prefix[i] >= 0) {
            EXPECT_EQ(prefix, next_prefix[i]) << what;
        }
        const int k = j.at("accepted");
        const auto drafts = j.at("drafts").get<std::vector<int32_t>>();
        EXPECT_LE((int)drafts.size(), K) << what;
        EXPECT_TRUE(k >= 0 && k <= (int)drafts.size()) << what;
        next_prefix[i] = prefix + k + 1;
        const auto em = j.at("emitted").get<std::vector<int32_t>>();
        EXPECT_EQ((int)j.at("n_emitted"), (int)em.size()) << what;
        EXPECT_TRUE(!em.empty() && (int)em.size() <= k + 1) << what;
        // Accepted tokens are the drafts; the bonus follows them.
        for (int d = 0; d < std::min(k, (int)em.size()); ++d) EXPECT_EQ(em[d], drafts[d]) << what;
        if ((int)em.size() == k + 1) {
            EXPECT_EQ(em.back(), (int32_t)j.at("bonus")) << what;
        }
        delivered[i].insert(delivered[i].end(), em.begin(), em.end());
        accepted += k;
        emitted += k + 1;
        const bool lookup = j.at("lookup"), hit = j.at("hit");
        EXPECT_EQ(lookup, j.at("round") != 0) << what;
        if (lookup) {
            const int lk = j.at("lookup_k");
            EXPECT_TRUE(lk >= 0 && lk <= K) << what;
            ++lookups;
            ++lookups_k[lk];
            if (hit) ++hits, ++hits_k[lk];
        } else {
            EXPECT_EQ(j.at("lookup_k"), -1) << what;
            EXPECT_FALSE(hit) << what;
        }
        if (hit) {
            EXPECT_TRUE(j.at("backup").is_null()) << what;
        } else {
            ++misses;
            EXPECT_TRUE(j.at("backup").is_string()) << what;
        }
        EXPECT_EQ((int)j.at("fanout").size(), K + 1) << what;
        EXPECT_GE((double)j.at("t_verify_s"), 0.0) << what;
        EXPECT_GE((double)j.at("t_stall_s"), 0.0) << what;
        // The build time arrives with the next reply: unknown only in the last round.
        if (b == t.st.spec.rounds - 1) {
            EXPECT_TRUE(j.at("draft_build_s").is_null()) << what;
        } else {
            EXPECT_GE((double)j.at("draft_build_s"), 0.0) << what;
        }
    }
    EXPECT_EQ(last_batch_round, t.st.spec.rounds - 1) << what;
    EXPECT_EQ(accepted, t.st.spec.accepted) << what;
    EXPECT_EQ(emitted, t.st.spec.emitted) << what;
    EXPECT_EQ(lookups, t.st.draft.lookups) << what;
    EXPECT_EQ(hits, t.st.draft.hits) << what;
    EXPECT_EQ(lookups_k, t.st.draft.lookups_k) << what;
    EXPECT_EQ(hits_k, t.st.draft.hits_k) << what;
    EXPECT_EQ(misses, t.st.draft.jit + t.st.draft.ngram + t.st.draft.random) << what;
    // The first token comes from the prefill, every other one from a round.
    for (int i = 0; i < B; ++i)
        EXPECT_EQ(delivered[i], std::vector<int32_t>(t.out[i].begin() + 1, t.out[i].end())) << what << " seq " << i;
}

TEST(SsdTrace, LinesMatchStatsAndTokens) {
    ThreadPool pool(1);
    test::TinyModel target(model_spec(7), 256, 3 * 7), other(model_spec(11), 256, 3 * 7),
        self(model_spec(7), 256, 3 * 7);
    for (auto* d : {&other, &self})
        for (bool force_miss : {false, true}) {
            sched::SsdConfig cfg;
            cfg.k = 3;
            cfg.fanout_budget = 6;
            cfg.force_miss = force_miss;
            cfg.interrupt = false;  // finished caches: a self-draft then always hits
            cfg.backup = force_miss ? sched::BackupKind::Ngram : sched::BackupKind::Jit;
            const std::string what = std::string(d == &self ? "self-draft" : "other draft") +
                                     (force_miss ? " forced misses" : "");
            const Traced t = run_traced(target, *d, pool, cfg, {30, 17, 25});
            expect_consistent(t, cfg, what);
            if (force_miss) {
                EXPECT_EQ(t.st.draft.hits, 0) << what;
            } else if (d == &self) {
                EXPECT_EQ(t.st.draft.hits, t.st.draft.lookups) << what;
                EXPECT_GT(t.st.draft.hits, 0) << what;
            }
            for (int i = 0; i < 3; ++i)
                EXPECT_EQ(t.out[i], test::greedy_ar(target, pool, kPrompts[i], std::vector<int>{30, 17, 25}[i]))
                    << what;
        }
}

TEST(SsdTrace, MissLinesNameTheirBackup) {
    ThreadPool pool(1);
    test::TinyModel target(model_spec(7), 256, 1), other(model_spec(11), 256, 1);
    for (auto b : {sched::BackupKind::Jit, sched::BackupKind::Ngram, sched::BackupKind::Random}) {
        sched::SsdConfig cfg;
        cfg.k = 2;
        cfg.force_miss = true;
        cfg.backup = b;
        const Traced t = run_traced(target, other, pool, cfg, {12});
        expect_consistent(t, cfg, sched::backup_name(b));
        for (const auto& j : t.lines) EXPECT_EQ(j.at("backup"), sched::backup_name(b));
    }
}

TEST(SsdVocabSubset, GreedyMatchesArAndDraftsStayInTheSubset) {
    ThreadPool pool(1);
    test::TinyModel target(model_spec(7), 256, 3 * 7), self(model_spec(7), 256, 3 * 7),
        other(model_spec(11), 256, 3 * 7);
    // The 40 most frequent of 64 ids in a small corpus.
    std::vector<std::vector<int32_t>> corpus;
    for (int i = 0; i < 64; ++i) corpus.push_back(std::vector<int32_t>(1 + (i * 7) % 5, (int32_t)((i * 37) % 64)));
    const spec::VocabSubset subset = spec::VocabSubset::from_corpus(corpus, 64, 40);
    for (auto* d : {&self, &other})
        for (bool interrupt : {false, true}) {
            sched::SsdConfig cfg;
            cfg.k = 3;
            cfg.fanout_budget = 6;
            cfg.interrupt = interrupt;
            const std::string what = std::string(d == &self ? "self-draft" : "other draft") +
                                     (interrupt ? " interrupt" : "");
            const Traced t = run_traced(target, *d, pool, cfg, {30, 20, 25}, &subset);
            expect_consistent(t, cfg, what);
            for (int i = 0; i < 3; ++i)
                EXPECT_EQ(t.out[i], test::greedy_ar(target, pool, kPrompts[i], std::vector<int>{30, 20, 25}[i]))
                    << what << " seq " << i;
            for (const auto& j : t.lines) {
                if (!j.at("hit") && j.at("backup") != "jit") continue;  // n-gram/random drafts are not the model's
                for (int32_t tok : j.at("drafts").get<std::vector<int32_t>>())
                    EXPECT_TRUE(subset.contains(tok)) << what << " draft " << tok;
            }
        }
}

}  // namespace
