// SSD greedy identity on real models (short generations): smollm2 drafting
// for itself (every outcome is the draft's top guess: near-total cache hits)
// and the qwen2.5-coder pair (0.5B for 1.5B: hits and misses mixed), at
// batch 1 and 2, against runtime::generate_ar.
#include <gtest/gtest.h>

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
