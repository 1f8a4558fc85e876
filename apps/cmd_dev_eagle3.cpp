// specdec dev eagle3-dump IN OUT: the EAGLE-3 head's forward on a token
// sequence, for tests/python/test_eagle3.py to check against an independent
// implementation. IN (JSON): {"model", "eagle3", "tokens": [t0..t_{n-1}],
// "draft_steps": k, "threads"}. The target reads the tokens in one forward
// capturing the head's feature layers (the same capture the scheduler uses);
// the head then runs rows p = 0..n-2 (features of p, token t_{p+1}) in one
// forward, and k self-fed draft steps (the greedy draft token, g = the
// previous row's prenorm output), one forward each.
// OUT (JSON): shapes, the draft tokens (target ids), the feature layers, and
// the names of three raw float32 files written next to it: OUT.features
// (n, 3 * n_embd), OUT.logits (n - 1 + k, draft_vocab), OUT.prenorm
// (n - 1 + k, hidden).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_commands.h"
#include "core/error.h"
#include "runtime/eagle3_draft.h"
#include "runtime/engine.h"
#include "runtime/model_locator.h"

namespace specdec::cli {

namespace {
void write_f32(const std::string& path, const std::vector<float>& v) {
    FILE* f = std::fopen(path.c_str(), "wb");
    SPECDEC_CHECK(f, "cannot write '", path, "'");
    std::fwrite(v.data(), sizeof(float), v.size(), f);
    std::fclose(f);
}
}  // namespace

int eagle3_dump(const std::string& in_path, const std::string& out_path) {
    std::ifstream in(in_path);
    const nlohmann::json req = nlohmann::json::parse(in);
    runtime::EngineOptions eo;
    eo.model_path = runtime::resolve_model(req.at("model").get<std::string>());
    eo.n_threads = req.value("threads", 1);
    auto engine = runtime::Engine::load(eo);
    engine->load_eagle3(req.at("eagle3").get<std::string>());
    runtime::Eagle3Draft& d = *engine->eagle3();
    const model::Eagle3Config& c = d.head->config();
    const std::vector<int32_t> tokens = req.at("tokens").get<std::vector<int32_t>>();
    const int steps = req.value("draft_steps", 0);
    const int n = (int)tokens.size();
    SPECDEC_CHECK(n >= 2 && n + steps + 1 < engine->n_ctx(), "eagle3-dump: need 2 or more tokens within the context");
    const int E = engine->config().n_embd, H = c.hidden, V = c.draft_vocab;

    model::ForwardBatch b;
    model::ForwardResult r;
    b.add_chain(tokens, 0, 0, false);
    for (int l : c.feature_layers) b.capture_layers.push_back(l - 1);
    engine->model().forward(b, engine->cache(), engine->pool(), r);
    std::vector<float> feats((size_t)n * 3 * E);
    for (int p = 0; p < n; ++p)
        for (int l = 0; l < 3; ++l)
            std::copy(r.hidden[l].begin() + (size_t)p * E, r.hidden[l].begin() + (size_t)(p + 1) * E,
                      feats.begin() + ((size_t)p * 3 + l) * E);

    std::vector<float> logits, prenorm;
    std::vector<int32_t> drafts;
    model::Eagle3Batch hb;
    model::Eagle3Output ho;
    std::vector<float> g((size_t)(n - 1) * H);
    d.forward->fuse(feats.data(), n - 1, g.data(), engine->pool());
    hb.clear();
    std::vector<int32_t> anc;
    for (int p = 0; p + 1 < n; ++p) {
        hb.add(tokens[(size_t)p + 1], p, 0, p, anc, true, g.data() + (size_t)p * H, H);
        anc.push_back(p);
    }
    d.forward->forward(hb, *d.cache, engine->pool(), ho);
    d.cache->commit_length(0, n - 1);
    logits = ho.logits;
    prenorm = ho.prenorm;
    for (int s = 0; s < steps; ++s) {
        const float* last = logits.data() + logits.size() - V;
        const int32_t best = (int32_t)(std::max_element(last, last + V) - last);
        const int32_t tok = d.head->d2t_token(best);
        drafts.push_back(tok);
        std::vector<float> gl(prenorm.end() - H, prenorm.end());
        hb.clear();
        hb.add(tok, n - 1 + s, 0, 0, {}, true, gl.data(), H);
        d.forward->forward(hb, *d.cache, engine->pool(), ho);
        d.cache->commit_length(0, 1);
        logits.insert(logits.end(), ho.logits.begin(), ho.logits.end());
        prenorm.insert(prenorm.end(), ho.prenorm.begin(), ho.prenorm.end());
    }
    write_f32(out_path + ".features", feats);
    write_f32(out_path + ".logits", logits);
    write_f32(out_path + ".prenorm", prenorm);
    nlohmann::json j;
    j["n_tokens"] = n;
    j["n_embd"] = E;
    j["hidden"] = H;
    j["draft_vocab"] = V;
    j["rows"] = n - 1 + steps;
    j["draft_tokens"] = drafts;
    j["feature_layers"] = c.feature_layers;
    j["d2t"] = d.head->draft_to_target();
    std::ofstream(out_path) << j.dump();
    return 0;
}

}  // namespace specdec::cli
