// specdec logits: runs a prompt through the model in one forward and writes
// every position's logits, for comparison with an independent implementation
// (tests/python/test_model_parity.py compares them with llama.cpp's).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_commands.h"
#include "core/error.h"
#include "residency_cli_option.h"
#include "runtime/engine.h"
#include "runtime/model_locator.h"

namespace specdec::cli {

int cmd_logits(int argc, char** argv) {
    CLI::App app{"Write the logits of every prompt position", "specdec logits"};
    add_mmap_option(app);
    std::string model, prompt, out_path;
    std::vector<int32_t> tokens;
    bool special = false;
    int chunk = 0;
    runtime::EngineOptions eopts;
    app.add_option("-m,--model", model, "GGUF file or model name");
    app.add_option("-p,--prompt", prompt, "prompt text (tokenized with BOS as the metadata says)");
    app.add_option("--tokens", tokens, "token ids instead of a prompt");
    app.add_flag("--special", special, "parse special tokens written in the prompt");
    app.add_option("-o,--out", out_path, "raw float32 output file: (n_tokens, n_vocab) row-major")->required();
    app.add_option("-t,--threads", eopts.n_threads, "threads (0 = all cores)");
    app.add_option("--chunk", chunk, "rows per forward (0 = the whole prompt in one forward)");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    eopts.model_path = runtime::resolve_model(model);
    auto engine = runtime::Engine::load(eopts);
    if (tokens.empty()) {
        SPECDEC_CHECK(!prompt.empty(), "give -p PROMPT or --tokens IDS");
        tokens = engine->tokenizer().encode(prompt, true, special);
    }
    SPECDEC_CHECK(!tokens.empty() && (int)tokens.size() <= engine->n_ctx(), "token count ", tokens.size(),
                  " must be in [1, ", engine->n_ctx(), "]");
    FILE* f = std::fopen(out_path.c_str(), "wb");
    SPECDEC_CHECK(f, "cannot write '", out_path, "'");
    const int step = chunk > 0 ? chunk : (int)tokens.size();
    model::ForwardBatch batch;
    model::ForwardResult res;
    for (size_t off = 0; off < tokens.size(); off += step) {
        const size_t n = std::min((size_t)step, tokens.size() - off);
        batch.clear();
        batch.add_chain(std::vector<int32_t>(tokens.begin() + off, tokens.begin() + off + n), (int32_t)off, 0, true);
        engine->model().forward(batch, engine->cache(), engine->pool(), res);
        engine->cache().commit_length(0, (int)n);
        std::fwrite(res.logits.data(), sizeof(float), res.logits.size(), f);
    }
    std::fclose(f);
    nlohmann::json j;
    j["tokens"] = tokens;
    j["n_vocab"] = engine->config().n_vocab;
    std::cout << j.dump() << std::endl;
    return 0;
}

}  // namespace specdec::cli
