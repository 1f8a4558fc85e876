#include "sched/sync_scheduler.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "model/layer_list.h"
#include "sched/cost_calibration.h"
#include "sched/spec_batch.h"
#include "sched/vocab_subset_source.h"
#include "runtime/eagle3_draft.h"
#include "spec/adaptive_proposer.h"
#include "spec/eagle3_proposer.h"
#include "spec/draft_model_proposer.h"
#include "spec/lookup_first_proposer.h"
#include "spec/ngram_proposer.h"

namespace specdec::sched {

SyncScheduler::SyncScheduler(const TargetContext& target, spec::Proposer& proposer,
                             const sample::SamplingParams& params, const SchedulerOptions& opts,
                             spec::TraceWriter* trace)
    : tgt_(target), proposer_(proposer), params_(params), opts_(opts), trace_(trace) {
    SPECDEC_CHECK(tgt_.model && tgt_.cache && tgt_.pool, "scheduler: target model, cache and pool are required");
}

void SyncScheduler::run(const std::vector<std::vector<int32_t>>& prompts, const std::vector<int>& max_new,
                        const OnToken& on_token, SpecStats& stats, const Prefilled* pre) {
    const int B = (int)prompts.size();
    SPECDEC_CHECK(B >= 1 && B <= tgt_.cache->n_seq(), "batch of ", B, " sequences, the cache holds ",
                  tgt_.cache->n_seq());
    SPECDEC_CHECK((int)max_new.size() == B, "scheduler: one max_new per sequence");
    SPECDEC_CHECK(!pre || (int)pre->logits.size() == B, "scheduler: one prefilled logits row per sequence");
    // One Rng for every draw, in sequence order: the same stream as before the
    // loop became a SpecBatch, so seeded runs reproduce.
    Rng rng(params_.seed);
    spec::AdaptiveStats auto_before;
    if (const auto* a = dynamic_cast<const spec::AdaptiveProposer*>(&proposer_)) auto_before = a->stats();
    SpecBatch sb(tgt_, opts_.mode, trace_, &rng);
    const SlotSpec spec{&proposer_, opts_.tree_budget, opts_.tree_depth, opts_.distinct_siblings};
    // Sequence i of the batch lives in slot i; all are admitted before round 0.
    for (int i = 0; i < B; ++i)
        sb.admit(i, prompts[i], spec, params_, max_new[i], on_token, pre ? pre->logits[i] : nullptr,
                 pre && pre->draft_ready);
    while (sb.any_running()) sb.step(on_token);
    const SpecStats& s = sb.stats();
    stats.rounds += s.rounds;
    stats.seq_rounds += s.seq_rounds;
    stats.drafted += s.drafted;
    stats.accepted += s.accepted;
    add_histogram(stats.accepted_hist, s.accepted_hist);
    stats.emitted += s.emitted;
    stats.lookup_rounds += s.lookup_rounds;
    stats.lookup_drafted += s.lookup_drafted;
    stats.lookup_accepted += s.lookup_accepted;
    stats.prefill_s += s.prefill_s;
    stats.decode_s += s.decode_s;
    stats.draft_s += s.draft_s;
    stats.tree_s += s.tree_s;
    stats.verify_s += s.verify_s;
    stats.commit_s += s.commit_s;
    if (const auto* a = dynamic_cast<const spec::AdaptiveProposer*>(&proposer_)) {
        // The proposer's counters are cumulative: this run's share is the
        // difference from before it.
        const spec::AdaptiveStats d = a->stats().since(auto_before);
        stats.auto_none += (int)d.rounds_none;
        stats.auto_lookup += (int)d.rounds_lookup;
        stats.auto_draft += (int)d.rounds_draft;
        stats.auto_sibling_drafts += (int)d.sibling_drafts;
        stats.auto_predicted_s += d.predicted_s;
        stats.auto_measured_s += d.measured_s;
    }
}

namespace {

// The target's EAGLE-3 head as a proposer (chain or tree as `eo` says).
std::unique_ptr<spec::Proposer> make_eagle3_proposer(runtime::Engine& target, const spec::Eagle3ProposerOptions& eo) {
    runtime::Eagle3Draft& e = *target.eagle3();
    SPECDEC_CHECK(e.cache->n_seq() >= target.cache().n_seq(), "EAGLE-3: the head's cache holds ", e.cache->n_seq(),
                  " sequences, the target's ", target.cache().n_seq());
    return std::make_unique<spec::Eagle3Proposer>(*e.forward, *e.cache, target.pool(), eo);
}

// Auto: the draft model's chain (if there is a draft; else the target's
// EAGLE-3 head's, if it has one) under the cost model, with prompt lookup;
// the cost curves are this process's (calibrated on first use).
ProposerBundle make_adaptive_proposer(const SpecConfig& cfg, runtime::Engine& target, runtime::Engine* draft,
                                      const sample::SamplingParams& params) {
    ProposerBundle b;
    spec::AdaptiveOptions ao;
    ao.draft_max = std::max(1, cfg.draft_k);
    ao.lookup_max = std::max(1, cfg.auto_lookup_max);
    ao.min_gain = cfg.auto_min_gain;
    if (cfg.lookup_min > 0) ao.lookup_min_n = cfg.lookup_min;
    ao.lookup_max_n = std::max(ao.lookup_min_n, cfg.ngram_max + 1);
    // Sibling leaves need deterministic drafts: greedy requests only.
    ao.sibling_max = !params.greedy()        ? 0
                     : cfg.auto_siblings < 0 ? ao.draft_max
                                             : std::min(cfg.auto_siblings, ao.draft_max);
    const int max_rows = std::max(ao.draft_max + ao.sibling_max, ao.lookup_max) + 1;
    std::vector<int> rows;
    for (int n = 1; n <= std::min(max_rows, 6); ++n) rows.push_back(n);
    if (max_rows > 6) rows.push_back(max_rows);
    CostSource tsrc, dsrc;
    auto target_costs = row_cost_curve(
        {&target.model(), &target.cache(), &target.pool(), target.options().model_path, "", {}}, max_rows, rows, &tsrc);
    std::shared_ptr<spec::RowCostCurve> draft_costs;
    std::unique_ptr<spec::Proposer> chain;
    if (draft) {
        b.subset = load_vocab_subset(cfg.vocab_subset_n, cfg.vocab_subset_path, cfg.vocab_corpus_path, target);
        spec::DraftModelOptions o;
        o.shape = spec::DraftShape::Chain;
        o.chain_k = ao.draft_max;
        o.chain_min_prob = cfg.chain_min_prob;
        o.sampled = true;  // chains under sampling: drafts drawn from q (greedy: the argmax)
        o.target_n_vocab = target.config().n_vocab;
        o.window = cfg.draft_window;
        o.prefill_chunk = draft->options().prefill_chunk;
        o.params = params;
        o.subset = b.subset.get();
        chain = std::make_unique<spec::DraftModelProposer>(draft->model(), draft->cache(), target.pool(), o);
        // The draft's first forward of a round reads its catch-up rows (the
        // root, plus whatever it missed while other shapes ran).
        const std::vector<int> drows{1, 2, 4, 8, 16};
        // A self-speculation draft is the target's file with fewer layers: its
        // curve is keyed by the layers it runs too, never the target's.
        const std::string variant = draft->options().keep_layers.empty()
                                        ? ""
                                        : "layers=" + model::format_layer_list(draft->model().layers_run());
        draft_costs = row_cost_curve({&draft->model(), &draft->cache(), &target.pool(), draft->options().model_path,
                                      variant, {}},
                                     32, drows, &dsrc);
    } else if (target.eagle3()) {
        // No draft model: the target's EAGLE-3 head drafts the chains, from
        // the target's own features. Its drafted rows are never kept.
        spec::Eagle3ProposerOptions eo;
        eo.chain_k = ao.draft_max;
        chain = make_eagle3_proposer(target, eo);
        ao.draft_keeps_accepted = false;
        const runtime::Eagle3Draft& e = *target.eagle3();
        const std::vector<int> drows{1, 2, 4, 8, 16};
        CalibrationTarget ht;
        ht.pool = &target.pool();
        ht.path = e.path;
        ht.variant = "eagle3";
        ht.timer = eagle3_forward_timer(*e.forward, *e.cache, target.pool(), 0);
        draft_costs = row_cost_curve(ht, 32, drows, &dsrc);
    }
    b.costs_from = cost_origin_name(tsrc.origin);
    b.calibration_s = tsrc.calibration_s + dsrc.calibration_s;
    b.proposer = std::make_unique<spec::AdaptiveProposer>(std::move(chain), target_costs, draft_costs, ao);
    return b;
}

// Chain and tree with a separate draft model (or a self-speculation copy).
std::unique_ptr<spec::Proposer> make_draft_model_proposer(const SpecConfig& cfg, runtime::Engine& target,
                                                          runtime::Engine& draft_engine,
                                                          const sample::SamplingParams& params, ProposerBundle& b) {
    runtime::Engine* draft = &draft_engine;
    const int tv = target.config().n_vocab;
    b.subset = load_vocab_subset(cfg.vocab_subset_n, cfg.vocab_subset_path, cfg.vocab_corpus_path, target);
    spec::DraftModelOptions o;
    o.shape = cfg.method == Method::Chain ? spec::DraftShape::Chain : spec::DraftShape::Tree;
    o.chain_k = cfg.draft_k;
    o.tree_topk = cfg.tree_topk;
    o.tree_depth = cfg.tree_depth;
    o.tree_budget = cfg.tree_budget;
    o.tree_width = cfg.tree_width;
    o.chain_min_prob = cfg.chain_min_prob;
    o.sampled = cfg.tree_sampled || cfg.method == Method::Chain;  // chains under sampling: drafts drawn from q
    o.target_n_vocab = tv;
    o.window = cfg.draft_window;
    o.prefill_chunk = draft->options().prefill_chunk;
    o.params = params;
    o.subset = b.subset.get();
    return std::make_unique<spec::DraftModelProposer>(draft->model(), draft->cache(), target.pool(), o);
}

}  // namespace

ProposerBundle make_proposer(const SpecConfig& cfg, runtime::Engine& target, runtime::Engine* draft,
                             const sample::SamplingParams& params) {
    ProposerBundle b;
    switch (cfg.method) {
        case Method::AR:
            b.proposer = std::make_unique<spec::NoProposer>();
            return b;
        case Method::NGram: {
            spec::NgramOptions o;
            o.min_n = cfg.ngram_min;
            o.max_n = cfg.ngram_max;
            o.max_draft = cfg.draft_k;
            b.proposer = std::make_unique<spec::NgramProposer>(o);
            return b;
        }
        case Method::Auto:
            return make_adaptive_proposer(cfg, target, draft, params);
        case Method::Chain:
        case Method::Tree:
            break;
        case Method::Ssd:
            // Its proposer owns a draft thread and SSD's options: generate_ssd builds it.
            throw Error("method ssd runs through generate_ssd (its draft side has options of its own)");
    }
    if (!draft && target.eagle3()) {
        // An EAGLE-3 head drafts from the target's own features.
        spec::Eagle3ProposerOptions eo;
        eo.tree = cfg.method == Method::Tree;
        eo.chain_k = cfg.draft_k;
        eo.tree_topk = cfg.tree_topk;
        eo.tree_depth = cfg.tree_depth;
        eo.tree_budget = cfg.tree_budget;
        b.proposer = make_eagle3_proposer(target, eo);
    } else {
        SPECDEC_CHECK(draft, "method ", method_name(cfg.method), " needs a draft model (-d DRAFT) or an EAGLE-3 head");
        b.proposer = make_draft_model_proposer(cfg, target, *draft, params, b);
    }
    b.proposer = spec::with_lookup_first(std::move(b.proposer), lookup_first_options(cfg));
    return b;
}

SchedulerOptions scheduler_options(const SpecConfig& cfg) {
    SchedulerOptions s;
    s.mode = cfg.mode;
    switch (cfg.method) {
        case Method::AR: s.tree_budget = 1; break;
        case Method::Chain:
        case Method::Ssd:
        case Method::NGram: s.tree_budget = cfg.draft_k + 1; s.tree_depth = cfg.draft_k; break;
        case Method::Tree: s.tree_budget = cfg.tree_budget; s.tree_depth = cfg.tree_depth; break;
        case Method::Auto:
            s.tree_depth = std::max(cfg.draft_k, cfg.auto_lookup_max);
            // A draft chain of draft_k with a sibling beside each node, or the longest lookup chain.
            s.tree_budget = std::max(cfg.draft_k + std::max(0, cfg.auto_siblings < 0 ? cfg.draft_k : cfg.auto_siblings),
                                     cfg.auto_lookup_max) + 1;
            break;
    }
    if (cfg.lookup_min > 0 && cfg.needs_draft()) {
        // Room for a lookup chain longer than the draft's own trees (the draft
        // proposer keeps to its own budget and depth).
        s.tree_budget = std::max(s.tree_budget, cfg.lookup_len() + 1);
        s.tree_depth = std::max(s.tree_depth, cfg.lookup_len());
    }
    s.distinct_siblings = true;  // checked for deterministic trees only
    return s;
}

spec::LookupFirstOptions lookup_first_options(const SpecConfig& cfg) {
    spec::LookupFirstOptions lo;
    lo.min_n = cfg.lookup_min > 0 && cfg.needs_draft() ? cfg.lookup_min : 0;
    lo.max_n = std::max(cfg.lookup_min, cfg.ngram_max);
    lo.max_draft = cfg.lookup_len();
    return lo;
}

namespace {

nlohmann::json run_header(const SpecConfig& cfg, const runtime::Engine& target, const runtime::Engine* draft,
                          const sample::SamplingParams& p) {
    nlohmann::json h;
    spec::add_sampling_fields(h, p);
    h["method"] = method_name(cfg.method);
    h["mode"] = mode_name(cfg.mode);
    h["draft_k"] = cfg.draft_k;
    h["tree_topk"] = cfg.tree_topk;
    h["tree_depth"] = cfg.tree_depth;
    h["tree_budget"] = cfg.tree_budget;
    h["tree_width"] = cfg.tree_width;
    h["chain_min_prob"] = cfg.chain_min_prob;
    h["lookup_min"] = cfg.lookup_min;
    h["lookup_k"] = cfg.lookup_k;
    h["tree_sampled"] = cfg.tree_sampled;
    h["draft_window"] = cfg.draft_window;
    h["vocab_subset_n"] = cfg.vocab_subset_n;
    spec::add_model_fields(h, "target", target.options().model_path);
    if (draft) spec::add_model_fields(h, "draft", draft->options().model_path);
    return h;
}
}  // namespace

std::vector<runtime::GenerateResult> generate_batch_with(runtime::Engine& target,
                                                         const std::vector<runtime::GenerateRequest>& reqs,
                                                         const LoopRun& run, SpecStats* stats_out) {
    SPECDEC_CHECK(!reqs.empty(), "no requests");
    const sample::SamplingParams& params = reqs[0].sampling;
    sample::validate(params);
    std::vector<std::vector<int32_t>> prompts;
    std::vector<int> max_new;
    std::vector<runtime::StopChecker> stops;
    stops.reserve(reqs.size());
    for (const auto& r : reqs) {
        SPECDEC_CHECK(r.max_tokens >= 1, "max tokens must be >= 1, got ", r.max_tokens);
        SPECDEC_CHECK(r.sampling.temperature == params.temperature && r.sampling.seed == params.seed,
                      "a batch shares one set of sampling parameters");
        prompts.push_back(runtime::tokenize_request(target, r));
        SPECDEC_CHECK(!prompts.back().empty(), "the prompt is empty after tokenization");
        max_new.push_back(r.max_tokens);
        stops.emplace_back(target.tokenizer(), r);
    }
    const SpecStats stats =
        run(prompts, max_new, [&](int i, int32_t tok, TokenSource) { return stops[i].push(tok); });
    std::vector<runtime::GenerateResult> out(reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
        auto& r = out[i];
        r.text = stops[i].text();
        r.tokens = stops[i].tokens();
        r.n_prompt = (int)prompts[i].size();
        r.n_generated = (int)r.tokens.size();
        r.prefill_s = stats.prefill_s;
        r.decode_s = stats.decode_s;
        r.finish_reason = stops[i].finish_reason();
    }
    if (stats_out) *stats_out = stats;
    return out;
}

runtime::GenerateResult generate_one_with(runtime::Engine& target, const runtime::GenerateRequest& req,
                                          const LoopRun& run, const runtime::TokenCallback& on_text,
                                          SpecStats* stats_out) {
    sample::validate(req.sampling);
    SPECDEC_CHECK(req.max_tokens >= 1, "max tokens must be >= 1, got ", req.max_tokens);
    const std::vector<int32_t> prompt = runtime::tokenize_request(target, req);
    SPECDEC_CHECK(!prompt.empty(), "the prompt is empty after tokenization");
    runtime::StopChecker stop(target.tokenizer(), req);
    bool cancelled = false, stopped = false;
    const SpecStats stats = run({prompt}, {req.max_tokens}, [&](int, int32_t tok, TokenSource) {
        stopped = stop.push(tok);
        if (on_text && !stopped) {
            const std::string piece = stop.take_stable_text();
            if (!piece.empty() && !on_text(piece)) cancelled = true;
        }
        return stopped || cancelled;
    });
    runtime::GenerateResult res;
    res.n_prompt = (int)prompt.size();
    res.text = stop.text();
    res.tokens = stop.tokens();
    res.n_generated = (int)res.tokens.size();
    res.prefill_s = stats.prefill_s;
    res.decode_s = stats.decode_s;
    // Ran out of context before the checker said stop: "length", as in AR.
    res.finish_reason = cancelled ? "cancelled" : (stopped ? stop.finish_reason() : "length");
    if (on_text && !cancelled) {
        const std::string rest = stop.take_remaining();
        if (!rest.empty()) on_text(rest);
    }
    if (stats_out) *stats_out = stats;
    return res;
}

namespace {
// One run of the loop with the proposer cfg asks for (and its trace).
LoopRun speculative_run(const SpecConfig& cfg, runtime::Engine& target, runtime::Engine* draft,
                        const sample::SamplingParams& params, const Prefilled* pre) {
    return [&cfg, &target, draft, params, pre](const std::vector<std::vector<int32_t>>& prompts,
                                               const std::vector<int>& max_new, const OnToken& on_token) {
        ProposerBundle pb = make_proposer(cfg, target, draft, params);
        std::unique_ptr<spec::TraceWriter> trace;
        if (!cfg.trace_path.empty()) {
            trace = std::make_unique<spec::TraceWriter>(cfg.trace_path);
            trace->header(run_header(cfg, target, draft, params));
        }
        TargetContext tc{&target.model(), &target.cache(), &target.pool(), target.options().prefill_chunk};
        SyncScheduler sch(tc, *pb.proposer, params, scheduler_options(cfg), trace.get());
        SpecStats stats;
        stats.auto_costs_from = pb.costs_from;
        stats.auto_calibration_s = pb.calibration_s;
        sch.run(prompts, max_new, on_token, stats, pre);
        return stats;
    };
}
}  // namespace

std::vector<runtime::GenerateResult> generate_speculative_batch(runtime::Engine& target, runtime::Engine* draft,
                                                                const std::vector<runtime::GenerateRequest>& reqs,
                                                                const SpecConfig& cfg, SpecStats* stats_out,
                                                                const Prefilled* pre) {
    SPECDEC_CHECK(!reqs.empty(), "no requests");
    return generate_batch_with(target, reqs, speculative_run(cfg, target, draft, reqs[0].sampling, pre), stats_out);
}

runtime::GenerateResult generate_speculative(runtime::Engine& target, runtime::Engine* draft,
                                             const runtime::GenerateRequest& req, const SpecConfig& cfg,
                                             SpecStats* stats_out, const runtime::TokenCallback& on_text,
                                             const Prefilled* pre) {
    return generate_one_with(target, req, speculative_run(cfg, target, draft, req.sampling, pre), on_text,
                             stats_out);
}

}  // namespace specdec::sched
