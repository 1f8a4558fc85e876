// SSD (speculative speculative decoding, Saguaro): the one round loop
// (SyncScheduler over SpecBatch) with the SSD proposer (ssd_proposer.h), whose
// draft side runs on its own thread with its own model context, or in a draft
// server elsewhere (ssd_draft_side.h), and builds the next speculations while
// the target verifies. This file only wires the two and gathers the draft
// side's counters.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "runtime/engine.h"
#include "sched/ssd_config.h"
#include "sched/ssd_draft_side.h"
#include "sched/ssd_draft_worker.h"
#include "sched/sync_scheduler.h"
#include "spec/trace.h"

namespace specdec::sched {

struct SsdStats {
    SpecStats spec;         // rounds, accepted, emitted, times (draft_s = stall_s here)
    DraftSideStats draft;   // cache hits, backups, draft-side time
    double stall_s = 0;     // the target waiting for the draft's answer
    SsdFallbackStats fallback;  // rounds drafted locally because a remote draft side failed
    double hit_rate() const { return draft.lookups ? (double)draft.hits / draft.lookups : 0.0; }
    // Draft-side time per round relative to the target's verification.
    double draft_over_verify() const { return spec.verify_s > 0 ? draft.tree_s / spec.verify_s : 0.0; }
};

// Makes a draft side somewhere else (a remote link, transport/zmq_draft_link.h)
// for one run; layers above this one provide it.
using DraftSideFactory = std::function<std::unique_ptr<DraftSide>(const DraftSideSpec&)>;

class SsdScheduler {
public:
    // The draft side on a thread of this process, over `draft`.
    SsdScheduler(const TargetContext& target, const DraftContext& draft, const sample::SamplingParams& params,
                 const SsdConfig& cfg, spec::ExecMode mode = spec::ExecMode::Performance,
                 spec::TraceWriter* trace = nullptr);
    // The draft side made by `remote` for each run.
    SsdScheduler(const TargetContext& target, DraftSideFactory remote, const sample::SamplingParams& params,
                 const SsdConfig& cfg, spec::ExecMode mode = spec::ExecMode::Performance,
                 spec::TraceWriter* trace = nullptr);

    // Same contract as SyncScheduler::run: sequence i in slot i of both caches
    // (`pre`: the prompts are already there).
    void run(const std::vector<std::vector<int32_t>>& prompts, const std::vector<int>& max_new,
             const OnToken& on_token, SsdStats& stats, const Prefilled* pre = nullptr);

private:
    TargetContext tgt_;
    DraftContext draft_;
    DraftSideFactory remote_;  // set: the draft side is remote (draft_ unused)
    sample::SamplingParams params_;
    SsdConfig cfg_;
    spec::ExecMode mode_;
    spec::TraceWriter* trace_;  // null: no round trace
};

// The tree limits SSD's chains are checked against (K, or a longer lookup chain).
SchedulerOptions ssd_scheduler_options(const SsdConfig& cfg, spec::ExecMode mode);

// SSD as one proposer of a batch that other methods share (the server's
// continuous batch): sequence slots 0..n_batch-1 of the target, a draft side
// of its own (SsdProposer::OwnDraft: a second instance of the draft engine's
// model and a cache of n_batch * (1 + cfg.fanout_budget) sequences, the
// branch slots after the batch), and drafts drawn with `params`.
ProposerBundle make_ssd_proposer(const SsdConfig& cfg, runtime::Engine& target, runtime::Engine& draft, int n_batch,
                                 const sample::SamplingParams& params);

// The same with the draft side made by `remote` (another process or host):
// its Hello asks for n_batch sequences with their branch slots.
ProposerBundle make_remote_ssd_proposer(const SsdConfig& cfg, runtime::Engine& target, const DraftSideFactory& remote,
                                        int n_batch, const sample::SamplingParams& params);

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

// The same with the draft side made by `remote` (no draft engine here).
runtime::GenerateResult generate_ssd_remote(runtime::Engine& target, const DraftSideFactory& remote,
                                            const runtime::GenerateRequest& req, const SsdConfig& cfg,
                                            SsdStats* stats = nullptr, const runtime::TokenCallback& on_text = {});

}  // namespace specdec::sched
