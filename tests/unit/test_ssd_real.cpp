// SSD greedy identity on real models (short generations): smollm2 drafting
// for itself (every outcome is the draft's top guess: near-total cache hits)
// and the qwen2.5-coder pair (0.5B for 1.5B: hits and misses mixed), at
// batch 1 and 2, against runtime::generate_ar; the draft vocabulary subset
// and the round trace through generate_ssd.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "runtime/engine.h"
#include "sched/ssd_scheduler.h"
#include "unit/model_paths.h"

using namespace specdec;

namespace {

const std::vector<std::string> kPrompts{
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "The three primary colors are",
};

runtime::GenerateRequest request(const std::string& prompt, int n) {
    runtime::GenerateRequest r;
    r.prompt = prompt;
    r.max_tokens = n;
    r.ignore_eos = true;
    return r;
}

std::unique_ptr<runtime::Engine> load(const std::string& path, int n_seq) {
    runtime::EngineOptions o;
    o.model_path = path;
    o.n_ctx = 512;
    o.n_seq = n_seq;
    o.n_threads = 1;  // the draft side has its own thread
    return runtime::Engine::load(o);
}

void expect_identity(runtime::Engine& target, runtime::Engine& draft, int n, double min_hit_rate) {
    std::vector<runtime::GenerateRequest> reqs;
    std::vector<std::vector<int32_t>> ref;
    for (const auto& p : kPrompts) {
        reqs.push_back(request(p, n));
        ref.push_back(runtime::generate_ar(target, reqs.back()).tokens);
    }
    sched::SsdConfig cfg;
    cfg.k = 4;
    cfg.fanout_budget = 6;
    cfg.interrupt = false;
    for (sched::BackupKind b : {sched::BackupKind::Jit, sched::BackupKind::Ngram}) {
        cfg.backup = b;
        sched::SsdStats st;
        const auto r = sched::generate_ssd(target, draft, reqs[0], cfg, &st);
        EXPECT_EQ(r.tokens, ref[0]) << sched::backup_name(b);
        std::printf("[ ssd %s ] hit rate %.2f, tokens/round %.2f, stall %.3fs, draft/verify %.2f, glue reused %d\n",
                    sched::backup_name(b), st.hit_rate(), st.spec.mean_accept_len(), st.stall_s,
                    st.draft_over_verify(), st.draft.glue_reused);
        EXPECT_GE(st.hit_rate(), min_hit_rate) << sched::backup_name(b);
    }
    cfg.backup = sched::BackupKind::Auto;
    cfg.interrupt = true;
    sched::SsdStats st;
    const auto rs = sched::generate_ssd_batch(target, draft, reqs, cfg, &st);
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(rs[i].tokens, ref[i]) << "batched, prompt " << i;
}

}  // namespace

TEST(RealSsdSmolLM, SelfDraftGreedyIdentity) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    auto target = load(path, 2);
    auto draft = load(path, 2 * 7);  // branch slots for the budget of 6
    expect_identity(*target, *draft, 24, 0.7);
}

TEST(RealSsdQwen, DraftPairGreedyIdentity) {
    SPECDEC_REQUIRE_MODEL(tpath, "qwen2.5-coder-1.5b-instruct-q4_k_m");
    SPECDEC_REQUIRE_MODEL(dpath, "qwen2.5-coder-0.5b-instruct-q4_k_m");
    auto target = load(tpath, 2);
    auto draft = load(dpath, 2 * 7);
    expect_identity(*target, *draft, 16, 0.0);
}

// generate_ssd with a draft vocabulary subset (the draft's LM head over 4096
// of 49152 rows) and a round trace: greedy output equals AR; the trace's
// header pins the models and configuration, its rounds add up to the result.
TEST(RealSsdSmolLM, VocabSubsetAndTraceThroughGenerate) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    auto target = load(path, 1);
    auto draft = load(path, 7);
    const auto dir = std::filesystem::temp_directory_path();
    const std::string tag = std::to_string(::getpid());
    const std::string corpus = (dir / ("specdec_ssd_subset_corpus_" + tag + ".jsonl")).string();
    {
        std::ofstream f(corpus);
        f << "{\"turns\": [\"def add(a, b):\\n    return a + b\\n\", \"The colours of the rainbow are red, "
             "orange, yellow, green, blue, indigo and violet.\"]}\n";
    }
    const auto req = request(kPrompts[0], 32);
    const auto ref = runtime::generate_ar(*target, req).tokens;
    sched::SsdConfig cfg;
    cfg.k = 4;
    cfg.fanout_budget = 6;
    cfg.vocab_subset_n = 4096;
    cfg.vocab_subset_path = (dir / ("specdec_ssd_subset_" + tag + ".txt")).string();
    cfg.vocab_corpus_path = corpus;
    cfg.trace_path = (dir / ("specdec_ssd_trace_" + tag + ".jsonl")).string();
    sched::SsdStats st;
    const auto r = sched::generate_ssd(*target, *draft, req, cfg, &st);
    EXPECT_EQ(r.tokens, ref);
    EXPECT_GT(st.spec.accepted, 0);
    std::ifstream in(cfg.trace_path);
    std::string line;
    std::vector<nlohmann::json> lines;
    while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
    ASSERT_FALSE(lines.empty());
    const auto& h = lines[0];
    EXPECT_EQ(h.at("type"), "header");
    EXPECT_EQ(h.at("method"), "ssd");
    EXPECT_EQ(h.at("ssd_k"), 4);
    EXPECT_EQ(h.at("vocab_subset_n"), 4096);
    EXPECT_EQ(h.at("target_hash").get<std::string>().size(), 16u);
    EXPECT_EQ(h.at("draft_hash"), h.at("target_hash"));  // self-draft: the same file
    int rounds = 0, emitted = 0, hits = 0;
    for (size_t i = 1; i < lines.size(); ++i) {
        EXPECT_EQ(lines[i].at("type"), "ssd_round");
        ++rounds;
        emitted += (int)lines[i].at("n_emitted");
        hits += lines[i].at("hit").get<bool>();
    }
    EXPECT_EQ(rounds, st.spec.seq_rounds);
    EXPECT_EQ(emitted, r.n_generated - 1);
    EXPECT_EQ(hits, st.draft.hits);
    for (const auto& f : {corpus, cfg.vocab_subset_path, cfg.trace_path}) std::filesystem::remove(f);
}
