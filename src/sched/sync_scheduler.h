// The synchronous speculative decoding loop, for a batch of sequences (a thin
// loop over SpecBatch, sched/spec_batch.h, which holds the round itself):
//   propose (one tree per sequence) -> tensorize + check invariants ->
//   ONE target forward holding every sequence's tree -> verify each ->
//   commit each accepted path in the target cache -> emit tokens.
// Sequence i of the batch lives in sequence slot i of the target cache (and of
// the draft cache, when the proposer has one). With the NoProposer every tree
// is just its root and the loop is plain AR decoding.
#pragma once

#include <functional>
#include <string>
#include <memory>
#include <vector>

#include "core/rng.h"
#include "kv/kv_cache.h"
#include "model/transformer.h"
#include "runtime/engine.h"
#include "sample/sampler.h"
#include "sched/spec_config.h"
#include "spec/lookup_first_proposer.h"
#include "spec/proposer.h"
#include "spec/trace.h"
#include "spec/tree_tensors.h"
#include "spec/verifier.h"
#include "spec/vocab_subset.h"
#include "specdec/result.h"

namespace specdec::sched {

struct TargetContext {
    model::Transformer* model = nullptr;
    kv::KvCache* cache = nullptr;
    ThreadPool* pool = nullptr;
    int prefill_chunk = 256;  // must match the AR baseline's for bit-identical first tokens
};

// The public counters (specdec/result.h) are the loop's own.
using SpecStats = specdec::SpecStats;

// Prompts already in the caches (a prefill shared by several runs: specdec
// bench decodes every configuration of a turn from one prefill). Sequence i's
// target cache holds prompt i committed (what follows it is dropped) and
// logits[i] are its last token's logits from the chunked prefill (so the first
// token is AR's); with draft_ready the draft cache's sequence i holds the
// prompt too.
struct Prefilled {
    std::vector<const float*> logits;
    bool draft_ready = false;
};

// Called for every generated token of sequence `i` (batch index), with the
// verifier's verdict on where it came from; returns true when that sequence
// must stop after this token.
using TokenSource = spec::TokenSource;
using OnToken = std::function<bool(int i, int32_t token, TokenSource source)>;

struct SchedulerOptions {
    spec::ExecMode mode = spec::ExecMode::Performance;
    int tree_budget = 0;      // invariant limit (0: none)
    int tree_depth = 0;       // invariant limit (0: none)
    bool distinct_siblings = false;  // deterministic proposers: siblings must differ
};

// The tree limits a method's trees are checked against.
SchedulerOptions scheduler_options(const SpecConfig& cfg);

// Chain, tree and ssd: prompt lookup first's options (min_n 0: off, as for
// every other method).
spec::LookupFirstOptions lookup_first_options(const SpecConfig& cfg);

class SyncScheduler {
public:
    SyncScheduler(const TargetContext& target, spec::Proposer& proposer, const sample::SamplingParams& params,
                  const SchedulerOptions& opts, spec::TraceWriter* trace = nullptr);

    // Prefills each prompt into its own sequence (unless `pre` says it is
    // there), then decodes until every sequence has stopped (on_token) or
    // produced max_new tokens.
    void run(const std::vector<std::vector<int32_t>>& prompts, const std::vector<int>& max_new,
             const OnToken& on_token, SpecStats& stats, const Prefilled* pre = nullptr);

private:
    TargetContext tgt_;
    spec::Proposer& proposer_;
    sample::SamplingParams params_;
    SchedulerOptions opts_;
    spec::TraceWriter* trace_;
};

// The request side that every method's generate shares around one run of
// the loop: tokenization, one stop checker per request (stop strings, EOS,
// max_tokens), streaming of stable text and cancellation, and the results.
// `run` decodes the prompts (prompt i in slot i) and returns its counters.
using LoopRun = std::function<SpecStats(const std::vector<std::vector<int32_t>>& prompts,
                                        const std::vector<int>& max_new, const OnToken& on_token)>;
std::vector<runtime::GenerateResult> generate_batch_with(runtime::Engine& target,
                                                         const std::vector<runtime::GenerateRequest>& reqs,
                                                         const LoopRun& run, SpecStats* stats = nullptr);
runtime::GenerateResult generate_one_with(runtime::Engine& target, const runtime::GenerateRequest& req,
                                          const LoopRun& run, const runtime::TokenCallback& on_text = {},
                                          SpecStats* stats = nullptr);

// Engine-level speculative generation with the same request, stop rules and
// result as runtime::generate_ar. `draft` is required for chain and tree.
runtime::GenerateResult generate_speculative(runtime::Engine& target, runtime::Engine* draft,
                                             const runtime::GenerateRequest& req, const SpecConfig& cfg,
                                             SpecStats* stats = nullptr, const runtime::TokenCallback& on_text = {},
                                             const Prefilled* pre = nullptr);

// Several requests decoded together (one target forward per round for all).
std::vector<runtime::GenerateResult> generate_speculative_batch(runtime::Engine& target, runtime::Engine* draft,
                                                                const std::vector<runtime::GenerateRequest>& reqs,
                                                                const SpecConfig& cfg, SpecStats* stats = nullptr,
                                                                const Prefilled* pre = nullptr);

// The proposer a config asks for, with what it borrows (a vocabulary subset).
class SsdProposer;
struct ProposerBundle {
    std::unique_ptr<spec::VocabSubset> subset;
    std::unique_ptr<spec::Proposer> proposer;
    // ssd: its proposer under any wrapper (lookup first), for its stats.
    const SsdProposer* ssd = nullptr;
    // Auto: where its cost curves came from, and what calibrating them cost now.
    std::string costs_from;
    double calibration_s = 0;
};
// Chain and tree need the draft engine; its cache must hold as many sequences
// as the batch. The draft runs on the target's thread pool (never concurrently).
ProposerBundle make_proposer(const SpecConfig& cfg, runtime::Engine& target, runtime::Engine* draft,
                             const sample::SamplingParams& params);

}  // namespace specdec::sched
