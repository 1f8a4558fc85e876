// specdec generate: one prompt in, text out (plain or one JSON object).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_commands.h"
#include "core/error.h"
#include "runtime/engine.h"
#include "runtime/model_locator.h"

namespace specdec::cli {

int cmd_generate(int argc, char** argv) {
    CLI::App app{"Generate text from a prompt", "specdec generate"};
    std::string model, prompt, prompt_file, system;
    bool chat = false, json = false, ignore_eos = false;
    runtime::GenerateRequest req;
    runtime::EngineOptions eopts;
    app.add_option("-m,--model", model, "GGUF file or model name from models/manifest.json (default: the manifest's default)");
    app.add_option("-p,--prompt", prompt, "prompt text");
    app.add_option("-f,--file", prompt_file, "read the prompt from a file")->check(CLI::ExistingFile);
    app.add_flag("--chat", chat, "wrap the prompt as a user message in the model's chat template");
    app.add_option("--system", system, "system message (with --chat)");
    app.add_option("-n,--max-tokens", req.max_tokens, "tokens to generate")->check(CLI::Range(1, 1 << 20));
    app.add_option("--temp", req.sampling.temperature, "temperature (0 = greedy)")->check(CLI::Range(0.0, 100.0));
    app.add_option("--top-k", req.sampling.top_k, "top-k (0 = off)")->check(CLI::NonNegativeNumber);
    app.add_option("--top-p", req.sampling.top_p, "top-p (1 = off)")->check(CLI::Range(0.0, 1.0));
    app.add_option("--min-p", req.sampling.min_p, "min-p (0 = off)")->check(CLI::Range(0.0, 1.0));
    app.add_option("--repeat-penalty", req.sampling.repeat_penalty, "repetition penalty (1 = off)");
    app.add_option("--repeat-last-n", req.sampling.repeat_last_n, "history the penalty sees");
    app.add_option("--seed", req.sampling.seed, "random seed");
    app.add_option("--stop", req.stop, "stop string (repeatable)");
    app.add_flag("--ignore-eos", ignore_eos, "do not stop at end-of-generation tokens");
    app.add_option("-t,--threads", eopts.n_threads, "threads (0 = all cores)")->check(CLI::NonNegativeNumber);
    app.add_option("-c,--ctx", eopts.n_ctx, "context size in tokens (0 = min(model, 4096))")->check(CLI::NonNegativeNumber);
    app.add_flag("--json", json, "print one JSON object instead of streaming text");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    if (!prompt_file.empty()) {
        std::ifstream in(prompt_file, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        prompt = ss.str();
    }
    SPECDEC_CHECK(!prompt.empty(), "no prompt given (use -p TEXT or -f FILE)");
    req.ignore_eos = ignore_eos;
    if (chat) {
        if (!system.empty()) req.messages.push_back({"system", system});
        req.messages.push_back({"user", prompt});
    } else {
        req.prompt = prompt;
    }
    eopts.model_path = runtime::resolve_model(model);
    auto engine = runtime::Engine::load(eopts);

    runtime::TokenCallback stream;
    if (!json) {
        stream = [](const std::string& piece) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
            return true;
        };
    }
    const runtime::GenerateResult r = runtime::generate_ar(*engine, req, stream);
    if (json) {
        nlohmann::json j;
        j["text"] = r.text;
        j["tokens"] = r.tokens;
        j["n_prompt"] = r.n_prompt;
        j["n_generated"] = r.n_generated;
        j["prefill_s"] = r.prefill_s;
        j["decode_s"] = r.decode_s;
        j["decode_tok_s"] = r.decode_tok_s();
        j["prefill_tok_s"] = r.prefill_s > 0 ? r.n_prompt / r.prefill_s : 0.0;
        j["finish_reason"] = r.finish_reason;
        j["method"] = "ar";
        j["model"] = eopts.model_path;
        j["threads"] = engine->pool().size();
        j["seed"] = req.sampling.seed;
        j["temperature"] = req.sampling.temperature;
        std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    } else {
        std::printf("\n");
        std::fprintf(stderr, "[%d prompt tokens, %.1f tok/s prefill; %d generated, %.1f tok/s decode; %s]\n",
                     r.n_prompt, r.prefill_s > 0 ? r.n_prompt / r.prefill_s : 0.0, r.n_generated, r.decode_tok_s(),
                     r.finish_reason.c_str());
    }
    return 0;
}

}  // namespace specdec::cli
