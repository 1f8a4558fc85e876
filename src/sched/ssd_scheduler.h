// SSD (speculative speculative decoding, Saguaro): the target side. Each round
// the target verifies the speculation the draft worker sent, reports the
// outcome (k accepted, bonus t) and receives the next speculation: at once on
// a cache hit, after a backup on a miss. The draft side (ssd_draft_worker.h)
// runs on its own thread with its own model context and builds the cache
// while the target verifies.
//
// Lossless by construction: every speculation declares how its drafts were
// drawn (a point mass for greedy/n-gram drafts; the exact, Saguaro-modified
// proposal q' for sampled ones; uniform for random ones) and the shared
// spec::Verifier checks them against the target with that same q.
#pragma once

#include <vector>

#include "runtime/engine.h"
#include "sched/ssd_config.h"
#include "sched/ssd_draft_worker.h"
#include "sched/sync_scheduler.h"
#include "spec/trace.h"
#include "spec/verifier.h"

namespace specdec::sched {

struct SsdStats {
    SpecStats spec;         // rounds, accepted, emitted, times (draft_s = stall_s here)
    DraftSideStats draft;   // cache hits, backups, draft-side time
    double stall_s = 0;     // the target waiting for the draft's answer
    double hit_rate() const { return draft.lookups ? (double)draft.hits / draft.lookups : 0.0; }
    // Draft-side time per round relative to the target's verification.
    double draft_over_verify() const { return spec.verify_s > 0 ? draft.tree_s / spec.verify_s : 0.0; }
};

class SsdScheduler {
public:
    SsdScheduler(const TargetContext& target, const DraftContext& draft, const sample::SamplingParams& params,
                 const SsdConfig& cfg, spec::ExecMode mode = spec::ExecMode::Performance,
                 spec::TraceWriter* trace = nullptr);

    // Same contract as SyncScheduler::run: sequence i in slot i of both caches
    // (`pre`: the prompts are already there).
    void run(const std::vector<std::vector<int32_t>>& prompts, const std::vector<int>& max_new,
             const OnToken& on_token, SsdStats& stats, const Prefilled* pre = nullptr);

private:
    const float* prefill(int seq, const std::vector<int32_t>& tokens);

    TargetContext tgt_;
    DraftContext draft_;
    sample::SamplingParams params_;
    SsdConfig cfg_;
    spec::ExecMode mode_;
    spec::TraceWriter* trace_;  // null: no round trace
    spec::Verifier verifier_;
    model::ForwardBatch batch_;
    model::ForwardResult result_;
};

// Engine-level SSD generation with generate_ar's request, stop rules and
// result. The draft engine's cache must hold as many sequences as the batch
// and at least the target's context.
runtime::GenerateResult generate_ssd(runtime::Engine& target, runtime::Engine& draft,
                                     const runtime::GenerateRequest& req, const SsdConfig& cfg,
                                     SsdStats* stats = nullptr, const runtime::TokenCallback& on_text = {},
                                     const Prefilled* pre = nullptr);

std::vector<runtime::GenerateResult> generate_ssd_batch(runtime::Engine& target, runtime::Engine& draft,
                                                        const std::vector<runtime::GenerateRequest>& reqs,
                                                        const SsdConfig& cfg, SsdStats* stats = nullptr,
                                                        const Prefilled* pre = nullptr);

}  // namespace specdec::sched
