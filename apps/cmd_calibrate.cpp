// specdec calibrate: picks the self-speculation draft depth for one model.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "bench/self_spec_calibration.h"
#include "residency_cli_option.h"
#include "runtime/draft_source.h"
#include "cli_commands.h"
#include "core/error.h"
#include "model/layer_list.h"
#include "runtime/model_locator.h"

namespace specdec::cli {
namespace {

std::vector<int> split_ints(const std::string& s) {
    std::vector<int> out;
    size_t at = 0;
    while (at <= s.size()) {
        const size_t c = std::min(s.find(',', at), s.size());
        const std::string item = s.substr(at, c - at);
        SPECDEC_CHECK(!item.empty() && item.find_first_not_of("0123456789") == std::string::npos && item.size() < 7,
                      "--layers '", s, "': '", item, "' is not a layer count");
        out.push_back(std::stoi(item));
        at = c + 1;
    }
    return out;
}

void print_table(const bench::CalibrationResult& r) {
    std::printf("\n%s: %d layers, %s, %d threads, %d prompts x %d tokens; AR %.1f tok/s", r.model_path.c_str(),
                r.n_layer, r.method.c_str(), r.n_threads, r.n_prompts, r.max_tokens, r.ar_tok_s);
    for (const auto& k : r.ar_kinds)
        if (k.kind != "all") std::printf(" (%s %.1f)", k.kind.c_str(), k.tok_s);
    std::printf("\n\n%-22s %6s", "draft layers", "n");
    const auto& kinds = r.rows.empty() ? r.ar_kinds : r.rows[0].kinds;
    for (const auto& k : kinds) std::printf(" | %4s tau  tok/s  x AR", k.kind.c_str());
    std::printf("\n");
    for (size_t i = 0; i < r.rows.size(); ++i) {
        const auto& row = r.rows[i];
        std::printf("%-22s %6d", row.layers.c_str(), row.n_layers);
        for (const auto& k : row.kinds) std::printf(" | %8.2f %6.1f %5.2f", k.mean_accept_len, k.tok_s, k.speedup);
        std::printf("%s\n", (int)i == r.chosen ? "  <- chosen" : "");
    }
    if (r.chosen < 0) std::printf("chosen: ar (no draft depth decodes faster than AR here)\n");
}

}  // namespace

int cmd_calibrate(int argc, char** argv) {
    CLI::App app{"Measure layer-skipping self-speculation for each draft depth and save the fastest",
                 "specdec calibrate"};
    add_mmap_option(app);
    bench::CalibrationOptions o;
    o.spec.draft_k = 3;  // early-exit drafts are rarely accepted far ahead: short chains waste less
    std::string model, method = "chain", layers, out;
    std::vector<std::string> layer_sets;
    app.add_option("-m,--model", model, "GGUF file or model name from models/manifest.json");
    app.add_option("--method", method, "self-speculation method to time: chain or tree")
        ->check(CLI::IsMember({"chain", "tree"}));
    app.add_option("--layers", layers, "candidate depths L, comma-separated (default: 1/2, 3/4, all but 3, all but 1 of "
                                       "the layers, and 3/4 as first layers + the last two)");
    app.add_option("--layer-set", layer_sets, "a candidate list of kept layers, e.g. 0-9,28,29 (repeatable)");
    app.add_option("--prompts", o.n_prompts, "built-in prompts used (code and chat alternate; max 6)")
        ->check(CLI::Range(1, 1000));
    app.add_option("--prompts-file", o.prompts_file, "JSONL prompts (tools/prompts.py) instead of the built-in ones")
        ->check(CLI::ExistingFile);
    app.add_option("-n,--max-tokens", o.max_tokens, "tokens generated per prompt")->check(CLI::Range(2, 4096));
    app.add_option("-t,--threads", o.n_threads, "threads (0 = all cores)")->check(CLI::NonNegativeNumber);
    app.add_option("--draft-k", o.spec.draft_k, "chain: draft length")->check(CLI::Range(1, 64));
    app.add_option("--chain-min-prob", o.spec.chain_min_prob, "chain: stop drafting below this draft probability")
        ->check(CLI::Range(0.0, 1.0));
    app.add_option("--tree-topk", o.spec.tree_topk, "tree: children per node")->check(CLI::Range(1, 32));
    app.add_option("--tree-depth", o.spec.tree_depth, "tree: max draft depth")->check(CLI::Range(1, 64));
    app.add_option("--tree-budget", o.spec.tree_budget, "tree: max nodes incl. the root")->check(CLI::Range(2, 512));
    app.add_option("-o,--out", out, "where to save the choice (default: <model>.selfspec.json next to the model)");
    bool no_save = false;
    app.add_flag("--no-save", no_save, "print the table only");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    o.model_path = runtime::resolve_model(model);
    o.spec.method = sched::parse_method(method);
    if (!layers.empty())
        for (int l : split_ints(layers)) o.candidates.push_back(model::parse_layer_list(std::to_string(l)));
    for (const auto& s : layer_sets) o.candidates.push_back(model::parse_layer_list(s));
    const auto r = bench::run_calibration(o, [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); });
    print_table(r);
    if (!no_save) {
        const std::string path = out.empty() ? runtime::selfspec_path(o.model_path) : out;
        bench::save_calibration(r, path);
        std::printf("saved %s\n", path.c_str());
    }
    return 0;
}

}  // namespace specdec::cli
