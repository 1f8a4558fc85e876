// SSD (speculative speculative decoding, Saguaro) as a proposer of the one
// round loop (SpecBatch): its draft side (ssd_draft_worker.h) runs on its own
// thread and answers each round's outcomes with the next speculations, then,
// while the target verifies them, builds the speculation cache for their
// likely outcomes. On the target side SSD is then nothing but where a round's
// chains come from:
//   begin_with_prompt / begin_with_prefix   Begin{prompt}: the draft reads
//                                           the prompt beside the target's prefill;
//   propose   sends the outcome of the round just verified (k accepted, the
//             bonus token = the history's last) and waits for the reply: a
//             cache hit at once, a backup's chain on a miss (the stall);
//   observe   keeps k for the next propose, and the round trace's outcome.
// Outcomes go out in propose rather than in observe because only propose
// knows how long the next speculation may be (context room, tokens left).
//
// Lossless by construction: every speculation says how its drafts were drawn
// (a point mass for greedy/n-gram drafts; the Saguaro-modified proposal q'
// for sampled ones; uniform for random ones) and the loop's one Verifier
// checks them against the target with that q.
//
// Draft-cache sequence s serves target sequence s; the worker's scratch
// branch slots follow the highest sequence that began, so every sequence of
// a batch must begin before its first round (SyncScheduler admits them all
// first).
#pragma once

#include <memory>
#include <vector>

#include "sched/ssd_draft_worker.h"
#include "sched/ssd_trace.h"
#include "spec/proposer.h"
#include "spec/trace.h"

namespace specdec::sched {

class SsdProposer final : public spec::Proposer {
public:
    // trace: SSD round lines ("ssd_round", ssd_trace.h) go there (null: none).
    SsdProposer(const DraftContext& draft, const DraftWorkerOptions& opts, spec::TraceWriter* trace = nullptr);
    // A draft side of its own, for a batch where other proposers draft with
    // the same draft engine (the server): the draft thread's forwards run on
    // `model` (a second Transformer over the engine's file: weights shared,
    // scratch not) and `cache`, so they never race with the forwards that
    // the other proposers run on the engine's instance between rounds.
    struct OwnDraft {
        std::unique_ptr<model::Transformer> model;
        std::unique_ptr<kv::KvCache> cache;
        std::unique_ptr<spec::VocabSubset> subset;  // optional
        int prefill_chunk = 256;
    };
    SsdProposer(OwnDraft own, DraftWorkerOptions opts);
    ~SsdProposer() override;

    void begin(int seq) override;
    void begin_with_prefix(int seq, std::span<const int32_t> prefix) override;
    void begin_with_prompt(int seq, std::span<const int32_t> prompt) override;
    void propose(std::span<const spec::ProposeInput> in, std::span<spec::DraftTree> out, Rng& rng) override;
    void observe(const spec::RoundFeedback& fb) override;

    // The draft side's counters as of its last reply.
    const DraftSideStats& draft_stats() const { return draft_stats_; }
    // The draft side's own KV cache (OwnDraft; null when borrowed), for reports.
    const kv::KvCache* own_cache() const { return own_.cache.get(); }
    // Seconds the target waited for the draft side's replies.
    double stall_s() const { return stall_s_; }
    // Writes the trace lines still waiting for a build time (the run ended).
    void finish_trace();

private:
    struct Seq {
        bool active = false;         // begun and not yet told done to the draft side
        bool in_round = false;       // proposed for in the last round
        int accepted = 0;            // k of the last verified speculation (0 before the first)
        int round = 0;               // rounds proposed for (trace)
    };
    void start(int seq, std::span<const int32_t> prompt, bool in_cache);
    void end(int seq);

    OwnDraft own_;  // empty unless the proposer owns its draft side (declared before the worker that uses it)
    DraftWorkerOptions opts_;
    spec::TraceWriter* trace_;
    std::unique_ptr<DraftWorker> worker_;
    std::vector<Seq> seqs_;
    DraftSideStats draft_stats_;
    double stall_s_ = 0;
    int batch_round_ = 0;
    double last_verify_s_ = 0;
    // Trace: this round's records (outcome filled by observe), and the last
    // round's, written when the next reply brings the build time that
    // overlapped their verification.
    std::vector<SsdRoundRecord> round_recs_, pending_;
    ToDraft done_;  // done outcomes not sent yet (ride with the next outcomes)
};

}  // namespace specdec::sched
