// The shared prefill of the paired (turn-major) bench order: each turn's
// prompts are read once into the target cache (and the draft cache) and every
// configuration then decodes from that committed prefix (the schedulers'
// sched::Prefilled entry point truncates back to the prompt between runs).
// The chunked prefill is the one every method uses, so the first token and
// every later one are what a run prefilling for itself would produce.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/engine.h"
#include "sched/sync_scheduler.h"

namespace specdec::bench {

struct TurnPrefill {
    std::vector<std::vector<float>> logits;  // per sequence: the last prompt token's target logits
    double target_s = 0, draft_s = 0;        // time of each model's prefill
    bool draft_ready = false;                // the draft cache holds the prompts too
    sched::Prefilled view() const;
};

// Prompt i goes into sequence i of the target cache and, when a draft is given
// and every prompt token is in its vocabulary, of the draft cache (on the
// target's pool: chain and tree drafts run there too).
TurnPrefill prefill_turn(runtime::Engine& target, runtime::Engine* draft,
                         const std::vector<std::vector<int32_t>>& prompts);

}  // namespace specdec::bench
