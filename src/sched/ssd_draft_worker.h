// The asynchronous draft side of SSD: a thread with its own draft model
// context (KV cache and thread pool) that answers each verification outcome
// with the next speculation, then, while the target verifies it, builds the
// speculation cache for that speculation's likely outcomes:
//   1. glue decode: one causal forward over [root, s1..sL] gives q_0..q_L;
//   2. fork: at each accept point k the top F_k tokens of q_k (s_{k+1}
//      excluded for k < L: after a rejection the residual is zero there);
//   3. tree decode: K draft steps for every branch at once, one forward per
//      step. With spare sequence slots in the draft cache (n_seq >= batch *
//      (1 + branches)), each branch lives in its own scratch slot: the slot gets
//      the prefix up to its accept point (only what changed since the last
//      round is copied) and then decodes one row per step, committing as it
//      goes. Without spare slots every step re-feeds the glue rows and each
//      branch's path (parent links keep branches invisible to each other).
//   4. store (k, t) -> (drafts, their proposal distributions).
// With a vocabulary subset the draft's forwards stop before the LM head and
// compute logits over the subset's rows only; every draft row is widened to
// the target vocabulary (-inf, i.e. q = 0, outside the subset).
// The glue rows always come first in each forward, so after the build the
// sequence's speculative KV region holds [root, s1..sL] and an outcome k just
// commits k + 1 of them.
// Talks to the target only through ssd_messages.h records.
#pragma once

#include <exception>
#include <span>
#include <memory>
#include <thread>
#include <vector>

#include "core/rng.h"
#include "kv/kv_cache.h"
#include "model/forward_batch.h"
#include "model/lm_head_subset.h"
#include "model/transformer.h"
#include "sample/sampler.h"
#include "sched/ssd_draft_side.h"
#include "sched/ssd_fanout.h"
#include "sched/ssd_messages.h"
#include "spec/vocab_subset.h"

namespace specdec {
class ThreadPool;
}

namespace specdec::sched {

struct DraftContext {
    model::Transformer* model = nullptr;
    kv::KvCache* cache = nullptr;  // one sequence slot per batch sequence
    int prefill_chunk = 256;
    const spec::VocabSubset* subset = nullptr;  // optional: draft only these tokens (cheaper LM head)
};

struct DraftWorkerOptions {
    SsdConfig cfg;
    sample::SamplingParams params;
    int target_n_vocab = 0;
    // Draft only these target tokens, with the LM head computed over their
    // rows only (model/lm_head_subset.h): cheaper draft forwards. Borrowed.
    const spec::VocabSubset* subset = nullptr;  // from DraftContext::subset
    // Sequence slots of the batch, fixed: slots 0..n_batch-1 are sequences and
    // the rest of the cache is their branch slots, whichever sequences have
    // begun. The server's batch admits sequences at any time, so its layout
    // must not move under the sequences already running. 0: the batch is the
    // highest sequence that began (every sequence begins before the first
    // round, as SyncScheduler admits them).
    int n_batch = 0;
};

// The in-process placement of the draft side (ssd_draft_side.h).
class DraftWorker final : public DraftSide {
public:
    // Starts the thread (which creates the draft's pool, pinned if asked).
    DraftWorker(const DraftContext& ctx, const DraftWorkerOptions& opts);
    ~DraftWorker() override;  // sends Stop and joins
    DraftWorker(const DraftWorker&) = delete;
    DraftWorker& operator=(const DraftWorker&) = delete;

    void send(ToDraft msg) override { inbox_.push(std::move(msg)); }
    // Every Outcomes message with a sequence still running gets exactly one
    // reply (an error reply if the worker failed), so waiting without a bound
    // (timeout_s <= 0) cannot hang.
    std::optional<FromDraft> receive(double timeout_s) override {
        if (timeout_s <= 0) return outbox_.pop();
        return outbox_.pop_for(timeout_s);
    }
    std::string fault() const override { return "timeout"; }  // the only way a bounded receive fails here

private:
    struct Branch {
        int k = 0;                      // accept point
        int32_t t = 0;                  // bonus guess
        std::vector<int32_t> drafts;    // (<= K) tokens after t
        std::vector<float> q;           // sampling: (drafts, target vocab) proposals
        std::vector<float> scores;      // branch slots: (drafts, target vocab) penalised logits
        int last_row = -1;              // batch row of the branch's last token in the current step
    };
    struct Seq {
        bool active = false;
        bool has_root = false;
        std::vector<int32_t> hist;      // committed draft KV = hist minus its last token (the root)
        Speculation spec;               // the speculation the target is verifying
        bool glue_valid = false;        // speculative KV region holds [root, spec drafts]
        std::vector<Branch> branches;
        std::vector<float> scores;      // (L + 1, target vocab) penalised glue logits, for bonus ranks
        int glue_row = 0;               // batch row of the root in the current forward
        bool in_slots = false;          // the last build kept its branches in scratch slots
        // A hit on a branch slot: its KV and logits already hold the next glue
        // for all but the last draft, so the glue forward shrinks to one row.
        int reuse_slot = -1;
        std::vector<float> reuse_scores;  // (L, target vocab)
        bool adopted = false;             // spec is a chain the target drafted elsewhere (DraftOutcome::adopt)
    };

    void loop();
    void handle_begin(const ToDraft& m);
    FromDraft handle_outcomes(const ToDraft& m);
    void build_caches();
    void commit_outcomes(const std::vector<DraftOutcome>& outs);
    void run_jit(const std::vector<int>& seqs, const std::vector<int>& caps);
    void draw(const float* logits, std::span<const int32_t> hist, int F, int32_t& tok, std::vector<float>* q);
    BackupKind choose_backup(int batch) const;
    void forward();
    bool use_slots(int n_branches) const;
    int branch_slot(int seq, int i) const { return n_batch_ + seq * slots_per_seq() + i; }
    int slots_per_seq() const { return n_batch_ ? (ctx_.cache->n_seq() - n_batch_) / n_batch_ : 0; }
    // Makes slot dst hold src's first n committed entries, copying only past
    // what dst already shares with src.
    void sync_slot(int src, int dst, int n);
    void widen(const float* draft_row, std::vector<float>& out) const;

    DraftContext ctx_;
    DraftWorkerOptions opts_;
    int vt_ = 0, vd_ = 0;               // target / draft vocabulary
    std::unique_ptr<ThreadPool> pool_;  // created on the worker thread
    std::vector<int32_t> allowed_;      // subset: draftable ids, ascending (logit column j <-> allowed_[j])
    std::unique_ptr<model::LmHeadSubset> head_;  // subset LM head (null: the full head)
    Channel<ToDraft> inbox_;
    Channel<FromDraft> outbox_;
    std::vector<Seq> seqs_;
    int n_batch_ = 0;                   // sequences of the batch (slots 0..n_batch_-1)
    std::vector<int> slot_valid_;       // (n_seq) leading entries a branch slot shares with its sequence
    FanoutEstimator est_;
    std::vector<int> fan_;              // (K + 1) current F_k
    DraftSideStats st_;
    Rng rng_;
    model::ForwardBatch batch_;
    model::ForwardResult result_;
    std::vector<float> row_, prob_;     // (target vocab) scratch
    std::vector<int> top_;
    double verify_s_ = 0;               // recent target verification time
    double jit_s_ = 0;                  // recent JIT time (one batched call)
    long emitted_ = 0, rounds_ = 0;     // per-sequence rounds seen, tokens they emitted
    double last_build_s_ = 0;           // the last cache build (reported with the next reply)
    bool last_build_interrupted_ = false;
    std::thread thread_;
};

// Saguaro sampling: q' = q with the F most likely tokens' mass times C,
// renormalised (unchanged when nothing would remain).
void saguaro_reweight(std::vector<float>& q, int F, float C);

// Indices of the n largest values (ties to the lowest index), best first.
void top_n(const float* s, int V, int n, std::vector<int>& out);

}  // namespace specdec::sched
