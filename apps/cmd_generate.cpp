// specdec generate: one prompt in, text out (plain or one JSON object), through
// the public API (specdec/engine.h) for every method but ssd (generate_ssd.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_commands.h"
#include "generate_ssd.h"
#include "lookup_cli_options.h"
#include "residency_cli_option.h"
#include "ssd_cli_options.h"
#include "core/error.h"
#include "runtime/draft_source.h"
#include "runtime/model_locator.h"
#include "sched/generation_stats.h"
#include "sched/spec_config.h"
#include "transport/zmq_address.h"
#include "specdec/engine.h"

namespace specdec::cli {

int cmd_generate(int argc, char** argv) {
    CLI::App app{"Generate text from a prompt", "specdec generate"};
    add_mmap_option(app);
    std::string model, prompt, prompt_file, system;
    bool chat = false, json = false, ignore_eos = false;
    Request req;
    EngineOptions opts;  // threads and context here; the model and the draft once the method is known
    app.add_option("-m,--model", model, "GGUF file or model name from models/manifest.json (default: the manifest's default)");
    app.add_option("-p,--prompt", prompt, "prompt text");
    app.add_option("-f,--file", prompt_file, "read the prompt from a file")->check(CLI::ExistingFile);
    app.add_flag("--chat", chat, "wrap the prompt as a user message in the model's chat template");
    app.add_option("--system", system, "system message (with --chat)");
    app.add_option("--chat-template", opts.chat_template,
                   "Jinja chat template file used instead of the model's (with --chat)")
        ->check(CLI::ExistingFile);
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
    app.add_option("-t,--threads", opts.threads, "threads (0 = all cores)")->check(CLI::NonNegativeNumber);
    app.add_option("-c,--ctx", opts.ctx, "context size in tokens (0 = min(model, 4096))")->check(CLI::NonNegativeNumber);
    app.add_flag("--json", json, "print one JSON object instead of streaming text");
    // Speculative decoding.
    SpecConfig& spec = req.spec;
    std::string method, draft_model, mode = "performance";
    app.add_option("--method", method,
                   "decoding method: auto (each round the cost model picks a draft chain, a lookup chain or "
                   "none; the default when greedy), ar (the default when sampling: a seed then reproduces "
                   "the text), chain, tree, ngram, ssd")
        ->check(CLI::IsMember({"auto", "ar", "chain", "tree", "ngram", "ssd"}));
    app.add_option("-d,--draft", draft_model, "draft model (GGUF file or manifest name) for chain, tree and auto");
    std::string eagle3;
    app.add_option("--eagle3", eagle3,
                   "EAGLE-3 draft head for auto, chain and tree (a directory with config.json and "
                   "model.safetensors, Hugging Face or vllm speculators layout, or llama.cpp's eagle3 GGUF file), "
                   "instead of -d");
    std::string draft_layers;
    app.add_option("--draft-layers", draft_layers,
                   "self-speculation (no -d needed): the draft is the target's first L layers (L), the layers "
                   "listed (0-7,10,12: kept in order, then the final norm and LM head), or auto (the choice "
                   "`specdec calibrate` saved next to the model)");
    app.add_option("--draft-k", spec.draft_k, "draft chain length (chain, ngram)")->check(CLI::Range(1, 64));
    app.add_option("--tree-topk", spec.tree_topk, "tree: children per node")->check(CLI::Range(1, 32));
    app.add_option("--tree-width", spec.tree_width, "tree: nodes expanded per depth (0 = --tree-topk)")
        ->check(CLI::Range(0, 64));
    app.add_option("--chain-min-prob", spec.chain_min_prob,
                   "chain: stop drafting after a token the draft gives less than this probability (0 = off)")
        ->check(CLI::Range(0.0, 1.0));
    app.add_option("--tree-depth", spec.tree_depth, "tree: max draft depth")->check(CLI::Range(1, 64));
    app.add_option("--tree-budget", spec.tree_budget, "tree: max nodes incl. the root")->check(CLI::Range(2, 512));
    app.add_flag("--tree-sampled", spec.tree_sampled, "tree under sampling: draw children from the draft distribution");
    app.add_option("--ngram-min", spec.ngram_min, "ngram: shortest suffix to match")->check(CLI::Range(1, 16));
    app.add_option("--ngram-max", spec.ngram_max, "ngram: longest suffix to match")->check(CLI::Range(1, 16));
    add_lookup_options(app, spec);
    add_auto_options(app, spec);
    app.add_option("--mode", mode, "reference (every invariant, full traces) or performance (cheap checks)")
        ->check(CLI::IsMember({"reference", "performance"}));
    app.add_option("--draft-window", spec.draft_window, "draft sees at most this many recent tokens (0 = all)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--vocab-subset", spec.vocab_subset_n, "draft proposes only the N most frequent target tokens")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--vocab-subset-file", spec.vocab_subset_path, "cached vocabulary subset (built if missing)");
    app.add_option("--vocab-corpus", spec.vocab_corpus_path, "JSONL corpus to count token frequencies");
    app.add_option("--trace", spec.trace_path, "write one JSON line per round to FILE");
    // SSD (Saguaro): asynchronous draft with a speculation cache.
    sched::SsdConfig ssd;
    SsdCliOptions ssd_cli;
    ssd_cli.add_to(app, ssd);
    int ssd_target_threads = 0;
    app.add_option("--ssd-target-threads", ssd_target_threads,
                   "ssd: threads of the target side (0: what the draft side leaves of -t)")
        ->check(CLI::Range(0, 256));
    std::string ssd_draft;
    bool allow_remote = false;
    add_remote_draft_options(app, ssd_draft, allow_remote, &ssd.link_timeout_ms,
                             "ssd: the draft side is `specdec draft-serve` at this address (tcp://127.0.0.1:PORT or "
                             "ipc://PATH) instead of a thread here; no -d needed");
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
    // A head is given to draft with: auto when greedy (as with -d), chain when
    // sampling (the head's drafts are what it was given for), unless --method says.
    if (method.empty()) {
        method = default_method(req.sampling);
        if (!eagle3.empty() && method == "ar") method = "chain";
    }
    // ssd runs through cli/generate_ssd.h, which exposes all of SSD's options.
    spec.method = sched::parse_method(method);
    const bool ssd_asked = spec.method == sched::Method::Ssd;
    ssd_cli.apply(ssd);
    ssd.ngram_min = spec.ngram_min;
    ssd.ngram_max = spec.ngram_max;
    sched::SpecConfig lookup_cfg = spec;
    lookup_cfg.draft_k = ssd.k;  // a lookup chain as long as a speculation, unless --lookup-k says otherwise
    ssd.lookup = sched::lookup_first_options(lookup_cfg);
    ssd.trace_path = spec.trace_path;
    ssd.vocab_subset_n = spec.vocab_subset_n;
    ssd.vocab_subset_path = spec.vocab_subset_path;
    ssd.vocab_corpus_path = spec.vocab_corpus_path;
    ssd.remote_draft = ssd_draft;
    if (ssd_asked) ssd.validate();
    SPECDEC_CHECK(ssd_draft.empty() || ssd_asked, "--ssd-draft is for --method ssd, not ", method);
    SPECDEC_CHECK(ssd_draft.empty() || (draft_model.empty() && draft_layers.empty()),
                  "give either --ssd-draft ADDR (the draft model is the server's) or -d DRAFT / --draft-layers L");
    if (!ssd_draft.empty()) transport::check_endpoint(ssd_draft, allow_remote, "--ssd-draft");
    spec.mode = sched::parse_mode(mode);
    const bool self_spec = !draft_layers.empty();
    SPECDEC_CHECK(eagle3.empty() || ((spec.needs_draft() || spec.method == sched::Method::Auto) && !ssd_asked),
                  "--eagle3 drafts for --method auto, chain or tree, not ", method);
    SPECDEC_CHECK(eagle3.empty() || (draft_model.empty() && draft_layers.empty()),
                  "give either --eagle3 HEAD or -d DRAFT / --draft-layers L, not both");
    SPECDEC_CHECK(!spec.needs_draft() || !draft_model.empty() || self_spec || !eagle3.empty() || !ssd_draft.empty(),
                  "--method ", method,
                  " needs a draft model (-d DRAFT), a self-speculation depth (--draft-layers L) or an EAGLE-3 head ",
                  "(--eagle3 HEAD)", ssd_asked ? " or a draft server (--ssd-draft ADDR)" : "");
    SPECDEC_CHECK(!self_spec || draft_model.empty(), "give either -d DRAFT or --draft-layers L, not both");

    const std::string model_path = runtime::resolve_model(model);
    TokenCallback stream;
    if (!json) {
        stream = [](const std::string& piece) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
            return true;
        };
    }
    Result r;
    nlohmann::json ssd_stats;
    std::string used_model;
    int threads = 0;
    // SSD with `--draft-layers auto` that calibration found slower than AR
    // decodes with ar, through Engine::generate (the note says so).
    bool ssd_run = ssd_asked;
    if (ssd_asked && self_spec) {
        if (runtime::resolve_draft_layers(draft_layers, model_path).use_ar) {
            std::fprintf(stderr, "note: calibration found no draft depth faster than AR; decoding with ar\n");
            ssd_run = false;
            method = "ar";
            spec.method = sched::Method::AR;
        }
    }
    if (ssd_run) {
        SsdGenerateOptions so;
        so.engine = opts;
        so.engine.model = model_path;
        so.engine.draft = draft_model;
        so.engine.draft_layers = draft_layers;
        so.target_threads = ssd_target_threads;
        so.ssd = ssd;
        so.allow_remote = allow_remote;
        SsdGenerateOutput out = generate_ssd(so, req, stream);
        r = std::move(out.result);
        ssd_stats = std::move(out.ssd_stats);
        used_model = out.model_path;
        threads = out.threads;
    } else {
        // Every other method goes through the public API. The draft is loaded
        // only for the methods that draft with a model.
        const bool uses_draft = spec.needs_draft() || spec.method == sched::Method::Auto;
        opts.model = model_path;
        opts.eagle3 = eagle3;
        if (uses_draft) {
            opts.draft = draft_model;
            opts.draft_layers = draft_layers;
        } else if (self_spec) {
            // Parsed (and an `auto` file read) even when no draft runs, so bad input is always reported.
            (void)runtime::resolve_draft_layers(draft_layers, model_path);
        }
        Engine engine(opts);
        req.method = method;
        req.on_text = stream;
        // Chain or tree with a calibration that found AR faster: the output is
        // identical (lossless), and AR is what calibration measured fastest.
        if (engine.resolve_method(req) != method)
            std::fprintf(stderr, "note: calibration found no draft depth faster than AR; decoding with ar\n");
        r = engine.generate(req);
        used_model = engine.model_path();
        threads = engine.threads();
    }
    if (json) {
        nlohmann::json j = sched::generation_stats(r);
        j["text"] = r.text;
        j["tokens"] = r.tokens;
        if (r.speculative) j["mode"] = mode;
        if (!ssd_stats.is_null()) j.update(ssd_stats);
        j["model"] = used_model;
        j["threads"] = threads;
        j["seed"] = req.sampling.seed;
        j["temperature"] = req.sampling.temperature;
        std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    } else {
        std::printf("\n");
        std::fflush(stdout);  // the stats line goes to stderr: keep it after the text
        std::fprintf(stderr, "[%d prompt tokens, %.1f tok/s prefill; %d generated, %.1f tok/s decode; %s]\n",
                     r.n_prompt, r.prefill_tok_s(), r.n_generated, r.decode_tok_s(), r.finish_reason.c_str());
    }
    return 0;
}

}  // namespace specdec::cli
