#include "sched/ssd_scheduler.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/clock.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "runtime/draft_vocab.h"
#include "sched/ssd_proposer.h"
#include "sched/ssd_trace.h"
#include "sched/vocab_subset_source.h"

namespace specdec::sched {

namespace {
// What a remote draft side's Hello asks for: the target's SSD options,
// sampling, vocabulary and context, and n_batch sequences with their branch
// slots.
DraftSideSpec remote_spec(const SsdConfig& cfg, const sample::SamplingParams& params, int n_vocab, int n_ctx,
                          int n_batch) {
    DraftSideSpec spec;
    spec.cfg = cfg;
    spec.params = params;
    spec.target_n_vocab = n_vocab;
    spec.target_n_ctx = n_ctx;
    spec.n_batch = n_batch;
    spec.branch_slots = cfg.fanout_budget;
    return spec;
}
}  // namespace

SsdScheduler::SsdScheduler(const TargetContext& target, const DraftContext& draft,
                           const sample::SamplingParams& params, const SsdConfig& cfg, spec::ExecMode mode,
                           spec::TraceWriter* trace)
    : tgt_(target), draft_(draft), params_(params), cfg_(cfg), mode_(mode), trace_(trace) {
    SPECDEC_CHECK(tgt_.model && tgt_.cache && tgt_.pool, "SSD: target model, cache and pool are required");
    SPECDEC_CHECK(draft_.model && draft_.cache, "SSD: draft model and cache are required");
    cfg_.validate();
}

SsdScheduler::SsdScheduler(const TargetContext& target, DraftSideFactory remote,
                           const sample::SamplingParams& params, const SsdConfig& cfg, spec::ExecMode mode,
                           spec::TraceWriter* trace)
    : tgt_(target), remote_(std::move(remote)), params_(params), cfg_(cfg), mode_(mode), trace_(trace) {
    SPECDEC_CHECK(tgt_.model && tgt_.cache && tgt_.pool, "SSD: target model, cache and pool are required");
    SPECDEC_CHECK(remote_, "SSD: no draft side");
    cfg_.validate();
}

void SsdScheduler::run(const std::vector<std::vector<int32_t>>& prompts, const std::vector<int>& max_new,
                       const OnToken& on_token, SsdStats& stats, const Prefilled* pre) {
    const int B = (int)prompts.size();
    DraftWorkerOptions wo;
    wo.cfg = cfg_;
    wo.params = params_;
    wo.target_n_vocab = tgt_.model->config().n_vocab;
    std::unique_ptr<SsdProposer> owned;
    if (remote_) {
        SPECDEC_CHECK(B >= 1 && B <= tgt_.cache->n_seq(), "SSD: batch of ", B, " sequences, the cache holds ",
                      tgt_.cache->n_seq());
        SPECDEC_CHECK(!pre, "SSD: a shared prefill needs the draft cache in this process");
        owned = std::make_unique<SsdProposer>(
            remote_(remote_spec(cfg_, params_, wo.target_n_vocab, tgt_.cache->n_ctx(), B)), wo, B, trace_);
    } else {
        SPECDEC_CHECK(B >= 1 && B <= tgt_.cache->n_seq() && B <= draft_.cache->n_seq(), "SSD: batch of ", B,
                      " sequences, the caches hold ", tgt_.cache->n_seq(), " and ", draft_.cache->n_seq());
        SPECDEC_CHECK(draft_.cache->n_ctx() >= tgt_.cache->n_ctx(), "SSD: the draft context (",
                      draft_.cache->n_ctx(), ") must be at least the target's (", tgt_.cache->n_ctx(), ")");
        wo.subset = draft_.subset;
        owned = std::make_unique<SsdProposer>(draft_, wo, trace_);  // its draft thread is joined on every exit path
    }
    SsdProposer& proposer = *owned;
    const std::unique_ptr<spec::Proposer> top = spec::with_lookup_first(std::move(owned), cfg_.lookup);
    const SchedulerOptions so = ssd_scheduler_options(cfg_, mode_);
    // The loop's own round lines would interleave with the SSD lines the proposer writes.
    SyncScheduler loop(tgt_, *top, params_, so, nullptr);
    loop.run(prompts, max_new, on_token, stats.spec, pre);
    proposer.finish_trace();
    stats.draft = proposer.draft_stats();
    stats.stall_s += proposer.stall_s();
    stats.fallback = proposer.fallback_stats();
}

SchedulerOptions ssd_scheduler_options(const SsdConfig& cfg, spec::ExecMode mode) {
    SchedulerOptions so;
    so.mode = mode;
    // A speculation of K drafts is a chain of K + 1 nodes; a lookup chain may be longer.
    const int depth = std::max(cfg.k, cfg.lookup.min_n > 0 ? cfg.lookup.max_draft : 0);
    so.tree_budget = depth + 1;
    so.tree_depth = depth;
    so.distinct_siblings = true;  // checked for deterministic trees only (chains have no siblings)
    return so;
}

ProposerBundle make_ssd_proposer(const SsdConfig& cfg, runtime::Engine& target, runtime::Engine& draft, int n_batch,
                                 const sample::SamplingParams& params) {
    cfg.validate();
    SPECDEC_CHECK(n_batch >= 1, "SSD: a batch of at least one sequence");
    SPECDEC_CHECK(draft.n_ctx() >= target.n_ctx(), "SSD: the draft context (", draft.n_ctx(),
                  ") must be at least the target's (", target.n_ctx(), ")");
    SsdProposer::OwnDraft own;
    own.model = std::make_unique<model::Transformer>(draft.file(), draft.model().layers_run());
    own.cache = std::make_unique<kv::KvCache>(own.model->kv_options(draft.n_ctx(), n_batch * (1 + cfg.fanout_budget)));
    own.subset = load_vocab_subset(cfg.vocab_subset_n, cfg.vocab_subset_path, cfg.vocab_corpus_path, target);
    own.prefill_chunk = draft.options().prefill_chunk;
    DraftWorkerOptions wo;
    wo.cfg = cfg;
    wo.params = params;
    wo.target_n_vocab = target.config().n_vocab;
    wo.n_batch = n_batch;
    auto p = std::make_unique<SsdProposer>(std::move(own), wo);
    ProposerBundle b;
    b.ssd = p.get();
    b.proposer = spec::with_lookup_first(std::move(p), cfg.lookup);
    return b;
}

ProposerBundle make_remote_ssd_proposer(const SsdConfig& cfg, runtime::Engine& target, const DraftSideFactory& remote,
                                        int n_batch, const sample::SamplingParams& params) {
    cfg.validate();
    SPECDEC_CHECK(n_batch >= 1 && remote, "SSD: a remote draft side and a batch of at least one sequence");
    DraftSideSpec spec = remote_spec(cfg, params, target.config().n_vocab, target.n_ctx(), n_batch);
    spec.target_vocab_fingerprint = runtime::vocabulary_fingerprint(target.tokenizer(), spec.target_n_vocab);
    DraftWorkerOptions wo;
    wo.cfg = cfg;
    wo.params = params;
    wo.target_n_vocab = spec.target_n_vocab;
    wo.n_batch = n_batch;
    auto p = std::make_unique<SsdProposer>(remote(spec), wo, n_batch);
    ProposerBundle b;
    b.ssd = p.get();
    b.proposer = spec::with_lookup_first(std::move(p), cfg.lookup);
    return b;
}

namespace {
DraftContext draft_context(runtime::Engine& draft, const spec::VocabSubset* subset) {
    return DraftContext{&draft.model(), &draft.cache(), draft.options().prefill_chunk, subset};
}

// The target's context: the engine's pool, or one of cfg.target_threads
// threads of its own (kept alive in `own` for the run).
TargetContext target_context(runtime::Engine& target, const SsdConfig& cfg, std::unique_ptr<ThreadPool>& own) {
    ThreadPool* pool = &target.pool();
    if (cfg.target_threads > 0 && cfg.target_threads != target.pool().size()) {
        own = std::make_unique<ThreadPool>(cfg.target_threads);
        pool = own.get();
    }
    return TargetContext{&target.model(), &target.cache(), pool, target.options().prefill_chunk};
}

// The round trace cfg asks for (null: none), its header written.
std::unique_ptr<spec::TraceWriter> open_trace(const SsdConfig& cfg, const sample::SamplingParams& p,
                                              const runtime::Engine& target, runtime::Engine* draft,
                                              const TargetContext& tc) {
    if (cfg.trace_path.empty()) return nullptr;
    auto t = std::make_unique<spec::TraceWriter>(cfg.trace_path);
    t->header(ssd_run_header(cfg, p, target, draft, tc.pool->size()));
    return t;
}
}  // namespace

namespace {
// One SSD run of the loop; the draft side's counters go to `stats` too.
// The draft side: on a thread over `draft`, or made by `remote` (draft null).
LoopRun ssd_run(runtime::Engine& target, runtime::Engine* draft, const DraftSideFactory* remote,
                const SsdConfig& cfg, const sample::SamplingParams& params, const Prefilled* pre, SsdStats& stats) {
    return [&target, draft, remote, &cfg, params, pre, &stats](const std::vector<std::vector<int32_t>>& prompts,
                                                               const std::vector<int>& max_new,
                                                               const OnToken& on_token) {
        std::unique_ptr<ThreadPool> own_pool;
        const TargetContext tc = target_context(target, cfg, own_pool);
        const auto trace = open_trace(cfg, params, target, draft, tc);
        stats = SsdStats{};
        if (remote) {
            SPECDEC_CHECK(cfg.vocab_subset_n == 0, "SSD: --vocab-subset needs the draft in this process");
            // The link checks the server's vocabulary against the target's.
            const uint64_t fingerprint = runtime::vocabulary_fingerprint(target.tokenizer(), target.config().n_vocab);
            const DraftSideFactory link = [remote, fingerprint](DraftSideSpec spec) {
                spec.target_vocab_fingerprint = fingerprint;
                return (*remote)(spec);
            };
            SsdScheduler sch(tc, link, params, cfg, spec::ExecMode::Performance, trace.get());
            sch.run(prompts, max_new, on_token, stats, pre);
            return stats.spec;
        }
        const auto subset =
            load_vocab_subset(cfg.vocab_subset_n, cfg.vocab_subset_path, cfg.vocab_corpus_path, target);
        SsdScheduler sch(tc, draft_context(*draft, subset.get()), params, cfg, spec::ExecMode::Performance,
                         trace.get());
        sch.run(prompts, max_new, on_token, stats, pre);
        return stats.spec;
    };
}
}  // namespace

std::vector<runtime::GenerateResult> generate_ssd_batch(runtime::Engine& target, runtime::Engine& draft,
                                                        const std::vector<runtime::GenerateRequest>& reqs,
                                                        const SsdConfig& cfg, SsdStats* stats_out,
                                                        const Prefilled* pre) {
    SPECDEC_CHECK(!reqs.empty(), "no requests");
    SsdStats stats;
    auto out = generate_batch_with(target, reqs, ssd_run(target, &draft, nullptr, cfg, reqs[0].sampling, pre, stats));
    if (stats_out) *stats_out = stats;
    return out;
}

runtime::GenerateResult generate_ssd(runtime::Engine& target, runtime::Engine& draft,
                                     const runtime::GenerateRequest& req, const SsdConfig& cfg, SsdStats* stats_out,
                                     const runtime::TokenCallback& on_text, const Prefilled* pre) {
    SsdStats stats;
    auto res = generate_one_with(target, req, ssd_run(target, &draft, nullptr, cfg, req.sampling, pre, stats), on_text);
    if (stats_out) *stats_out = stats;
    return res;
}

runtime::GenerateResult generate_ssd_remote(runtime::Engine& target, const DraftSideFactory& remote,
                                            const runtime::GenerateRequest& req, const SsdConfig& cfg,
                                            SsdStats* stats_out, const runtime::TokenCallback& on_text) {
    SsdStats stats;
    auto res = generate_one_with(target, req, ssd_run(target, nullptr, &remote, cfg, req.sampling, nullptr, stats),
                                 on_text);
    if (stats_out) *stats_out = stats;
    return res;
}

}  // namespace specdec::sched
