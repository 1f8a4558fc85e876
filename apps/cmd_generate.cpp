// specdec generate: one prompt in, text out (plain or one JSON object).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli_commands.h"
#include "lookup_cli_options.h"
#include "ssd_cli_options.h"
#include "core/error.h"
#include "model/layer_list.h"
#include "runtime/draft_source.h"
#include "runtime/engine.h"
#include "runtime/model_locator.h"
#include "sched/ssd_scheduler.h"
#include "sched/sync_scheduler.h"

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
    // Speculative decoding.
    sched::SpecConfig spec;
    std::string method, draft_model, mode = "performance";
    app.add_option("--method", method,
                   "decoding method: auto (each round the cost model picks a draft chain, a lookup chain or "
                   "none; the default when greedy), ar (the default when sampling: a seed then reproduces "
                   "the text), chain, tree, ngram, ssd")
        ->check(CLI::IsMember({"auto", "ar", "chain", "tree", "ngram", "ssd"}));
    app.add_option("-d,--draft", draft_model, "draft model (GGUF file or manifest name) for chain, tree and auto");
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
    // Auto's choices depend on measured times, so under sampling a seed would
    // not reproduce its text from run to run (the output is still exact in
    // distribution): there the default is AR.
    if (method.empty()) method = req.sampling.greedy() ? "auto" : "ar";
    const bool ssd_asked = method == "ssd";  // not a SyncScheduler method
    spec.method = sched::parse_method(ssd_asked ? "chain" : method);
    ssd_cli.apply(ssd);
    ssd.ngram_min = spec.ngram_min;
    ssd.ngram_max = spec.ngram_max;
    ssd.trace_path = spec.trace_path;
    ssd.vocab_subset_n = spec.vocab_subset_n;
    ssd.vocab_subset_path = spec.vocab_subset_path;
    ssd.vocab_corpus_path = spec.vocab_corpus_path;
    if (ssd_asked) {
        ssd.validate();
        // The thread layout. -t T (default: every core) is what both sides
        // share: the draft takes --ssd-draft-threads of it and the target the
        // rest, as specdec bench splits it. Giving the target all T threads
        // plus a draft thread (--ssd-target-threads, more threads than cores)
        // measured slower on the 2-core qwen pair (docs/benchmarks.md).
        const int total = eopts.n_threads > 0 ? eopts.n_threads : (int)std::thread::hardware_concurrency();
        eopts.n_threads = ssd_target_threads > 0 ? ssd_target_threads : std::max(1, total - ssd.draft_threads);
    }
    spec.mode = sched::parse_mode(mode);
    const bool self_spec = !draft_layers.empty();
    SPECDEC_CHECK(!spec.needs_draft() || !draft_model.empty() || self_spec, "--method ", method,
                  " needs a draft model (-d DRAFT) or a self-speculation depth (--draft-layers L)");
    SPECDEC_CHECK(!self_spec || draft_model.empty(), "give either -d DRAFT or --draft-layers L, not both");
    std::vector<int> keep_layers;
    bool auto_without_draft = false;
    if (self_spec) {
        // Parsed (and an `auto` file read) even when no draft runs, so bad input is always reported.
        const runtime::DraftLayers d = runtime::resolve_draft_layers(draft_layers, eopts.model_path);
        // Auto keeps prompt lookup and drops the draft that calibration found slower than AR.
        if (d.use_ar && spec.method == sched::Method::Auto) auto_without_draft = true;
        if (d.use_ar && spec.needs_draft()) {
            // Output is identical either way (lossless); AR is what calibration measured fastest.
            std::fprintf(stderr, "note: calibration found no draft depth faster than AR; decoding with ar\n");
            method = "ar";
            spec.method = sched::Method::AR;
        }
        keep_layers = d.keep_layers;
    }
    const bool is_ssd = method == "ssd";
    auto engine = runtime::Engine::load(eopts);
    std::unique_ptr<runtime::Engine> draft;
    const bool auto_draft =
        spec.method == sched::Method::Auto && (!draft_model.empty() || self_spec) && !auto_without_draft;
    if (spec.needs_draft() || is_ssd || auto_draft) {
        runtime::EngineOptions dopts = eopts;
        dopts.model_path = self_spec ? eopts.model_path : runtime::resolve_model(draft_model);
        dopts.keep_layers = keep_layers;  // validated against the model when it loads
        dopts.n_ctx = engine->n_ctx();
        // chain/tree: the draft runs on the target's pool; ssd: on its worker's
        // own pool. Either way the engine's pool stays idle.
        dopts.n_threads = 1;
        // ssd: one scratch sequence slot per cached branch (untouched KV pages cost nothing).
        if (is_ssd) dopts.n_seq = 1 + ssd.fanout_budget;
        draft = runtime::Engine::load_draft(*engine, dopts);
    }

    runtime::TokenCallback stream;
    if (!json) {
        stream = [](const std::string& piece) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
            return true;
        };
    }
    sched::SpecStats st;
    sched::SsdStats sst;
    const bool speculative = is_ssd || spec.method != sched::Method::AR || !spec.trace_path.empty();
    const runtime::GenerateResult r =
        is_ssd ? sched::generate_ssd(*engine, *draft, req, ssd, &sst, stream)
        : speculative ? sched::generate_speculative(*engine, draft.get(), req, spec, &st, stream)
                      : runtime::generate_ar(*engine, req, stream);
    if (is_ssd) st = sst.spec;
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
        j["method"] = method;
        if (speculative) {
            j["mode"] = mode;
            j["rounds"] = st.rounds;
            j["mean_accept_len"] = st.mean_accept_len();
            j["drafted"] = st.drafted;
            j["accepted"] = st.accepted;
            j["lookup_rounds"] = st.lookup_rounds;
            j["lookup_accepted"] = st.lookup_accepted;
            j["draft_s"] = st.draft_s;
            j["tree_s"] = st.tree_s;
            j["verify_s"] = st.verify_s;
            j["commit_s"] = st.commit_s;
            if (draft) j["draft_model"] = draft->options().model_path;
            if (spec.method == sched::Method::Auto)
                j["auto"] = {{"rounds_none", st.auto_none},
                             {"rounds_lookup", st.auto_lookup},
                             {"rounds_draft", st.auto_draft},
                             {"predicted_s", st.auto_predicted_s},
                             {"measured_s", st.auto_measured_s},
                             {"costs_from", st.auto_costs_from},
                             {"calibration_s", st.auto_calibration_s}};
            if (draft && self_spec) j["draft_layers"] = model::format_layer_list(draft->model().layers_run());
            if (is_ssd) {
                j["cache_hit_rate"] = sst.hit_rate();
                j["stall_s"] = sst.stall_s;
                j["ssd_k"] = ssd.k;
                j["fanout"] = sched::fanout_name(ssd.fanout);
                j["fanout_budget"] = ssd.fanout_budget;
                j["fanout_last"] = sst.draft.fanout;
                j["saguaro_c"] = ssd.saguaro_c;
                j["backup"] = sched::backup_name(ssd.backup);
                j["cache_lookups_k"] = sst.draft.lookups_k;
                j["cache_hits_k"] = sst.draft.hits_k;
                nlohmann::json rate_k = nlohmann::json::array();  // null where no lookup had that k
                for (size_t k = 0; k < sst.draft.lookups_k.size(); ++k)
                    rate_k.push_back(sst.draft.lookups_k[k] > 0
                                         ? nlohmann::json((double)sst.draft.hits_k[k] / sst.draft.lookups_k[k])
                                         : nlohmann::json(nullptr));
                j["cache_hit_rate_k"] = rate_k;
                j["cache_lookups"] = sst.draft.lookups;
                j["cache_hits"] = sst.draft.hits;
                j["backups"] = {{"jit", sst.draft.jit}, {"ngram", sst.draft.ngram}, {"random", sst.draft.random}};
                j["draft_tree_s"] = sst.draft.tree_s;
                j["draft_over_verify"] = sst.draft_over_verify();
                j["backup_s"] = sst.draft.backup_s;
                j["interrupted_builds"] = sst.draft.interrupted;
                j["glue_reused"] = sst.draft.glue_reused;
                j["acceptance"] = sst.draft.acceptance;
                j["miss_exponent"] = sst.draft.miss_exponent;
                j["tokens_per_round"] = st.mean_accept_len();
                j["draft_threads"] = ssd.draft_threads;
                j["target_threads"] = engine->pool().size();
                j["draft_nice"] = ssd.draft_nice;
                j["seq_rounds"] = st.seq_rounds;
                j["emitted"] = st.emitted;
                if (ssd.vocab_subset_n > 0) j["vocab_subset_n"] = ssd.vocab_subset_n;
            }
        } else {
            j["rounds"] = r.n_generated > 0 ? r.n_generated - 1 : 0;
            j["mean_accept_len"] = 1.0;
        }
        j["model"] = eopts.model_path;
        j["threads"] = engine->pool().size();
        j["seed"] = req.sampling.seed;
        j["temperature"] = req.sampling.temperature;
        std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    } else {
        std::printf("\n");
        std::fflush(stdout);  // the stats line goes to stderr: keep it after the text
        std::fprintf(stderr, "[%d prompt tokens, %.1f tok/s prefill; %d generated, %.1f tok/s decode; %s]\n",
                     r.n_prompt, r.prefill_s > 0 ? r.n_prompt / r.prefill_s : 0.0, r.n_generated, r.decode_tok_s(),
                     r.finish_reason.c_str());
    }
    return 0;
}

}  // namespace specdec::cli
