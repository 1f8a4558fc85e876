// specdec dev features IN OUT: the training data of an EAGLE-3 head
// (tools/eagle3_data.py). The target reads each token sequence through the
// prefill every method uses (model::prefill_chunked), in forwards of
// `chunk` tokens, each capturing the head's three feature layers (the inputs
// of layers 2, L/2, L-3: the capture the scheduler and `eagle3-dump` use)
// and the last layer's output (before output_norm), from which training
// recomputes the target's next-token distribution with its LM head; storing
// that instead of logits keeps a 49k-152k vocabulary off the disk.
//
// IN (JSON): {"model", "threads", "ctx", "chunk" (default 512), "sequences":
// [{"out": PATH, and "tokens": [...], or a prompt tokenized as `generate`
// does it ("messages": [{"role", "content"}] through the chat template, or
// "prompt": raw text) followed by "append": [token ids of the response] or
// "append_text": a response written by someone else, tokenized as plain text
// (no BOS, special tokens not parsed), and "max_append" (default: no limit)
// cutting the response short}]}.
// For each sequence PATH receives
// raw float16 rows (n, 4 * n_embd): [layer 2 in | layer L/2 in | layer L-3 in
// | last layer out]. Values beyond float16's range are clamped (a residual
// stream's outliers stay well inside it on the packaged models).
// OUT (JSON): n_embd, n_layer, feature_layers, and per sequence its tokens,
// n_tokens and n_prompt (the tokens before "append": training's loss covers the rest).
// One engine serves the whole list; progress goes to stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_commands.h"
#include "core/error.h"
#include "core/fp16.h"
#include "model/eagle3_head.h"
#include "model/prefill.h"
#include "runtime/engine.h"
#include "runtime/model_locator.h"

namespace specdec::cli {

int dump_features(const std::string& in_path, const std::string& out_path) {
    std::ifstream in(in_path);
    SPECDEC_CHECK(in.good(), "cannot read '", in_path, "'");
    const nlohmann::json req = nlohmann::json::parse(in);
    runtime::EngineOptions eo;
    eo.model_path = runtime::resolve_model(req.at("model").get<std::string>());
    eo.n_threads = req.value("threads", 1);
    eo.n_ctx = req.value("ctx", 0);
    auto engine = runtime::Engine::load(eo);
    const int L = engine->config().n_layer, E = engine->config().n_embd;
    const int chunk = req.value("chunk", 512);
    SPECDEC_CHECK(chunk >= 1, "features: chunk must be positive");
    // The inputs of layers 2, L/2, L-3 are the outputs of layers 1, L/2-1, L-4
    // (the numbering Eagle3Head checks a head's layer ids against).
    const std::vector<int> feature_layers = model::eagle3_default_feature_layers(L);
    SPECDEC_CHECK(L >= 5, "features: the target has ", L, " layers; EAGLE-3 reads layers 2, L/2, L-3");

    nlohmann::json out;
    out["n_embd"] = E;
    out["n_layer"] = L;
    out["feature_layers"] = feature_layers;
    out["sequences"] = nlohmann::json::array();
    const auto t0 = std::chrono::steady_clock::now();
    size_t done_tokens = 0;
    const auto& seqs = req.at("sequences");
    for (size_t si = 0; si < seqs.size(); ++si) {
        const nlohmann::json& sj = seqs[si];
        std::vector<int32_t> tokens;
        if (sj.contains("tokens")) {
            tokens = sj.at("tokens").get<std::vector<int32_t>>();
        } else {
            runtime::GenerateRequest gr;
            if (sj.contains("messages"))
                for (const auto& m : sj.at("messages")) gr.messages.push_back({m.at("role"), m.at("content")});
            else
                gr.prompt = sj.at("prompt").get<std::string>();
            tokens = runtime::tokenize_request(*engine, gr);
        }
        const int n_prompt = (int)tokens.size();
        for (int32_t t : sj.value("append", std::vector<int32_t>{})) tokens.push_back(t);
        if (sj.contains("append_text"))
            for (int32_t t : engine->tokenizer().encode(sj.at("append_text").get<std::string>(), false, false))
                tokens.push_back(t);
        if (sj.contains("max_append")) {
            const int cap = sj.at("max_append").get<int>();
            SPECDEC_CHECK(cap >= 1, "features: sequence ", si, " has max_append ", cap, "; it must be positive");
            if ((int)tokens.size() > n_prompt + cap) tokens.resize((size_t)(n_prompt + cap));
        }
        const std::string path = sj.at("out").get<std::string>();
        const int n = (int)tokens.size();
        SPECDEC_CHECK(n >= 1 && n <= engine->n_ctx(), "features: sequence ", si, " has ", n,
                      " tokens; the context holds ", engine->n_ctx());
        engine->cache().clear(0);
        std::vector<uint16_t> rows((size_t)n * 4 * E);
        model::ForwardBatch b;
        model::ForwardResult r;
        for (int l : feature_layers) b.capture_layers.push_back(l - 1);
        b.capture_layers.push_back(L - 1);
        // The prompt's last row alone asks for logits, and only its argmax:
        // the LM head is applied at train time, not here.
        b.argmax_only = true;
        model::prefill_chunked(engine->model(), engine->cache(), engine->pool(), 0, tokens, chunk, b, r,
                               [&](int p0, int m, const model::ForwardResult& res) {
                                   for (int i = 0; i < m; ++i)
                                       for (int c = 0; c < 4; ++c) {
                                           const float* src = res.hidden[(size_t)c].data() + (size_t)i * E;
                                           uint16_t* dst = rows.data() + ((size_t)(p0 + i) * 4 + (size_t)c) * E;
                                           for (int e = 0; e < E; ++e)
                                               dst[e] = fp32_to_fp16(std::clamp(src[e], -65504.0f, 65504.0f));
                                       }
                               });
        FILE* f = std::fopen(path.c_str(), "wb");
        SPECDEC_CHECK(f, "cannot write '", path, "'");
        const size_t wrote = std::fwrite(rows.data(), sizeof(uint16_t), rows.size(), f);
        SPECDEC_CHECK(std::fclose(f) == 0 && wrote == rows.size(), "short write to '", path, "'");
        out["sequences"].push_back({{"out", path}, {"n_tokens", n}, {"n_prompt", n_prompt}, {"tokens", tokens}});
        done_tokens += (size_t)n;
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "[features] %zu/%zu sequences, %zu tokens, %.1f tok/s\n", si + 1, seqs.size(),
                     done_tokens, (double)done_tokens / std::max(s, 1e-9));
    }
    engine->cache().clear(0);
    std::ofstream(out_path) << out.dump();
    return 0;
}

}  // namespace specdec::cli
