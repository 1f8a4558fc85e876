// Greedy identity on real models: every speculative method, both modes, batch
// sizes 1 and 2, emits exactly the tokens of greedy AR (runtime::generate_ar).
#include <gtest/gtest.h>

#include "runtime/engine.h"
#include "sched/sync_scheduler.h"
#include "unit/model_paths.h"

using namespace specdec;

namespace {

const std::vector<std::string> kPrompts{
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "The three primary colors are",
    "from typing import List\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n",
};

runtime::GenerateRequest request(const std::string& prompt, int n) {
    runtime::GenerateRequest r;
    r.prompt = prompt;
    r.max_tokens = n;
    r.ignore_eos = true;  // full length: more tokens compared
    return r;
}

std::unique_ptr<runtime::Engine> load(const std::string& path, int n_seq) {
    runtime::EngineOptions o;
    o.model_path = path;
    o.n_ctx = 512;
    o.n_seq = n_seq;
    o.n_threads = 2;
    return runtime::Engine::load(o);
}

void expect_identity(runtime::Engine& target, runtime::Engine* draft, const std::vector<sched::SpecConfig>& cfgs,
                     int n, size_t n_prompts, bool batch, double min_tau) {
    std::vector<runtime::GenerateRequest> reqs;
    std::vector<std::vector<int32_t>> ref;
    for (size_t i = 0; i < n_prompts; ++i) {
        reqs.push_back(request(kPrompts[i], n));
        ref.push_back(runtime::generate_ar(target, reqs.back()).tokens);
    }
    for (const auto& cfg : cfgs) {
        const std::string label = std::string(sched::method_name(cfg.method)) + " " + sched::mode_name(cfg.mode);
        double emitted = 0, rounds = 0;
        for (size_t i = 0; i < reqs.size(); ++i) {
            sched::SpecStats st;
            const auto r = sched::generate_speculative(target, draft, reqs[i], cfg, &st);
            EXPECT_EQ(r.tokens, ref[i]) << label << " prompt " << i;
            emitted += st.emitted;
            rounds += st.seq_rounds;
        }
        EXPECT_GE(emitted / rounds, min_tau) << label;
        if (batch) {
            sched::SpecStats st;
            const auto rs = sched::generate_speculative_batch(target, draft, reqs, cfg, &st);
            for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(rs[i].tokens, ref[i]) << label << " batched, prompt " << i;
        }
    }
}

sched::SpecConfig cfg(sched::Method m, spec::ExecMode mode, int k = 5, int topk = 4, int depth = 5, int budget = 16) {
    sched::SpecConfig c;
    c.method = m;
    c.mode = mode;
    c.draft_k = k;
    c.tree_topk = topk;
    c.tree_depth = depth;
    c.tree_budget = budget;
    return c;
}

}  // namespace

// The CI model drafting for itself: acceptance must be (nearly) total.
TEST(RealSchedSmolLM, SelfDraftGreedyIdentity) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    auto target = load(path, 3);
    auto draft = load(path, 3);
    using sched::Method;
    const auto R = spec::ExecMode::Reference, P = spec::ExecMode::Performance;
    // Both modes and both shapes; batch 2 (two trees in one target forward) too.
    sched::SpecConfig lookup = cfg(Method::Chain, P, 4);
    lookup.lookup_min = 2;  // lookup chains in some rounds, drafts in the others
    lookup.lookup_k = 8;
    expect_identity(*target, draft.get(),
                    {cfg(Method::Chain, R, 4), cfg(Method::Tree, P, 5, 4, 6, 16), lookup}, 32, 2, true, 3.0);
}

TEST(RealSchedSmolLM, NgramGreedyIdentity) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    auto target = load(path, 3);
    expect_identity(*target, nullptr,
                    {cfg(sched::Method::NGram, spec::ExecMode::Reference)}, 48, 3, true, 1.0);
}

// The real speculation pair: qwen2.5-coder 0.5B drafting for 1.5B.
TEST(RealSchedQwen, DraftPairGreedyIdentity) {
    SPECDEC_REQUIRE_MODEL(tpath, "qwen2.5-coder-1.5b-instruct-q4_k_m");
    SPECDEC_REQUIRE_MODEL(dpath, "qwen2.5-coder-0.5b-instruct-q4_k_m");
    auto target = load(tpath, 2);
    auto draft = load(dpath, 2);
    using sched::Method;
    sched::SpecConfig lookup = cfg(Method::Tree, spec::ExecMode::Performance, 5, 2, 5, 8);
    lookup.tree_width = 1;
    lookup.lookup_min = 2;
    expect_identity(*target, draft.get(),
                    {cfg(Method::Chain, spec::ExecMode::Performance, 4),
                     cfg(Method::Tree, spec::ExecMode::Reference, 5, 3, 4, 8), lookup},
                    32, 2, true, 1.2);
}
