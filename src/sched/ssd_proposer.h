// SSD (speculative speculative decoding, Saguaro) as a proposer of the one
// round loop (SpecBatch): its draft side (ssd_draft_side.h: a thread of this
// process, or a draft server elsewhere) answers each round's outcomes with
// the next speculations, then, while the target verifies them, builds the
// speculation cache for their likely outcomes. On the target side SSD is then
// nothing but where a round's chains come from:
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
// Faults (a remote draft side only, DraftSide::can_fail): the wait for a
// reply is bounded (SsdConfig::link_timeout_ms, plus a prefill allowance in
// rounds that carry Begins). On a timeout, a disconnect, an error or an
// invalid reply the round's chains come from prompt lookup over the target's
// own history (deterministic drafts, so still lossless) and the link is out
// of sync: the next round starts a new session (restart) and begins every
// running sequence again with its whole history but the last token, followed
// by the outcome {k = 0, bonus = last token}, which is exactly the state a
// fresh sequence has after its first token. Repeated faults space the retries
// out (after n faults in a row that cost a wait, the next attempt comes
// 2^(n-1) rounds later, at most 16) so that a hung server costs a bounded
// share of the rounds; a missing connection fails at once and is retried
// every round.
//
// Rounds that another proposer drafts (a lookup-first wrapper takes a
// sequence's round when its history repeats an n-gram): a chain of at most K
// tokens is adopted (drafted_elsewhere), so the draft side builds its cache
// for it as for its own speculation. A round it did not follow (a longer
// chain, or a remote side out of sync) leaves it behind: the next propose
// for that sequence sees a longer history than the draft side's and begins it
// again from the history, keeping the prefix the draft cache holds
// (DraftBegin::in_cache), then goes on as after a prefill.
//
// Draft-cache sequence s serves target sequence s; the worker's scratch
// branch slots follow the highest sequence that began, so every sequence of
// a batch must begin before its first round (SyncScheduler admits them all
// first).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sched/ssd_draft_side.h"
#include "sched/ssd_draft_worker.h"
#include "sched/ssd_trace.h"
#include "spec/proposer.h"
#include "spec/trace.h"

namespace specdec::sched {

class SsdProposer final : public spec::Proposer {
public:
    // The in-process placement: a DraftWorker thread over `draft`.
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
    // Any placement: `side` serves sequences 0..n_seq-1; opts.cfg, opts.params
    // and opts.target_n_vocab are what the target side uses of the options.
    SsdProposer(std::unique_ptr<DraftSide> side, const DraftWorkerOptions& opts, int n_seq,
                spec::TraceWriter* trace = nullptr);
    ~SsdProposer() override;

    void begin(int seq) override;
    void begin_with_prefix(int seq, std::span<const int32_t> prefix) override;
    void begin_with_prompt(int seq, std::span<const int32_t> prompt) override;
    // The draft side stops working for it (a Done outcome with the next message).
    void end(int seq) override;
    // A lookup chain of at most K tokens: the draft side adopts it as the
    // speculation under verification and builds its cache for its outcomes,
    // so that the next round is a cache lookup, not a miss.
    bool drafted_elsewhere(const spec::ProposeInput& in, const spec::DraftTree& tree) override;
    void propose(std::span<const spec::ProposeInput> in, std::span<spec::DraftTree> out, Rng& rng) override;
    void observe(const spec::RoundFeedback& fb) override;

    // The draft side's counters as of its last reply (summed over the
    // sessions of a remote side).
    DraftSideStats draft_stats() const;
    // The draft side's own KV cache (OwnDraft; null otherwise), for reports.
    const kv::KvCache* own_cache() const { return own_.cache.get(); }
    // Seconds the target waited for the draft side's replies (timeouts included).
    double stall_s() const { return stall_s_; }
    const SsdFallbackStats& fallback_stats() const { return fallback_; }
    // Writes the trace lines still waiting for a build time (the run ended).
    void finish_trace();

private:
    struct Seq {
        bool active = false;         // begun and not yet told done to the draft side
        int accepted = 0;            // k of the last verified speculation (0 before the first)
        int round = 0;               // rounds proposed for (trace)
        // The history length the draft side's state leads to at the next
        // propose: the prompt and the first token, then each round's root
        // plus its accepted drafts and the bonus. Another length (rounds
        // drafted elsewhere: lookup first, or 0 after a resync) begins the
        // sequence again on the draft side from its history.
        size_t next_len = 0;
        size_t proposed_len = 0;     // the history length of the last propose
    };
    void start(int seq, std::span<const int32_t> prompt, bool in_cache);
    // Starts a new session with the draft side: every running sequence is
    // begun again from its history when it is next proposed for.
    void resync();
    // Why the reply cannot serve this round ("": it can).
    std::string check_reply(const FromDraft& r, std::span<const spec::ProposeInput> in) const;
    // The round's chains drafted locally after a fault (prompt lookup).
    void fall_back(std::span<const spec::ProposeInput> in, std::span<spec::DraftTree> out, const std::string& why,
                   double stall);
    void flush_pending(double build_s, bool interrupted);
    // The trace record of this round's chain for x (what every round shares).
    SsdRoundRecord round_record(const spec::ProposeInput& x, const Seq& S, std::vector<int32_t> drafts,
                                double stall) const;

    OwnDraft own_;  // empty unless the proposer owns its draft model and cache (declared before the side using them)
    DraftWorkerOptions opts_;
    spec::TraceWriter* trace_;
    std::unique_ptr<DraftSide> side_;
    std::vector<Seq> seqs_;
    DraftSideStats draft_stats_;       // this session's, as of its last reply
    DraftSideStats earlier_sessions_;  // summed over the sessions before it
    double stall_s_ = 0;
    int batch_round_ = 0;
    double last_verify_s_ = 0;
    // Trace: this round's records (outcome filled by observe), and the last
    // round's, written when the next reply brings the build time that
    // overlapped their verification.
    std::vector<SsdRoundRecord> round_recs_, pending_;
    ToDraft done_;  // done outcomes not sent yet (ride with the next outcomes)
    // This round's chains drafted elsewhere that the draft side adopts (sent with the round's outcomes).
    struct Adopted {
        spec::ProposeInput in;
        std::vector<int32_t> chain;
    };
    std::vector<Adopted> adopted_;
    std::vector<SsdRoundRecord> adopted_recs_;  // their trace records (joined to the round's in observe)
    // The outcome message entry for x (and a Begin for it in `begins` when
    // the draft side is behind); `adopt`: the chain it adopts, if any.
    void add_outcome(const spec::ProposeInput& x, std::vector<int32_t> adopt, ToDraft& m, ToDraft& begins);
    // Fault handling (remote sides).
    bool out_of_sync_ = false;   // the draft side may not hold the sequences' state
    int fault_streak_ = 0;       // consecutive failed attempts
    int skip_rounds_ = 0;        // rounds to draft locally before the next attempt
    long begun_tokens_ = 0;      // tokens begun since the last reply (the draft prefills them first)
    SsdFallbackStats fallback_;
};

}  // namespace specdec::sched
