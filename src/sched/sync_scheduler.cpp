#include "sched/sync_scheduler.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "model/prefill.h"
#include "spec/draft_model_proposer.h"
#include "spec/ngram_proposer.h"
#include "spec/tree_invariants.h"

namespace specdec::sched {

namespace {
double now_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace

SyncScheduler::SyncScheduler(const TargetContext& target, spec::Proposer& proposer,
                             const sample::SamplingParams& params, const SchedulerOptions& opts,
                             spec::TraceWriter* trace)
    : tgt_(target), proposer_(proposer), params_(params), opts_(opts), trace_(trace) {
    SPECDEC_CHECK(tgt_.model && tgt_.cache && tgt_.pool, "scheduler: target model, cache and pool are required");
}

// The same chunked prefill as Engine::prefill, so the first token matches AR exactly.
const float* SyncScheduler::prefill(int seq, const std::vector<int32_t>& tokens) {
    return model::prefill_chunked(*tgt_.model, *tgt_.cache, *tgt_.pool, seq, tokens, tgt_.prefill_chunk, batch_,
                                  result_);
}

void SyncScheduler::run(const std::vector<std::vector<int32_t>>& prompts, const std::vector<int>& max_new,
                        const OnToken& on_token, SpecStats& stats) {
    kv::KvCache& cache = *tgt_.cache;
    const int B = (int)prompts.size();
    const int n_vocab = tgt_.model->config().n_vocab;
    SPECDEC_CHECK(B >= 1 && B <= cache.n_seq(), "batch of ", B, " sequences, the cache holds ", cache.n_seq());
    SPECDEC_CHECK((int)max_new.size() == B, "scheduler: one max_new per sequence");
    Rng rng(params_.seed);
    std::vector<std::vector<int32_t>> hist(B);
    std::vector<int> generated(B, 0);
    std::vector<uint8_t> done(B, 0);
    std::vector<float> scratch;

    const double t_prefill = now_s();
    for (int i = 0; i < B; ++i) {
        cache.clear(i);
        proposer_.begin(i);
        const float* logits = prefill(i, prompts[i]);
        hist[i] = prompts[i];
        const int32_t tok = sample::sample_token(logits, n_vocab, hist[i], params_, rng, scratch);
        hist[i].push_back(tok);
        ++generated[i];
        if (on_token(i, tok) || generated[i] >= max_new[i]) done[i] = 1;
        if (!done[i]) proposer_.prefill(i, hist[i]);  // the draft reads the prompt now, not in round 0
    }
    const double t_decode = now_s();
    stats.prefill_s += t_decode - t_prefill;

    const spec::ExecMode mode = opts_.mode;
    std::vector<spec::ProposeInput> inputs;
    std::vector<int> active;
    std::vector<spec::DraftTree> trees;
    std::vector<spec::TreeTensors> tensors(B);
    std::vector<int> row_base(B, 0);
    spec::VerifyResult vr;
    for (int round = 0;; ++round) {
        active.clear();
        inputs.clear();
        for (int i = 0; i < B; ++i) {
            if (done[i]) continue;
            const int room = cache.n_ctx() - cache.committed(i);
            if (room < 1) {  // same end as AR: no slot left for the last token
                done[i] = 1;
                continue;
            }
            active.push_back(i);
            // A tree of T nodes emits at most T tokens: no point drafting past the end.
            inputs.push_back({i, hist[i], std::min(room, max_new[i] - generated[i])});
        }
        if (active.empty()) break;
        spec::RoundTimes times;
        double t = now_s();
        trees.resize(active.size());
        proposer_.propose(inputs, trees, rng);
        double t2 = now_s();
        times.draft_s = t2 - t;
        t = t2;

        batch_.clear();
        for (size_t k = 0; k < active.size(); ++k) {
            const int i = active[k];
            spec::TreeTensors& tt = tensors[i];
            spec::build_tree_tensors(trees[k], cache.committed(i), mode, tt);
            spec::TreeLimits lim;
            lim.n_vocab = n_vocab;
            lim.budget = opts_.tree_budget > 0 ? std::min(opts_.tree_budget, inputs[k].max_nodes) : inputs[k].max_nodes;
            lim.max_depth = opts_.tree_depth;
            lim.distinct_siblings = opts_.distinct_siblings && trees[k].kind == spec::DraftKind::Deterministic;
            spec::require_valid_tree(tt, lim, mode);
            row_base[i] = spec::append_tree_rows(tt, i, batch_);
            stats.drafted += tt.n - 1;
        }
        t2 = now_s();
        times.tree_s = t2 - t;
        t = t2;

        tgt_.model->forward(batch_, cache, *tgt_.pool, result_);
        ++stats.rounds;
        stats.seq_rounds += (int)active.size();
        double verify_s = now_s() - t;  // the forward is shared by the batch

        for (size_t k = 0; k < active.size(); ++k) {
            const int i = active[k];
            double tv = now_s();
            // Every row asked for logits, so result row == batch row.
            const std::span<const int32_t> before_root(hist[i].data(), hist[i].size() - 1);
            verifier_.verify(trees[k], result_.row_logits(row_base[i]), n_vocab, before_root, params_, rng, vr);
            if (mode == spec::ExecMode::Reference) {
                const spec::TreeViolation v = spec::check_accepted_path(tensors[i], vr.path);
                SPECDEC_CHECK(v.ok(), v.message());
            }
            double tc = now_s();
            times.verify_s = verify_s + (tc - tv);
            cache.commit_path(i, vr.path);
            stats.accepted += vr.n_accepted();
            stats.emitted += (int)vr.emitted.size();
            for (int32_t tok : vr.emitted) {
                hist[i].push_back(tok);
                ++generated[i];
                if (on_token(i, tok) || generated[i] >= max_new[i]) {
                    done[i] = 1;
                    break;
                }
            }
            times.commit_s = now_s() - tc;
            stats.verify_s += times.verify_s - (k > 0 ? verify_s : 0.0);
            stats.commit_s += times.commit_s;
            if (trace_) trace_->round(i, round, tensors[i], vr, times, mode == spec::ExecMode::Reference);
        }
        stats.draft_s += times.draft_s;
        stats.tree_s += times.tree_s;
    }
    stats.decode_s += now_s() - t_decode;
}

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
        case Method::Chain:
        case Method::Tree:
            break;
    }
    SPECDEC_CHECK(draft, "method ", method_name(cfg.method), " needs a draft model (-d DRAFT)");
    const int tv = target.config().n_vocab;
    if (cfg.vocab_subset_n > 0) {
        SPECDEC_CHECK(!cfg.vocab_subset_path.empty(), "a vocabulary subset needs a cache file path");
        if (std::filesystem::exists(cfg.vocab_subset_path)) {
            b.subset = std::make_unique<spec::VocabSubset>(spec::VocabSubset::load(cfg.vocab_subset_path, tv));
            SPECDEC_CHECK(b.subset->size() == cfg.vocab_subset_n, cfg.vocab_subset_path, " holds ",
                          b.subset->size(), " tokens, asked for ", cfg.vocab_subset_n, " (delete it to rebuild)");
        } else {
            SPECDEC_CHECK(!cfg.vocab_corpus_path.empty(), "building a vocabulary subset needs a corpus file");
            std::ifstream in(cfg.vocab_corpus_path);
            SPECDEC_CHECK(in.good(), "cannot read corpus ", cfg.vocab_corpus_path);
            std::vector<std::vector<int32_t>> docs;
            std::string line;
            // Any JSON line: every string in it is text to count (prompt-set JSONL).
            std::function<void(const nlohmann::json&)> collect = [&](const nlohmann::json& j) {
                if (j.is_string()) docs.push_back(target.tokenizer().encode(j.get<std::string>(), false, false));
                else if (j.is_array() || j.is_object())
                    for (const auto& v : j) collect(v);
            };
            while (std::getline(in, line)) {
                if (line.empty()) continue;
                const auto j = nlohmann::json::parse(line, nullptr, false);
                if (j.is_discarded()) docs.push_back(target.tokenizer().encode(line, false, false));
                else collect(j);
            }
            b.subset = std::make_unique<spec::VocabSubset>(spec::VocabSubset::from_corpus(docs, tv, cfg.vocab_subset_n));
            b.subset->save(cfg.vocab_subset_path);
        }
    }
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
    b.proposer = std::make_unique<spec::DraftModelProposer>(draft->model(), draft->cache(), target.pool(), o);
    return b;
}

namespace {
SchedulerOptions scheduler_options(const SpecConfig& cfg) {
    SchedulerOptions s;
    s.mode = cfg.mode;
    switch (cfg.method) {
        case Method::AR: s.tree_budget = 1; break;
        case Method::Chain:
        case Method::NGram: s.tree_budget = cfg.draft_k + 1; s.tree_depth = cfg.draft_k; break;
        case Method::Tree: s.tree_budget = cfg.tree_budget; s.tree_depth = cfg.tree_depth; break;
    }
    s.distinct_siblings = true;  // checked for deterministic trees only
    return s;
}

nlohmann::json run_header(const SpecConfig& cfg, const runtime::Engine& target, const runtime::Engine* draft,
                          const sample::SamplingParams& p) {
    nlohmann::json h;
    h["seed"] = p.seed;
    h["temperature"] = p.temperature;
    h["top_k"] = p.top_k;
    h["top_p"] = p.top_p;
    h["min_p"] = p.min_p;
    h["repeat_penalty"] = p.repeat_penalty;
    h["method"] = method_name(cfg.method);
    h["mode"] = mode_name(cfg.mode);
    h["draft_k"] = cfg.draft_k;
    h["tree_topk"] = cfg.tree_topk;
    h["tree_depth"] = cfg.tree_depth;
    h["tree_budget"] = cfg.tree_budget;
    h["tree_width"] = cfg.tree_width;
    h["chain_min_prob"] = cfg.chain_min_prob;
    h["tree_sampled"] = cfg.tree_sampled;
    h["draft_window"] = cfg.draft_window;
    h["vocab_subset_n"] = cfg.vocab_subset_n;
    h["target_model"] = target.options().model_path;
    h["target_hash"] = spec::file_hash(target.options().model_path);
    if (draft) {
        h["draft_model"] = draft->options().model_path;
        h["draft_hash"] = spec::file_hash(draft->options().model_path);
    }
    return h;
}
}  // namespace

std::vector<runtime::GenerateResult> generate_speculative_batch(runtime::Engine& target, runtime::Engine* draft,
                                                                const std::vector<runtime::GenerateRequest>& reqs,
                                                                const SpecConfig& cfg, SpecStats* stats_out) {
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
    ProposerBundle pb = make_proposer(cfg, target, draft, params);
    std::unique_ptr<spec::TraceWriter> trace;
    if (!cfg.trace_path.empty()) {
        trace = std::make_unique<spec::TraceWriter>(cfg.trace_path);
        trace->header(run_header(cfg, target, draft, params));
    }
    TargetContext tc{&target.model(), &target.cache(), &target.pool(), target.options().prefill_chunk};
    SyncScheduler sch(tc, *pb.proposer, params, scheduler_options(cfg), trace.get());
    SpecStats stats;
    sch.run(prompts, max_new, [&](int i, int32_t tok) { return stops[i].push(tok); }, stats);
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

runtime::GenerateResult generate_speculative(runtime::Engine& target, runtime::Engine* draft,
                                             const runtime::GenerateRequest& req, const SpecConfig& cfg,
                                             SpecStats* stats_out, const runtime::TokenCallback& on_text) {
    sample::validate(req.sampling);
    SPECDEC_CHECK(req.max_tokens >= 1, "max tokens must be >= 1, got ", req.max_tokens);
    const std::vector<int32_t> prompt = runtime::tokenize_request(target, req);
    SPECDEC_CHECK(!prompt.empty(), "the prompt is empty after tokenization");
    ProposerBundle pb = make_proposer(cfg, target, draft, req.sampling);
    std::unique_ptr<spec::TraceWriter> trace;
    if (!cfg.trace_path.empty()) {
        trace = std::make_unique<spec::TraceWriter>(cfg.trace_path);
        trace->header(run_header(cfg, target, draft, req.sampling));
    }
    TargetContext tc{&target.model(), &target.cache(), &target.pool(), target.options().prefill_chunk};
    SyncScheduler sch(tc, *pb.proposer, req.sampling, scheduler_options(cfg), trace.get());
    runtime::StopChecker stop(target.tokenizer(), req);
    bool cancelled = false, stopped = false;
    SpecStats stats;
    sch.run({prompt}, {req.max_tokens},
            [&](int, int32_t tok) {
                stopped = stop.push(tok);
                if (on_text && !stopped) {
                    const std::string piece = stop.take_stable_text();
                    if (!piece.empty() && !on_text(piece)) cancelled = true;
                }
                return stopped || cancelled;
            },
            stats);
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

}  // namespace specdec::sched
