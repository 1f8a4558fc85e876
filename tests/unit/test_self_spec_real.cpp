// Layer-skipping self-speculation on the CI model (smollm2, 30 layers): greedy
// output identical to AR for several first-L depths and layer lists, with every
// method that takes a draft (chain, tree, ssd), at batch 1 and 2. The draft is
// a second engine on the same file (weights shared through the mapping) whose
// KV holds its kept layers only.
#include <gtest/gtest.h>

#include "model/layer_list.h"
#include "runtime/engine.h"
#include "sched/ssd_scheduler.h"
#include "sched/sync_scheduler.h"
#include "unit/model_paths.h"

using namespace specdec;

namespace {

const std::vector<std::string> kPrompts{
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "The three primary colors are",
};
const std::vector<std::string> kLayerSets{"8", "0-14", "0-9,28-29", "0,2,4-20,27,29"};

runtime::GenerateRequest request(const std::string& prompt, int n) {
    runtime::GenerateRequest r;
    r.prompt = prompt;
    r.max_tokens = n;
    r.ignore_eos = true;
    return r;
}

std::unique_ptr<runtime::Engine> load(const std::string& path, int n_seq, const std::string& layers = "") {
    runtime::EngineOptions o;
    o.model_path = path;
    o.n_ctx = 256;
    o.n_seq = n_seq;
    o.n_threads = 2;
    if (!layers.empty()) {
        o.keep_layers = model::parse_layer_list(layers);
        o.n_threads = 1;  // chain/tree run the draft on the target's pool
    }
    return runtime::Engine::load(o);
}

struct Fixture {
    std::string path;
    std::unique_ptr<runtime::Engine> target;
    std::vector<runtime::GenerateRequest> reqs;
    std::vector<std::vector<int32_t>> ref;
    explicit Fixture(const std::string& p, int n) : path(p), target(load(p, 2)) {
        for (const auto& s : kPrompts) {
            reqs.push_back(request(s, n));
            ref.push_back(runtime::generate_ar(*target, reqs.back()).tokens);
        }
    }
};

sched::SpecConfig config(sched::Method m, spec::ExecMode mode) {
    sched::SpecConfig c;
    c.method = m;
    c.mode = mode;
    c.draft_k = 3;
    c.tree_topk = 3;
    c.tree_depth = 3;
    c.tree_budget = 8;
    return c;
}

}  // namespace

TEST(RealSelfSpecSmolLM, ChainAndTreeGreedyIdentity) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    Fixture f(path, 24);
    using sched::Method;
    const auto R = spec::ExecMode::Reference, P = spec::ExecMode::Performance;
    for (const auto& layers : kLayerSets) {
        auto draft = load(path, 2, layers);
        EXPECT_EQ(model::format_layer_list(draft->model().layers_run()),
                  model::format_layer_list(model::parse_layer_list(layers)));
        EXPECT_EQ(draft->cache().n_layer(), draft->model().n_layers_run());
        for (const auto& cfg : {config(Method::Chain, R), config(Method::Tree, P), config(Method::Tree, R)}) {
            const std::string label = layers + " " + sched::method_name(cfg.method) + " " + sched::mode_name(cfg.mode);
            double emitted = 0, rounds = 0;
            for (size_t i = 0; i < f.reqs.size(); ++i) {
                sched::SpecStats st;
                EXPECT_EQ(sched::generate_speculative(*f.target, draft.get(), f.reqs[i], cfg, &st).tokens, f.ref[i])
                    << label << " prompt " << i;
                emitted += st.emitted;
                rounds += st.seq_rounds;
            }
            std::printf("[ %s ] tau %.2f\n", label.c_str(), emitted / rounds);
            EXPECT_GE(emitted / rounds, 1.0) << label;
        }
    }
    // Two sequences in one target forward, each with its own shallow draft KV.
    auto draft = load(path, 2, "0-9,28-29");
    const auto rs = sched::generate_speculative_batch(*f.target, draft.get(), f.reqs,
                                                      config(sched::Method::Tree, spec::ExecMode::Reference));
    for (size_t i = 0; i < f.reqs.size(); ++i) EXPECT_EQ(rs[i].tokens, f.ref[i]) << "batched, prompt " << i;
}

TEST(RealSelfSpecSmolLM, SsdGreedyIdentity) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    Fixture f(path, 16);
    sched::SsdConfig cfg;
    cfg.k = 3;
    cfg.fanout_budget = 4;
    cfg.interrupt = false;
    for (const std::string layers : {"10", "0-9,28-29"}) {
        auto draft = load(path, 2 * (1 + cfg.fanout_budget), layers);
        for (sched::BackupKind b : {sched::BackupKind::Jit, sched::BackupKind::Ngram}) {
            cfg.backup = b;
            sched::SsdStats st;
            EXPECT_EQ(sched::generate_ssd(*f.target, *draft, f.reqs[0], cfg, &st).tokens, f.ref[0])
                << layers << " " << sched::backup_name(b);
            std::printf("[ ssd %s %s ] hit rate %.2f, tokens/round %.2f\n", layers.c_str(), sched::backup_name(b),
                        st.hit_rate(), st.spec.mean_accept_len());
        }
        cfg.backup = sched::BackupKind::Auto;
        const auto rs = sched::generate_ssd_batch(*f.target, *draft, f.reqs, cfg);
        for (size_t i = 0; i < f.reqs.size(); ++i) EXPECT_EQ(rs[i].tokens, f.ref[i]) << layers << " batched " << i;
    }
}
