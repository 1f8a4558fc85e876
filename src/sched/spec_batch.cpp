#include "sched/spec_batch.h"

#include <algorithm>
#include <chrono>

#include "core/clock.h"
#include "core/error.h"
#include "model/prefill.h"
#include "spec/tree_invariants.h"

namespace specdec::sched {

SpecBatch::SpecBatch(const TargetContext& target, spec::ExecMode mode, spec::TraceWriter* trace, Rng* shared_rng)
    : tgt_(target), mode_(mode), trace_(trace), shared_rng_(shared_rng) {
    SPECDEC_CHECK(tgt_.model && tgt_.cache && tgt_.pool, "scheduler: target model, cache and pool are required");
    slots_.resize(tgt_.cache->n_seq());
}

bool SpecBatch::any_running() const {
    for (const Slot& s : slots_)
        if (s.used && !s.done) return true;
    return false;
}

bool SpecBatch::emit(int slot, int32_t tok, TokenSource source, const OnToken& on_token) {
    Slot& s = slots_[slot];
    s.hist.push_back(tok);
    ++s.generated;
    if (on_token(slot, tok, source) || s.generated >= s.max_new) finish(slot);
    return s.done;
}

void SpecBatch::finish(int slot) {
    Slot& s = slots_[slot];
    if (s.done) return;
    s.done = true;
    s.spec.proposer->end(slot);
}

void SpecBatch::add_capture(std::span<const int> layers) {
    for (int l : layers) {
        const int out_of = l - 1;  // the input of layer l is the output of layer l - 1
        auto& cap = batch_.capture_layers;
        if (std::find(cap.begin(), cap.end(), out_of) == cap.end()) cap.push_back(out_of);
    }
}

void SpecBatch::deliver_features(spec::Proposer* p, int seq, int pos0, std::span<const int> rows) {
    feat_layers_.clear();
    for (int l : p->feature_layers()) {
        const auto& cap = batch_.capture_layers;
        const size_t k = (size_t)(std::find(cap.begin(), cap.end(), l - 1) - cap.begin());
        SPECDEC_CHECK(k < result_.hidden.size(), "scheduler: target layer ", l, " was not captured");
        feat_layers_.push_back(&result_.hidden[k]);
    }
    p->observe_features({seq, pos0, rows, feat_layers_, tgt_.model->config().n_embd});
}

int32_t SpecBatch::admit(int slot, const std::vector<int32_t>& prompt, const SlotSpec& spec,
                         const sample::SamplingParams& params, int max_new, const OnToken& on_token,
                         const float* prefilled_logits, bool draft_ready) {
    SPECDEC_CHECK(slot >= 0 && slot < (int)slots_.size(), "slot ", slot, " outside the cache's ", slots_.size(),
                  " sequences");
    SPECDEC_CHECK(!slots_[slot].used, "slot ", slot, " is in use (retire it first)");
    SPECDEC_CHECK(spec.proposer, "slot ", slot, ": no proposer");
    SPECDEC_CHECK(max_new >= 1, "max new tokens must be >= 1, got ", max_new);
    SPECDEC_CHECK(!prompt.empty(), "the prompt is empty");
    const double t0 = now_s();
    Slot& s = slots_[slot];
    s = Slot{};
    s.used = true;
    s.spec = spec;
    s.params = params;
    s.max_new = max_new;
    s.rng.reseed(params.seed);
    const float* logits = prefilled_logits;
    if (logits) {
        SPECDEC_CHECK(tgt_.cache->committed(slot) >= (int)prompt.size(), "slot ", slot, ": the cache holds ",
                      tgt_.cache->committed(slot), " tokens, not the ", prompt.size(), "-token prefilled prompt");
        tgt_.cache->truncate(slot, (int)prompt.size());
    } else {
        tgt_.cache->clear(slot);
    }
    if (draft_ready) spec.proposer->begin_with_prefix(slot, prompt);
    else spec.proposer->begin_with_prompt(slot, prompt);
    // A proposer that reads target features gets the prompt's from the
    // prefill itself; a shared prefill (made without them) cannot serve it.
    const bool features = !spec.proposer->feature_layers().empty();
    SPECDEC_CHECK(!features || !logits, "slot ", slot, ": an EAGLE-3 head needs the prompt's target features, ",
                  "which a shared prefill does not keep");
    batch_.capture_layers.clear();
    if (features) add_capture(spec.proposer->feature_layers());
    model::PrefillChunkFn on_chunk;
    if (features)
        on_chunk = [&](int pos0, int n, const model::ForwardResult&) {
            feat_rows_.resize((size_t)n);
            for (int j = 0; j < n; ++j) feat_rows_[(size_t)j] = j;
            deliver_features(spec.proposer, slot, pos0, feat_rows_);
        };
    // The same chunked prefill as Engine::prefill, so the first token matches AR exactly.
    if (!logits)
        logits = model::prefill_chunked(*tgt_.model, *tgt_.cache, *tgt_.pool, slot, prompt, tgt_.prefill_chunk,
                                        batch_, result_, on_chunk);
    batch_.capture_layers.clear();
    s.hist = prompt;
    const int32_t tok =
        sample::sample_token(logits, tgt_.model->config().n_vocab, s.hist, s.params, rng_of(s), scratch_);
    // The draft reads the prompt now (prefill phase), not in round 0.
    if (!emit(slot, tok, TokenSource::Target, on_token)) spec.proposer->prefill(slot, s.hist);
    stats_.prefill_s += now_s() - t0;
    return tok;
}

void SpecBatch::retire(int slot) {
    SPECDEC_CHECK(slot >= 0 && slot < (int)slots_.size() && slots_[slot].used, "slot ", slot, " is not admitted");
    Slot& s = slots_[slot];
    tgt_.cache->clear(slot);
    s.spec.proposer->begin(slot);  // drops the draft's state and draft cache sequence
    s = Slot{};
}

StepReport SpecBatch::step(const OnToken& on_token) {
    StepReport rep;
    kv::KvCache& cache = *tgt_.cache;
    const int n_vocab = tgt_.model->config().n_vocab;
    const double t_step = now_s();

    // Running slots, grouped by proposer (first appearance order, then slot
    // order), so that each proposer drafts for all of its slots in one call.
    order_.clear();
    for (int i = 0; i < (int)slots_.size(); ++i) {
        Slot& s = slots_[i];
        if (!s.used || s.done) continue;
        if (cache.n_ctx() - cache.committed(i) < 1) {  // same end as AR: no slot left for the last token
            finish(i);
            continue;
        }
        order_.push_back(i);
    }
    if (order_.empty()) return rep;
    {
        std::vector<spec::Proposer*> seen;
        std::vector<int> group(slots_.size(), 0);
        for (int i : order_) {
            auto it = std::find(seen.begin(), seen.end(), slots_[i].spec.proposer);
            group[i] = (int)(it - seen.begin());
            if (it == seen.end()) seen.push_back(slots_[i].spec.proposer);
        }
        std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) { return group[a] < group[b]; });
    }
    inputs_.clear();
    for (int i : order_) {
        Slot& s = slots_[i];
        const int room = cache.n_ctx() - cache.committed(i);
        // A tree of T nodes emits at most T tokens: no point drafting past the
        // end. Nor past the slot's tree budget (its invariant check).
        int cap = std::min(room, s.max_new - s.generated);
        if (s.spec.tree_budget > 0) cap = std::min(cap, s.spec.tree_budget);
        inputs_.push_back({i, s.hist, cap});
    }
    const size_t n = order_.size();
    trees_.resize(n);

    spec::RoundTimes times;
    double t = now_s();
    for_each_proposer_run(n, [&](spec::Proposer* p, size_t a, size_t b) {
        Rng& rng = shared_rng_ ? *shared_rng_ : draft_rng_;
        p->propose(std::span(inputs_).subspan(a, b - a), std::span(trees_).subspan(a, b - a), rng);
    });
    double t2 = now_s();
    times.draft_s = t2 - t;
    t = t2;

    batch_.clear();
    batch_.capture_layers.clear();  // costs nothing unless a proposer reads target features
    for (int i : order_) add_capture(slots_[i].spec.proposer->feature_layers());
    rep.slots.resize(n);
    for (size_t k = 0; k < n; ++k) {
        const int i = order_[k];
        Slot& s = slots_[i];
        spec::TreeTensors& tt = s.tensors;
        spec::build_tree_tensors(trees_[k], cache.committed(i), mode_, tt);
        spec::TreeLimits lim;
        lim.n_vocab = n_vocab;
        lim.budget = s.spec.tree_budget > 0 ? std::min(s.spec.tree_budget, inputs_[k].max_nodes) : inputs_[k].max_nodes;
        lim.max_depth = s.spec.tree_depth;
        lim.distinct_siblings = s.spec.distinct_siblings && trees_[k].kind == spec::DraftKind::Deterministic;
        spec::require_valid_tree(tt, lim, mode_);
        s.row_base = spec::append_tree_rows(tt, i, batch_);
        stats_.drafted += tt.n - 1;
        rep.slots[k].slot = i;
        rep.slots[k].drafted = tt.n - 1;
        rep.forward_rows += tt.n;
    }
    t2 = now_s();
    times.tree_s = t2 - t;
    t = t2;

    tgt_.model->forward(batch_, cache, *tgt_.pool, result_);
    ++stats_.rounds;
    stats_.seq_rounds += (int)n;
    rep.rows = (int)n;
    const double verify_s = now_s() - t;  // the forward is shared by the batch

    for (size_t k = 0; k < n; ++k) {
        const int i = order_[k];
        Slot& s = slots_[i];
        const double tv = now_s();
        // Every row asked for logits, so result row == batch row.
        const std::span<const int32_t> before_root(s.hist.data(), s.hist.size() - 1);
        verifier_.verify(trees_[k], result_.row_logits(s.row_base), n_vocab, before_root, s.params, rng_of(s), vr_);
        if (mode_ == spec::ExecMode::Reference) {
            const spec::TreeViolation v = spec::check_accepted_path(s.tensors, vr_.path);
            SPECDEC_CHECK(v.ok(), v.message());
        }
        const double tc = now_s();
        times.verify_s = verify_s + (tc - tv);
        const int committed_before = cache.committed(i);
        cache.commit_path(i, vr_.path);
        if (!s.spec.proposer->feature_layers().empty()) {
            // The accepted path's rows only: the features of what was committed.
            feat_rows_.resize(vr_.path.size());
            for (size_t j = 0; j < vr_.path.size(); ++j) feat_rows_[j] = s.row_base + vr_.path[j];
            deliver_features(s.spec.proposer, i, committed_before, feat_rows_);
        }
        stats_.accepted += vr_.n_accepted();
        stats_.count_accepted(vr_.n_accepted());
        stats_.emitted += (int)vr_.emitted.size();
        rep.slots[k].accepted = vr_.n_accepted();
        rep.slots[k].last_node = vr_.path.back();
        if (trees_[k].from_lookup) {
            rep.slots[k].lookup = true;
            ++stats_.lookup_rounds;
            stats_.lookup_drafted += rep.slots[k].drafted;
            stats_.lookup_accepted += vr_.n_accepted();
        }
        for (size_t j = 0; j < vr_.emitted.size(); ++j) {
            ++rep.slots[k].emitted;
            if (emit(i, vr_.emitted[j], vr_.source(j), on_token)) break;
        }
        times.commit_s = now_s() - tc;
        stats_.verify_s += times.verify_s - (k > 0 ? verify_s : 0.0);
        stats_.commit_s += times.commit_s;
        times.predicted_s = s.spec.proposer->last_predicted_s();
        if (trace_)
            trace_->round(i, round_, s.tensors, vr_, times, spec::draft_source(trees_[k]),
                          mode_ == spec::ExecMode::Reference);
    }
    // Each proposer learns from its own sequences' outcomes (same grouping as
    // the propose calls above) and the shared forward's time.
    outcomes_.resize(n);
    for (size_t k = 0; k < n; ++k) {
        const SlotRound& r = rep.slots[k];
        const std::vector<int32_t>& h = slots_[r.slot].hist;  // ends with this round's tokens
        outcomes_[k] = {r.slot, r.drafted, r.accepted, r.last_node,
                        std::span<const int32_t>(h.data() + h.size() - r.emitted, (size_t)r.emitted)};
    }
    for_each_proposer_run(n, [&](spec::Proposer* p, size_t a, size_t b) {
        p->observe({std::span(outcomes_).subspan(a, b - a), rep.forward_rows, verify_s, times.tree_s});
    });
    stats_.draft_s += times.draft_s;
    stats_.tree_s += times.tree_s;
    ++round_;
    const double t_end = now_s();
    rep.draft_s = times.draft_s;
    rep.verify_s = t_end - t_step - times.draft_s;
    stats_.decode_s += t_end - t_step;
    return rep;
}

}  // namespace specdec::sched
