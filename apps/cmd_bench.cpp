// specdec bench: llama-bench-style sweeps of decoding methods over prompt sets
// (issue #7), and an AR micro-benchmark of prefill, decode and N-row forwards
// (issue #4), with the llama.cpp baseline and plots.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "bench/ar_microbench.h"
#include "bench/bench_options.h"
#include "bench/bench_report.h"
#include "bench/bench_runner.h"
#include "bench/prompt_set.h"
#include "bench/sys_info.h"
#include "cli_commands.h"
#include "residency_cli_option.h"
#include "ssd_cli_options.h"
#include "core/error.h"
#include "runtime/draft_source.h"
#include "runtime/model_locator.h"
#include "sched/ssd_config.h"

namespace specdec::cli {

int cmd_bench(int argc, char** argv) {
    using namespace specdec::bench;
    CLI::App app{"Benchmark decoding methods (llama-bench style sweeps) or the AR forward pass", "specdec bench"};
    add_mmap_option(app);
    BenchOptions o;
    std::string methods = "ar", budgets = "16", depths = "5", topks = "4", ks = "5", batches = "1", temps = "0",
                threads = "0", lookups = "0", sets, fwd, ssd_ks = "4", fanouts = "geometric", cs = "1";
    app.add_option("-m,--model", o.target, "target GGUF file or manifest name (default: the manifest's default)");
    app.add_option("-d,--draft", o.draft, "draft model for chain, tree and ssd");
    app.add_option("--draft-layers", o.draft_layers,
                   "self-speculation draft instead of -d: the target's first L layers, a list such as 0-7,10, "
                   "or auto (the choice `specdec calibrate` saved)");
    app.add_option("--eagle3", o.eagle3,
                   "EAGLE-3 head (a Hugging Face layout directory, a speculators directory or an eagle3 GGUF) for "
                   "the methods eagle3 (its dynamic tree, --tree-*), eagle3-chain (--draft-k) and eagle3-auto (auto "
                   "drafting with the head; plain auto does too when no -d is given)");
    app.add_option("--method", methods,
                   "comma-separated methods: ar,auto,chain,tree,ngram,ssd,eagle3,eagle3-chain,eagle3-auto");
    app.add_option("--tree-budget", budgets, "tree: node budgets incl. the root (comma-separated)");
    app.add_option("--tree-depth", depths, "tree: max depths (comma-separated)");
    app.add_option("--tree-topk", topks, "tree: children per node (comma-separated)");
    app.add_option("--tree-width", o.tree_width, "tree: frontier width, nodes expanded per depth (0 = top-k; 1 = "
                   "one-row draft forwards)")->check(CLI::Range(0, 32));
    app.add_option("--draft-k", ks, "chain/ngram: draft lengths (comma-separated)");
    std::string gains;
    app.add_option("--auto-min-gain", gains,
                   "auto: predicted gain over AR a draft must reach (comma-separated: one auto configuration "
                   "each; default 0.02)");
    app.add_option("--lookup-min", lookups,
                   "chain/tree/ssd: prompt lookup first, from this suffix length; 0 = off (comma-separated)");
    app.add_option("--batch", batches, "sequences decoded together (comma-separated)");
    app.add_option("--ssd-k", ssd_ks, "ssd: speculation lengths K (comma-separated)");
    app.add_option("--fanout", fanouts, "ssd: fan-out kinds, geometric and/or uniform (comma-separated)");
    app.add_option("--saguaro-c", cs, "ssd: Saguaro C values in [0, 16] (comma-separated; 1 = off)");
    app.add_option("--fanout-budget", o.fanout_budget, "ssd: cached branches per round (sum of F_k)")
        ->check(CLI::Range(0, 256));
    app.add_option("--backup", o.ssd_backup, "ssd: backup on a cache miss")
        ->check(CLI::IsMember({"auto", "jit", "ngram", "random"}));
    bool allow_remote = false;
    add_remote_draft_options(app, o.ssd_remote_addr, allow_remote, nullptr,
                             "ssd: draft on `specdec draft-serve` at this address (tcp://127.0.0.1:PORT or "
                             "ipc://PATH) instead of a thread beside the target (batch 1; the target keeps the thread "
                             "split)");
    app.add_option("--ssd-draft-threads", o.draft_threads,
                   "ssd: threads of the draft side, taken from each thread count (the target keeps the rest)")
        ->check(CLI::Range(1, 1024));
    app.add_option("--temp", temps, "temperatures (comma-separated; 0 = greedy)");
    app.add_option("-t,--threads", threads, "thread counts (comma-separated; 0 = all cores)");
    app.add_option("--warmup", o.warmup, "unrecorded runs per configuration")->check(CLI::NonNegativeNumber);
    app.add_option("--reps", o.reps, "repetitions per turn (median time kept)")->check(CLI::PositiveNumber);
    app.add_option("--prompts", o.prompts_file, "JSONL prompts: {\"id\",\"set\",\"turns\":[...]} per line")
        ->check(CLI::ExistingFile);
    app.add_option("--set", sets, "prompt sets built by tools/prompts.py: humaneval, sharegpt (comma-separated)");
    app.add_option("--limit", o.limit, "conversations per prompt file/set (0 = all)")->check(CLI::NonNegativeNumber);
    app.add_option("--max-turns", o.max_turns, "turns per conversation (0 = all)")->check(CLI::NonNegativeNumber);
    app.add_flag("--chat", o.chat, "render turns with the model's chat template (earlier answers as assistant turns)");
    app.add_option("--system", o.system, "system message (with --chat)");
    app.add_option("-n,--n-predict", o.n_predict, "max new tokens per turn")->check(CLI::Range(1, 1 << 20));
    app.add_flag("--ignore-eos", o.ignore_eos, "always generate -n tokens");
    app.add_option("--max-prompt-tokens", o.max_prompt_tokens, "skip turns with longer prompts (0 = what fits)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("-c,--ctx", o.n_ctx, "context size per sequence")->check(CLI::Range(64, 1 << 20));
    app.add_option("--seed", o.seed, "sampling seed");
    app.add_option("--ngram-min", o.ngram_min, "ngram: shortest suffix to match")->check(CLI::Range(1, 16));
    app.add_option("--ngram-max", o.ngram_max, "ngram: longest suffix to match")->check(CLI::Range(1, 16));
    app.add_option("--vocab-subset", o.vocab_subset, "chain/tree: the draft proposes only the N most frequent "
                   "target tokens of --vocab-corpus (0 = off)")->check(CLI::NonNegativeNumber);
    app.add_option("--vocab-subset-file", o.vocab_subset_file,
                   "cached vocabulary subset (built from --vocab-corpus if missing; default OUT_DIR/vocab_subset_N.txt)");
    app.add_option("--vocab-corpus", o.vocab_corpus, "JSONL corpus to count token frequencies")->check(CLI::ExistingFile);
    app.add_option("--mode", o.mode, "speculative mode: performance or reference")
        ->check(CLI::IsMember({"reference", "performance"}));
    app.add_option("--trace-dir", o.trace_dir, "write a round trace per turn of each speculative method (batch 1)");
    app.add_flag("--skip-unavailable", o.skip_unavailable,
                 "report methods this build cannot run instead of failing");
    app.add_option("--prefill", o.micro_prefill, "AR micro-mode: prompt tokens to prefill")->check(CLI::Range(1, 1 << 16));
    app.add_option("--decode", o.micro_decode, "AR micro-mode: tokens to decode")->check(CLI::Range(1, 1 << 16));
    app.add_option("--forward-sizes", fwd, "AR micro-mode: rows per timed forward (comma-separated)");
    app.add_option("--forward-reps", o.micro_reps, "AR micro-mode: timed forwards per size")->check(CLI::PositiveNumber);
    app.add_option("-o,--out-dir", o.out_dir, "directory for bench.md, bench.csv, bench.json");
    app.add_flag("--llamacpp", o.llamacpp, "also run llama.cpp (llama-cpp-python) on the same workload");
    std::string llamacpp_spec = "all";
    app.add_option("--llamacpp-spec", llamacpp_spec,
                   "with --llamacpp: llama.cpp speculative types to run by its own example (comma-separated; "
                   "'all' = draft-simple (with -d), draft-eagle3 (with --eagle3), ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod, "
                   "ngram-cache; 'none')");
    app.add_flag("--plots", o.plots, "draw PNG plots with tools/plot_bench.py");
    app.add_flag("-q,--quiet", o.quiet, "no progress display");
    app.add_option("--order", o.order, "prompt sets: 'turn' runs every configuration back to back on each turn "
                   "(paired, one shared prefill per turn), 'config' each configuration over all turns")
        ->check(CLI::IsMember({"turn", "config"}));
    bool no_shared_prefill = false;
    app.add_flag("--no-shared-prefill", no_shared_prefill,
                 "turn order: every configuration prefills the turn's prompt itself");
    app.add_flag("--resume", o.resume, "go on with OUT_DIR/checkpoint*.jsonl: skip the units it holds (refused "
                 "if the options, models or prompts differ)");
    std::string shard;
    app.add_option("--shard", shard, "I/N: run only conversations with index % N == I-1 (own checkpoint file; "
                   "the report merges every shard's)");
    app.add_option("--stop-after", o.stop_after, "stop after this many units (turn x batch of conversations) "
                   "and write the report so far; --resume goes on")->check(CLI::NonNegativeNumber);
    app.add_option("--protocol", o.protocol, "preset: 'eagle' = every HumanEval problem + as many two-turn ShareGPT "
                   "chats, all methods, llama.cpp baselines, plots, --resume (explicit options win)")
        ->check(CLI::IsMember({"eagle"}));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    o.shared_prefill = !no_shared_prefill;
    if (!shard.empty()) {
        const size_t slash = shard.find('/');
        const auto ints = slash == std::string::npos
                              ? std::vector<int>{}
                              : std::vector<int>{parse_int_list(shard.substr(0, slash), "--shard")[0],
                                                 parse_int_list(shard.substr(slash + 1), "--shard")[0]};
        SPECDEC_CHECK(ints.size() == 2 && ints[1] >= 1 && ints[0] >= 1 && ints[0] <= ints[1], "--shard '", shard,
                      "': expected I/N with 1 <= I <= N");
        o.shard_i = ints[0] - 1;
        o.shard_n = ints[1];
    }
    if (o.protocol == "eagle") {
        // The EAGLE-style protocol (issue #7): all 164 HumanEval problems and
        // 164 two-turn ShareGPT conversations (492 turns), greedy, every
        // method on the same cores, llama.cpp AR and prompt lookup.
        const auto unset = [&](const char* opt) { return app.count(opt) == 0; };
        if (unset("--set") && unset("--prompts")) sets = "humaneval,sharegpt";
        if (unset("--limit")) o.limit = 164;
        if (unset("--max-turns")) o.max_turns = 2;
        if (unset("--method")) methods = "ar,auto,chain,tree,ngram,ssd";
        if (unset("--n-predict")) o.n_predict = 64;
        if (unset("--draft-k")) ks = "4";
        if (unset("--tree-budget")) budgets = "8";
        if (unset("--tree-depth")) depths = "5";
        if (unset("--tree-topk")) topks = "2";
        if (unset("--tree-width")) o.tree_width = 1;
        if (unset("--ssd-k")) ssd_ks = "4";
        if (unset("--warmup")) o.warmup = 1;
        o.chat = true;
        o.llamacpp = true;
        o.plots = true;
        o.resume = true;
    }
    if (llamacpp_spec == "all") {
        o.llamacpp_spec = llamacpp_spec_types();
    } else if (llamacpp_spec != "none") {
        const auto& known = llamacpp_spec_types();
        std::string names = "all, none";
        for (const auto& k : known) names += ", " + k;
        o.llamacpp_spec = parse_string_list(llamacpp_spec);
        for (const auto& t : o.llamacpp_spec)
            SPECDEC_CHECK(std::find(known.begin(), known.end(), t) != known.end(),
                          "--llamacpp-spec: unknown llama.cpp speculative type '", t, "' (known: ", names, ")");
    }
    o.methods = parse_string_list(methods);
    SPECDEC_CHECK(!o.methods.empty(), "--method: empty list");
    o.tree_budget = parse_int_list(budgets, "--tree-budget");
    o.tree_depth = parse_int_list(depths, "--tree-depth");
    o.tree_topk = parse_int_list(topks, "--tree-topk");
    o.draft_k = parse_int_list(ks, "--draft-k");
    o.batch = parse_int_list(batches, "--batch");
    if (!o.ssd_remote_addr.empty()) {
        o.ssd_remote = remote_draft_link(o.ssd_remote_addr, allow_remote);
        SPECDEC_CHECK(o.batch == std::vector<int>{1}, "--ssd-draft runs batch 1 only");
    }
    o.lookup_min = parse_int_list(lookups, "--lookup-min");
    if (!gains.empty()) o.auto_min_gain = parse_double_list(gains, "--auto-min-gain");
    for (double g : o.auto_min_gain)
        SPECDEC_CHECK(g >= 0 && g <= 1, "--auto-min-gain ", g, " is outside [0, 1]");
    o.temp = parse_double_list(temps, "--temp");
    o.threads = parse_int_list(threads, "-t/--threads");
    o.sets = parse_string_list(sets);
    o.ssd_k = parse_int_list(ssd_ks, "--ssd-k");
    o.fanout = parse_string_list(fanouts);
    SPECDEC_CHECK(!o.fanout.empty(), "--fanout: empty list");
    for (const auto& f : o.fanout) sched::parse_fanout(f);  // a clear error for a bad name
    o.saguaro_c = parse_double_list(cs, "--saguaro-c");
    for (int k : o.ssd_k) SPECDEC_CHECK(k >= 1 && k <= 64, "--ssd-k ", k, " is outside [1, 64]");
    for (double c : o.saguaro_c)
        SPECDEC_CHECK(c >= 0 && c <= sched::SsdConfig::kMaxSaguaroC, "--saguaro-c ", c, " is outside [0, ",
                      sched::SsdConfig::kMaxSaguaroC, "]");
    if (!fwd.empty()) o.forward_sizes = parse_int_list(fwd, "--forward-sizes");
    for (int b : o.tree_budget) SPECDEC_CHECK(b >= 2 && b <= 512, "--tree-budget ", b, " is outside [2, 512]");
    for (int d : o.tree_depth) SPECDEC_CHECK(d >= 1 && d <= 64, "--tree-depth ", d, " is outside [1, 64]");
    for (int k : o.tree_topk) SPECDEC_CHECK(k >= 1 && k <= 32, "--tree-topk ", k, " is outside [1, 32]");
    for (int k : o.draft_k) SPECDEC_CHECK(k >= 1 && k <= 64, "--draft-k ", k, " is outside [1, 64]");
    for (int n : o.lookup_min) SPECDEC_CHECK(n >= 0 && n <= 16, "--lookup-min ", n, " is outside [0, 16]");
    for (int b : o.batch) SPECDEC_CHECK(b >= 1 && b <= 64, "--batch ", b, " is outside [1, 64]");
    for (double t : o.temp) SPECDEC_CHECK(t >= 0 && t <= 100, "--temp ", t, " is outside [0, 100]");
    for (int t : o.threads) SPECDEC_CHECK(t >= 0 && t <= 1024, "--threads ", t, " is outside [0, 1024]");
    for (int n : o.forward_sizes) SPECDEC_CHECK(n >= 1 && n <= 4096, "--forward-sizes ", n, " is outside [1, 4096]");
    if (o.vocab_subset > 0 && o.vocab_subset_file.empty())
        o.vocab_subset_file = (std::filesystem::path(o.out_dir) / ("vocab_subset_" + std::to_string(o.vocab_subset) + ".txt")).string();
    SPECDEC_CHECK(o.vocab_subset == 0 || std::filesystem::exists(o.vocab_subset_file) || !o.vocab_corpus.empty(),
                  "--vocab-subset needs --vocab-corpus FILE (or an existing --vocab-subset-file)");
    for (int i = 0; i < argc; ++i) o.argv.push_back(argv[i]);

    o.target_path = runtime::resolve_model(o.target);
    if (!o.draft.empty()) o.draft_path = runtime::resolve_model(o.draft);
    if (!o.draft_layers.empty()) {
        SPECDEC_CHECK(o.draft.empty(), "give either -d DRAFT or --draft-layers L, not both");
        const runtime::DraftLayers d = runtime::resolve_draft_layers(o.draft_layers, o.target_path);
        SPECDEC_CHECK(!d.use_ar, "--draft-layers auto: calibration found no self-speculation depth faster than AR, "
                                 "so there is no draft to benchmark");
        o.draft = o.target;
        o.draft_path = o.target_path;
        o.draft_keep_layers = d.keep_layers;
    }

    // Methods this build cannot run are reported, never faked.
    BenchResult r;
    for (const auto& m : o.methods) {
        std::string why;
        if (!method_available(m, o, &why)) {
            if (!o.skip_unavailable) throw Error(why + " (pass --skip-unavailable to report it and go on)");
            std::fprintf(stderr, "specdec bench: %s; skipped\n", why.c_str());
        }
    }
    if (o.micro())
        SPECDEC_CHECK(o.methods.size() == 1 && o.methods[0] == "ar",
                      "--prefill/--decode/--forward-sizes are the AR micro-mode: use them with --method ar only");

    const std::string root = repo_root();
    std::filesystem::create_directories(o.out_dir);

    // Run record.
    std::string cmdline = "specdec";
    for (int i = 0; i < argc; ++i) cmdline += " " + std::string(argv[i]);
    r.meta["command"] = cmdline;
    r.meta["date"] = utc_now();
    r.meta["cpu_model"] = cpu_model();
    r.meta["cpu_count"] = cpu_count();
    r.meta["git_revision"] = git_revision(root);
    r.meta["target"] = {{"name", o.target}, {"path", o.target_path}, {"bytes", file_size(o.target_path)},
                        {"sha256", sha256_file(o.target_path)}};
    r.meta["draft"] = nullptr;
    if (!o.draft_path.empty())
        r.meta["draft"] = {{"name", o.draft}, {"path", o.draft_path}, {"bytes", file_size(o.draft_path)},
                           {"sha256", sha256_file(o.draft_path)}};
    r.meta["options"] = {{"methods", o.methods},       {"tree_budget", o.tree_budget}, {"tree_depth", o.tree_depth},
                         {"tree_topk", o.tree_topk},
                         {"tree_width", o.tree_width},  {"draft_k", o.draft_k},         {"batch", o.batch},
                         {"temp", o.temp},             {"threads", o.threads},         {"warmup", o.warmup},
                         {"reps", o.reps},             {"prompts", o.prompts_file},    {"sets", o.sets},
                         {"limit", o.limit},           {"max_turns", o.max_turns},     {"chat", o.chat},
                         {"system", o.system},         {"n_predict", o.n_predict},     {"ignore_eos", o.ignore_eos},
                         {"max_prompt_tokens", o.max_prompt_tokens}, {"n_ctx", o.n_ctx},
                         {"ngram_min", o.ngram_min},   {"ngram_max", o.ngram_max},     {"mode", o.mode},
                         {"trace_dir", o.trace_dir},   {"prefill", o.micro_prefill},   {"decode", o.micro_decode},
                         {"forward_sizes", o.forward_sizes}, {"forward_reps", o.micro_reps},
                         {"out_dir", o.out_dir},       {"llamacpp", o.llamacpp},       {"llamacpp_spec", o.llamacpp_spec},
                         {"plots", o.plots},
                         {"skip_unavailable", o.skip_unavailable}, {"ssd_k", o.ssd_k},
                         {"fanout", o.fanout},         {"saguaro_c", o.saguaro_c},
                         {"fanout_budget", o.fanout_budget}, {"ssd_backup", o.ssd_backup},
                         {"ssd_draft_threads", o.draft_threads}, {"vocab_subset", o.vocab_subset},
                         {"vocab_subset_file", o.vocab_subset_file}, {"vocab_corpus", o.vocab_corpus},
                         {"order", o.order},           {"shared_prefill", o.order == "turn" && o.shared_prefill},
                         {"resume", o.resume},         {"shard", std::to_string(o.shard_i + 1) + "/" + std::to_string(o.shard_n)},
                         {"stop_after", o.stop_after}, {"protocol", o.protocol},      {"quiet", o.quiet},
                         {"draft_layers", o.draft_keep_layers}};
    if (!o.ssd_remote_addr.empty()) r.meta["options"]["ssd_draft"] = o.ssd_remote_addr;
    // Only when used: a run without it keeps the fingerprint (and so the
    // checkpoints) of runs made before the option existed.
    if (o.lookup_min != std::vector<int>{0}) r.meta["options"]["lookup_min"] = o.lookup_min;
    if (o.auto_min_gain != BenchOptions{}.auto_min_gain) r.meta["options"]["auto_min_gain"] = o.auto_min_gain;
    if (!o.eagle3.empty()) {
        // A manifest name becomes its directory here, so that the report,
        // the fingerprint and llama.cpp's baseline all see the path.
        o.eagle3 = runtime::resolve_eagle3_head(o.eagle3);
        // The head's weights identify it (a directory holds model.safetensors).
        const std::string w = std::filesystem::is_directory(o.eagle3)
                                  ? (std::filesystem::path(o.eagle3) / "model.safetensors").string()
                                  : o.eagle3;
        r.meta["options"]["eagle3"] = o.eagle3;
        r.meta["eagle3"] = {{"path", o.eagle3},
                            {"sha256", std::filesystem::exists(w) ? sha256_file(w) : std::string()}};
    }
    r.meta["seeds"] = {{"sampling", o.seed}};
    r.meta["argv"] = o.argv;

    if (o.micro()) {
        r.opts = o;
        run_ar_micro(r);
    } else {
        std::vector<Conversation> convs;
        if (!o.prompts_file.empty()) {
            auto c = load_prompts_jsonl(o.prompts_file, o.limit);
            convs.insert(convs.end(), c.begin(), c.end());
        }
        for (const auto& s : o.sets) {
            const std::string path = (std::filesystem::path(o.out_dir) / ("prompts_" + s + ".jsonl")).string();
            auto c = load_prompt_set(root, s, o.limit, path);
            convs.insert(convs.end(), c.begin(), c.end());
        }
        SPECDEC_CHECK(!convs.empty(), "no prompts: give --prompts FILE or --set humaneval|sharegpt");
        r.opts = o;
        r.conversations = std::move(convs);
        run_sweep(r);
        r.meta["run"] = {{"order", o.order},
                         {"shared_prefill", o.order == "turn" && o.shared_prefill},
                         {"units_run", r.units_run},
                         {"units_resumed", r.units_resumed},
                         {"stopped", r.stopped},
                         {"checkpoint_fingerprint_sha256", sha256_hex(r.fingerprint.dump())}};
    }
    for (const auto& m : o.methods) {
        std::string why;
        if (!method_available(m, o, &why)) r.unavailable[m] = why;
    }
    if (o.llamacpp && !r.stopped) run_llamacpp(r, root);
    compute_speedups(r);
    write_reports(r);
    std::cout << markdown(r);
    if (o.plots) {
        const std::string cmd = shell_quote(python_exe(root)) + " " + shell_quote(root + "/tools/plot_bench.py") + " " +
                                shell_quote((std::filesystem::path(o.out_dir) / "bench.json").string());
        if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "specdec bench: plotting failed: %s\n", cmd.c_str());
    }
    std::fprintf(stderr, "specdec bench: wrote %s/bench.{md,csv,json}\n", o.out_dir.c_str());
    return 0;
}

}  // namespace specdec::cli
