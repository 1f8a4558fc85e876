#include "sched/ssd_scheduler.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/clock.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/prefill.h"
#include "sched/ssd_trace.h"
#include "sched/vocab_subset_source.h"
#include "spec/tree_invariants.h"
#include "spec/tree_tensors.h"

namespace specdec::sched {

SsdScheduler::SsdScheduler(const TargetContext& target, const DraftContext& draft,
                           const sample::SamplingParams& params, const SsdConfig& cfg, spec::ExecMode mode,
                           spec::TraceWriter* trace)
    : tgt_(target), draft_(draft), params_(params), cfg_(cfg), mode_(mode), trace_(trace) {
    SPECDEC_CHECK(tgt_.model && tgt_.cache && tgt_.pool, "SSD: target model, cache and pool are required");
    SPECDEC_CHECK(draft_.model && draft_.cache, "SSD: draft model and cache are required");
    cfg_.validate();
}

// The same chunked prefill as Engine::prefill, so the first token matches AR exactly.
const float* SsdScheduler::prefill(int seq, const std::vector<int32_t>& tokens) {
    return model::prefill_chunked(*tgt_.model, *tgt_.cache, *tgt_.pool, seq, tokens, tgt_.prefill_chunk, batch_,
                                  result_);
}

void SsdScheduler::run(const std::vector<std::vector<int32_t>>& prompts, const std::vector<int>& max_new,
                       const OnToken& on_token, SsdStats& stats, const Prefilled* pre) {
    kv::KvCache& cache = *tgt_.cache;
    const int B = (int)prompts.size();
    const int n_vocab = tgt_.model->config().n_vocab;
    SPECDEC_CHECK(B >= 1 && B <= cache.n_seq() && B <= draft_.cache->n_seq(), "SSD: batch of ", B,
                  " sequences, the caches hold ", cache.n_seq(), " and ", draft_.cache->n_seq());
    SPECDEC_CHECK(draft_.cache->n_ctx() >= cache.n_ctx(), "SSD: the draft context (", draft_.cache->n_ctx(),
                  ") must be at least the target's (", cache.n_ctx(), ")");
    SPECDEC_CHECK((int)max_new.size() == B, "SSD: one max_new per sequence");
    Rng rng(params_.seed);
    std::vector<std::vector<int32_t>> hist(B);
    std::vector<int> generated(B, 0);
    std::vector<uint8_t> done(B, 0);
    std::vector<float> scratch;

    DraftWorkerOptions wo;
    wo.cfg = cfg_;
    wo.params = params_;
    wo.target_n_vocab = n_vocab;
    wo.subset = draft_.subset;
    DraftWorker worker(draft_, wo);  // joined on every exit path
    {
        ToDraft m;
        m.kind = ToDraft::Kind::Begin;
        for (int i = 0; i < B; ++i) m.begins.push_back({i, prompts[i], pre && pre->draft_ready});
        worker.send(std::move(m));  // the draft prefills while the target does
    }
    // The next outcome message; returns whether a reply is due.
    auto outcome = [&](int i, int accepted, int32_t bonus, ToDraft& m) {
        DraftOutcome o;
        o.seq = i;
        o.accepted = accepted;
        o.bonus = bonus;
        const int room = cache.n_ctx() - cache.committed(i);
        if (!done[i] && room < 1) done[i] = 1;  // same end as AR: no slot left for the last token
        o.done = done[i];
        // A speculation of L drafts is a tree of L + 1 nodes emitting up to L + 1 tokens.
        o.max_drafts = std::max(0, std::min(room, max_new[i] - generated[i]) - 1);
        m.outcomes.push_back(o);
        return !o.done;
    };

    const double t_prefill = now_s();
    ToDraft msg;
    bool expecting = false;
    for (int i = 0; i < B; ++i) {
        const float* logits = pre ? pre->logits.at(i) : nullptr;
        if (logits) {
            SPECDEC_CHECK(cache.committed(i) >= (int)prompts[i].size(), "SSD: sequence ", i,
                          " does not hold its prefilled prompt");
            cache.truncate(i, (int)prompts[i].size());
        } else {
            cache.clear(i);
            logits = prefill(i, prompts[i]);
        }
        hist[i] = prompts[i];
        const int32_t tok = sample::sample_token(logits, n_vocab, hist[i], params_, rng, scratch);
        hist[i].push_back(tok);
        ++generated[i];
        if (on_token(i, tok, TokenSource::Target) || generated[i] >= max_new[i]) done[i] = 1;
        expecting |= outcome(i, 0, tok, msg);
    }
    const double t_decode = now_s();
    stats.spec.prefill_s += t_decode - t_prefill;

    spec::DraftTree tree;
    spec::TreeTensors tt;
    std::vector<spec::TreeTensors> tensors;
    std::vector<int> row_base;
    std::vector<spec::DraftTree> trees;
    spec::VerifyResult vr;
    // Round traces: a round's line waits for the next reply, which carries
    // the time of the cache build that overlapped that round's verification.
    std::vector<int> seq_round(B, 0), last_k(B, -1);
    std::vector<SsdRoundRecord> pending, recs;
    auto flush_pending = [&](double build_s, bool interrupted) {
        for (SsdRoundRecord& rec : pending) {
            rec.build_s = build_s;
            rec.build_interrupted = interrupted;
            trace_->line(ssd_round_json(rec));
        }
        pending.clear();
    };
    while (expecting) {
        msg.batch_size = (int)std::count(done.begin(), done.end(), 0);
        worker.send(std::move(msg));
        msg = ToDraft{};
        double t = now_s();
        FromDraft r = worker.receive();
        const double stall = now_s() - t;
        stats.stall_s += stall;
        stats.spec.draft_s += stall;
        if (!r.error.empty()) throw Error(r.error);
        stats.draft = r.stats;
        if (trace_) flush_pending(r.build_s, r.build_interrupted);
        recs.assign(r.specs.size(), SsdRoundRecord{});

        // One target forward over every sequence's speculation (a chain).
        t = now_s();
        const size_t n = r.specs.size();
        trees.resize(n);
        tensors.resize(n);
        row_base.assign(n, 0);
        batch_.clear();
        for (size_t s = 0; s < n; ++s) {
            const Speculation& sp = r.specs[s];
            const int i = sp.seq;
            SPECDEC_CHECK(i >= 0 && i < B && !done[i] && sp.root == hist[i].back(),
                          "SSD: the draft answered for the wrong sequence or root");
            spec::DraftTree& tr = trees[s];
            tr.reset(sp.root);
            tr.kind = sp.kind;
            const bool with_q = sp.kind == spec::DraftKind::Sampled && !params_.greedy();
            if (with_q) {
                SPECDEC_CHECK(sp.n_vocab == n_vocab && sp.q.size() == sp.tokens.size() * (size_t)n_vocab,
                              "SSD: sampled speculation without its proposal distributions");
                tr.n_vocab = n_vocab;
                tr.q_pool = sp.q;
            } else {
                tr.kind = spec::DraftKind::Deterministic;
            }
            for (size_t j = 0; j < sp.tokens.size(); ++j)
                tr.add(sp.tokens[j], (int32_t)j, 0.0f, with_q ? (int32_t)j : -1);
            spec::build_tree_tensors(tr, cache.committed(i), mode_, tensors[s]);
            spec::TreeLimits lim;
            lim.n_vocab = n_vocab;
            lim.budget = cfg_.k + 1;
            lim.max_depth = cfg_.k;
            lim.distinct_siblings = false;
            spec::require_valid_tree(tensors[s], lim, mode_);
            row_base[s] = spec::append_tree_rows(tensors[s], i, batch_);
            stats.spec.drafted += tr.size() - 1;
            SsdRoundRecord& rec = recs[s];
            rec.seq = i;
            rec.round = seq_round[i]++;
            rec.batch_round = stats.spec.rounds;
            rec.prefix_len = cache.committed(i);
            rec.root = sp.root;
            rec.drafts = sp.tokens;
            rec.lookup = rec.round > 0;
            rec.lookup_k = rec.lookup ? std::min(last_k[i], cfg_.k) : -1;
            rec.hit = sp.hit;
            rec.backup = sp.backup;
            rec.fanout = r.stats.fanout;
            rec.backup_s = r.backup_s;
            rec.stall_s = stall;
        }
        const double tree_s = now_s() - t;
        stats.spec.tree_s += tree_s;
        t = now_s();
        tgt_.model->forward(batch_, cache, *tgt_.pool, result_);
        ++stats.spec.rounds;
        stats.spec.seq_rounds += (int)n;
        for (size_t s = 0; s < n; ++s) {
            const int i = r.specs[s].seq;
            const std::span<const int32_t> before_root(hist[i].data(), hist[i].size() - 1);
            verifier_.verify(trees[s], result_.row_logits(row_base[s]), n_vocab, before_root, params_, rng, vr);
            if (mode_ == spec::ExecMode::Reference) {
                const spec::TreeViolation v = spec::check_accepted_path(tensors[s], vr.path);
                SPECDEC_CHECK(v.ok(), v.message());
            }
            cache.commit_path(i, vr.path);
            stats.spec.accepted += vr.n_accepted();
            stats.spec.count_accepted(vr.n_accepted());
            stats.spec.emitted += (int)vr.emitted.size();
            recs[s].accepted = vr.n_accepted();
            recs[s].bonus = vr.emitted.back();
            last_k[i] = vr.n_accepted();
            for (size_t j = 0; j < vr.emitted.size(); ++j) {
                const int32_t tok = vr.emitted[j];
                recs[s].emitted.push_back(tok);
                hist[i].push_back(tok);
                ++generated[i];
                if (on_token(i, tok, vr.source(j)) || generated[i] >= max_new[i]) {
                    done[i] = 1;
                    break;
                }
            }
            expecting |= outcome(i, vr.n_accepted(), vr.emitted.back(), msg);
        }
        const double verify_s = now_s() - t;
        stats.spec.verify_s += verify_s;
        msg.verify_s = verify_s;
        for (SsdRoundRecord& rec : recs) {
            rec.tree_s = tree_s;
            rec.verify_s = verify_s;
        }
        if (trace_) pending = std::move(recs);
        expecting = std::any_of(msg.outcomes.begin(), msg.outcomes.end(), [](auto& o) { return !o.done; });
    }
    if (!msg.outcomes.empty()) worker.send(std::move(msg));  // tells the draft which sequences ended
    if (trace_) flush_pending(-1, false);  // the last build was never reported
    stats.spec.decode_s += now_s() - t_decode;
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
                                              const runtime::Engine& target, runtime::Engine& draft,
                                              const TargetContext& tc) {
    if (cfg.trace_path.empty()) return nullptr;
    auto t = std::make_unique<spec::TraceWriter>(cfg.trace_path);
    t->header(ssd_run_header(cfg, p, target, draft, tc.pool->size()));
    return t;
}
}  // namespace

std::vector<runtime::GenerateResult> generate_ssd_batch(runtime::Engine& target, runtime::Engine& draft,
                                                        const std::vector<runtime::GenerateRequest>& reqs,
                                                        const SsdConfig& cfg, SsdStats* stats_out,
                                                        const Prefilled* pre) {
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
    std::unique_ptr<ThreadPool> own_pool;
    const TargetContext tc = target_context(target, cfg, own_pool);
    const auto subset = load_vocab_subset(cfg.vocab_subset_n, cfg.vocab_subset_path, cfg.vocab_corpus_path, target);
    const auto trace = open_trace(cfg, params, target, draft, tc);
    SsdScheduler sch(tc, draft_context(draft, subset.get()), params, cfg, spec::ExecMode::Performance, trace.get());
    SsdStats stats;
    sch.run(prompts, max_new, [&](int i, int32_t tok, TokenSource) { return stops[i].push(tok); }, stats, pre);
    std::vector<runtime::GenerateResult> out(reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
        auto& r = out[i];
        r.text = stops[i].text();
        r.tokens = stops[i].tokens();
        r.n_prompt = (int)prompts[i].size();
        r.n_generated = (int)r.tokens.size();
        r.prefill_s = stats.spec.prefill_s;
        r.decode_s = stats.spec.decode_s;
        r.finish_reason = stops[i].finish_reason();
    }
    if (stats_out) *stats_out = stats;
    return out;
}

runtime::GenerateResult generate_ssd(runtime::Engine& target, runtime::Engine& draft,
                                     const runtime::GenerateRequest& req, const SsdConfig& cfg, SsdStats* stats_out,
                                     const runtime::TokenCallback& on_text, const Prefilled* pre) {
    sample::validate(req.sampling);
    SPECDEC_CHECK(req.max_tokens >= 1, "max tokens must be >= 1, got ", req.max_tokens);
    const std::vector<int32_t> prompt = runtime::tokenize_request(target, req);
    SPECDEC_CHECK(!prompt.empty(), "the prompt is empty after tokenization");
    std::unique_ptr<ThreadPool> own_pool;
    const TargetContext tc = target_context(target, cfg, own_pool);
    const auto subset = load_vocab_subset(cfg.vocab_subset_n, cfg.vocab_subset_path, cfg.vocab_corpus_path, target);
    const auto trace = open_trace(cfg, req.sampling, target, draft, tc);
    SsdScheduler sch(tc, draft_context(draft, subset.get()), req.sampling, cfg, spec::ExecMode::Performance, trace.get());
    runtime::StopChecker stop(target.tokenizer(), req);
    bool cancelled = false, stopped = false;
    SsdStats stats;
    sch.run({prompt}, {req.max_tokens},
            [&](int, int32_t tok, TokenSource) {
                stopped = stop.push(tok);
                if (on_text && !stopped) {
                    const std::string piece = stop.take_stable_text();
                    if (!piece.empty() && !on_text(piece)) cancelled = true;
                }
                return stopped || cancelled;
            },
            stats, pre);
    runtime::GenerateResult res;
    res.n_prompt = (int)prompt.size();
    res.text = stop.text();
    res.tokens = stop.tokens();
    res.n_generated = (int)res.tokens.size();
    res.prefill_s = stats.spec.prefill_s;
    res.decode_s = stats.spec.decode_s;
    res.finish_reason = cancelled ? "cancelled" : (stopped ? stop.finish_reason() : "length");
    if (on_text && !cancelled) {
        const std::string rest = stop.take_remaining();
        if (!rest.empty()) on_text(rest);
    }
    if (stats_out) *stats_out = stats;
    return res;
}

}  // namespace specdec::sched
