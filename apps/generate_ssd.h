// `specdec generate --method ssd`. SSD loads its models through the public
// API (specdec::Engine, with a draft sequence slot per cached branch) but is
// not one of Engine::generate's methods yet: its options (sched::SsdConfig:
// fan-out, backups, the draft worker's threads and niceness) are not in the
// public Request, so this runs sched::generate_ssd on the engines underneath
// and reports the same specdec::Result the API does, plus SSD's own counters.
// With --ssd-draft the draft side is a draft server (transport/zmq_draft_link.h)
// and only the target is loaded here.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sched/ssd_config.h"
#include "specdec/engine.h"

namespace specdec::cli {

struct SsdGenerateOptions {
    EngineOptions engine;     // threads: the -t budget of both sides (0: every core); a draft or draft layers
    int target_threads = 0;   // --ssd-target-threads (0: what the draft side leaves)
    sched::SsdConfig ssd;     // ssd.remote_draft non-empty: the draft side is that draft server
    bool allow_remote = false; // --allow-remote: the server may be on another host
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
