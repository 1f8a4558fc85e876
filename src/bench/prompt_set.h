// Benchmark prompts: conversations of user turns, JSONL as tools/prompts.py writes them.
#pragma once

#include <string>
#include <vector>

namespace specdec::bench {

struct Conversation {
    std::string id;
    std::string set;
    std::vector<std::string> turns;  // user turns, in order
};

// Reads {"id","set","turns":[...]} lines; at most `limit` conversations (0: all).
std::vector<Conversation> load_prompts_jsonl(const std::string& path, int limit = 0);

// Runs `python tools/prompts.py --set NAME [--limit N] --out OUT` from the repo
// root and loads the result.
std::vector<Conversation> load_prompt_set(const std::string& repo_root, const std::string& name, int limit,
                                          const std::string& out_path);

}  // namespace specdec::bench
