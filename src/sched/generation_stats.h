// The statistics of one generation as JSON, under the names every frontend
// reports them with: `specdec generate --json`, the Python package's
// `.stats`, and the "specdec" member of its OpenAI-shaped dicts. Each
// frontend adds what only it knows (the CLI: text, model, threads, SSD's
// counters) to this object; nothing else builds these fields.
#pragma once

#include <nlohmann/json.hpp>

#include "specdec/result.h"

namespace specdec::sched {

// Always: method, n_prompt, n_generated, prefill_s, decode_s, decode_tok_s,
// prefill_tok_s, finish_reason, rounds, mean_accept_len. A speculative run
// adds drafted, accepted, lookup_rounds, lookup_drafted, lookup_accepted, draft_s, tree_s,
// verify_s, commit_s, draft_model and draft_layers (when it used a draft),
// and for method auto the cost model's "auto" object.
nlohmann::json generation_stats(const Result& r);

}  // namespace specdec::sched
