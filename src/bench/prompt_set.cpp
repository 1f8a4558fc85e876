#include "bench/prompt_set.h"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench/sys_info.h"
#include "core/error.h"

namespace specdec::bench {

std::vector<Conversation> load_prompts_jsonl(const std::string& path, int limit) {
    std::ifstream in(path);
    SPECDEC_CHECK(in.good(), "cannot read prompts file ", path);
    std::vector<Conversation> out;
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
        ++lineno;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        if (limit > 0 && (int)out.size() >= limit) break;
        const auto j = nlohmann::json::parse(line, nullptr, false);
        SPECDEC_CHECK(!j.is_discarded() && j.is_object(), path, ":", lineno, ": not a JSON object");
        SPECDEC_CHECK(j.contains("turns") && j["turns"].is_array() && !j["turns"].empty(), path, ":", lineno,
                      ": needs a non-empty \"turns\" list");
        Conversation c;
        if (j.contains("id")) c.id = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
        if (c.id.empty()) c.id = "line" + std::to_string(lineno);
        if (j.contains("set") && j["set"].is_string()) c.set = j["set"].get<std::string>();
        for (const auto& t : j["turns"]) {
            SPECDEC_CHECK(t.is_string(), path, ":", lineno, ": turns must be strings");
            c.turns.push_back(t.get<std::string>());
        }
        out.push_back(std::move(c));
    }
    return out;
}

std::vector<Conversation> load_prompt_set(const std::string& repo_root, const std::string& name, int limit,
                                          const std::string& out_path) {
    SPECDEC_CHECK(name == "humaneval" || name == "sharegpt", "unknown prompt set '", name,
                  "' (expected humaneval or sharegpt)");
    std::string cmd = shell_quote(python_exe(repo_root)) + " " + shell_quote(repo_root + "/tools/prompts.py") +
                      " --set " + name + " --out " + shell_quote(out_path);
    if (limit > 0) cmd += " --limit " + std::to_string(limit);
    const int rc = std::system(cmd.c_str());
    SPECDEC_CHECK(rc == 0, "building prompt set '", name, "' failed (", cmd, ")");
    return load_prompts_jsonl(out_path, limit);
}

}  // namespace specdec::bench
