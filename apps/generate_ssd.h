// `specdec generate --method ssd`. SSD does not go through specdec::Engine
// yet: its draft engine holds one KV sequence per cached branch and the
// thread budget is split between the target's pool and the draft worker's,
// both fixed when the engines load, and the public EngineOptions does not
// describe either. This loads the two engines itself and reports the same
// specdec::Result the API does, plus SSD's own counters.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "sched/ssd_config.h"
#include "specdec/request.h"
#include "specdec/result.h"

namespace specdec::cli {

struct SsdGenerateOptions {
    runtime::EngineOptions target;  // n_threads: the -t budget of both sides (0: every core)
    int target_threads = 0;         // --ssd-target-threads (0: what the draft side leaves)
    std::string draft_path;         // resolved; the target's own file for self-speculation
    std::vector<int> keep_layers;   // self-speculation: the layers the draft runs
    bool self_spec = false;
    sched::SsdConfig ssd;
};

struct SsdGenerateOutput {
    Result result;
    nlohmann::json ssd_stats;  // the SSD fields of --json (cache hits, backups, fan-out, threads)
    std::string model_path;
    int threads = 0;           // the target's pool
};

SsdGenerateOutput generate_ssd(const SsdGenerateOptions& opts, const GenerateRequest& req,
                               const TokenCallback& on_text);

}  // namespace specdec::cli
