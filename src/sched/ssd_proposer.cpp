#include "sched/ssd_proposer.h"

#include <algorithm>

#include "core/clock.h"
#include "core/error.h"

namespace specdec::sched {

SsdProposer::SsdProposer(const DraftContext& draft, const DraftWorkerOptions& opts, spec::TraceWriter* trace)
    : opts_(opts), trace_(trace) {
    SPECDEC_CHECK(draft.model && draft.cache, "SSD: the draft model and cache are required");
    seqs_.resize((size_t)draft.cache->n_seq());
    worker_ = std::make_unique<DraftWorker>(draft, opts_);
}

SsdProposer::SsdProposer(OwnDraft own, DraftWorkerOptions opts) : own_(std::move(own)), opts_(opts), trace_(nullptr) {
    SPECDEC_CHECK(own_.model && own_.cache, "SSD: the draft model and cache are required");
    opts_.subset = own_.subset.get();
    seqs_.resize((size_t)own_.cache->n_seq());
    worker_ = std::make_unique<DraftWorker>(
        DraftContext{own_.model.get(), own_.cache.get(), own_.prefill_chunk, own_.subset.get()}, opts_);
}

SsdProposer::~SsdProposer() = default;  // the worker's destructor stops and joins its thread

void SsdProposer::end(int seq) {
    Seq& S = seqs_[(size_t)seq];
    if (S.active) {
        DraftOutcome o;
        o.seq = seq;
        o.done = true;
        done_.outcomes.push_back(o);
    }
    S = Seq{};
}

void SsdProposer::begin(int seq) {
    SPECDEC_CHECK(seq >= 0 && seq < (int)seqs_.size(), "SSD: sequence ", seq, " outside the draft cache's ",
                  seqs_.size());
    end(seq);
}

void SsdProposer::start(int seq, std::span<const int32_t> prompt, bool in_cache) {
    begin(seq);
    // Begin resets the draft side's state of the sequence: an end not sent
    // yet would arrive after it and end the new sequence instead.
    std::erase_if(done_.outcomes, [&](const DraftOutcome& o) { return o.seq == seq; });
    ToDraft m;
    m.kind = ToDraft::Kind::Begin;
    m.begins.push_back({seq, std::vector<int32_t>(prompt.begin(), prompt.end()), in_cache});
    worker_->send(std::move(m));
    seqs_[(size_t)seq].active = true;
}

void SsdProposer::begin_with_prompt(int seq, std::span<const int32_t> prompt) { start(seq, prompt, false); }

void SsdProposer::begin_with_prefix(int seq, std::span<const int32_t> prefix) { start(seq, prefix, true); }

void SsdProposer::propose(std::span<const spec::ProposeInput> in, std::span<spec::DraftTree> out, Rng&) {
    // Sequences of the last round that are not here have ended (stop, length).
    for (size_t s = 0; s < seqs_.size(); ++s) {
        if (!seqs_[s].in_round) continue;
        const bool here = std::any_of(in.begin(), in.end(), [&](const spec::ProposeInput& x) { return x.seq == (int)s; });
        if (!here) end((int)s);
    }
    ToDraft m = std::move(done_);  // the ends first, then this round's outcomes
    done_ = ToDraft{};
    m.kind = ToDraft::Kind::Outcomes;
    for (const spec::ProposeInput& x : in) {
        SPECDEC_CHECK(x.seq >= 0 && x.seq < (int)seqs_.size() && seqs_[(size_t)x.seq].active, "SSD: sequence ",
                      x.seq, " has not begun with its prompt");
        SPECDEC_CHECK(!x.history.empty(), "SSD: empty history");
        Seq& S = seqs_[(size_t)x.seq];
        DraftOutcome o;
        o.seq = x.seq;
        o.accepted = S.accepted;
        o.bonus = x.history.back();  // the root of the next speculation
        // A speculation of L drafts is a tree of L + 1 nodes.
        o.max_drafts = std::max(0, x.max_nodes - 1);
        m.outcomes.push_back(o);
        S.in_round = true;
    }
    m.batch_size = (int)in.size();
    m.verify_s = last_verify_s_;
    if (in.empty()) {
        if (!m.outcomes.empty()) worker_->send(std::move(m));  // ends only: no reply
        return;
    }
    worker_->send(std::move(m));
    const double t0 = now_s();
    FromDraft r = worker_->receive();
    const double stall = now_s() - t0;
    stall_s_ += stall;
    if (!r.error.empty()) throw Error(r.error);
    draft_stats_ = r.stats;
    if (trace_) {
        for (SsdRoundRecord& rec : pending_) {
            rec.build_s = r.build_s;
            rec.build_interrupted = r.build_interrupted;
            trace_->line(ssd_round_json(rec));
        }
        pending_.clear();
    }
    SPECDEC_CHECK(r.specs.size() == in.size(), "SSD: the draft answered ", r.specs.size(), " speculations for ",
                  in.size(), " sequences");
    round_recs_.clear();
    const int K = opts_.cfg.k;
    for (const Speculation& sp : r.specs) {
        const auto it =
            std::find_if(in.begin(), in.end(), [&](const spec::ProposeInput& x) { return x.seq == sp.seq; });
        SPECDEC_CHECK(it != in.end() && sp.root == it->history.back(),
                      "SSD: the draft answered for the wrong sequence or root");
        SPECDEC_CHECK((int)sp.tokens.size() <= std::max(0, it->max_nodes - 1), "SSD: the draft sent ",
                      sp.tokens.size(), " drafts where ", it->max_nodes - 1, " fit");
        spec::DraftTree& tr = out[(size_t)(it - in.begin())];
        tr.reset(sp.root);
        const bool with_q = sp.kind == spec::DraftKind::Sampled && !opts_.params.greedy();
        if (with_q) {
            SPECDEC_CHECK(sp.n_vocab == opts_.target_n_vocab && sp.q.size() == sp.tokens.size() * (size_t)sp.n_vocab,
                          "SSD: sampled speculation without its proposal distributions");
            tr.kind = sp.kind;
            tr.n_vocab = sp.n_vocab;
            tr.q_pool = sp.q;
        } else {
            tr.kind = spec::DraftKind::Deterministic;
        }
        for (size_t j = 0; j < sp.tokens.size(); ++j) tr.add(sp.tokens[j], (int32_t)j, 0.0f, with_q ? (int32_t)j : -1);
        Seq& S = seqs_[(size_t)sp.seq];
        if (trace_) {
            SsdRoundRecord rec;
            rec.seq = sp.seq;
            rec.round = S.round;
            rec.batch_round = batch_round_;
            rec.prefix_len = (int)it->history.size() - 1;  // committed before the root
            rec.root = sp.root;
            rec.drafts = sp.tokens;
            rec.lookup = S.round > 0;
            rec.lookup_k = rec.lookup ? std::min(S.accepted, K) : -1;
            rec.hit = sp.hit;
            rec.backup = sp.backup;
            rec.fanout = r.stats.fanout;
            rec.backup_s = r.backup_s;
            rec.stall_s = stall;
            round_recs_.push_back(std::move(rec));
        }
        ++S.round;
    }
    ++batch_round_;
}

void SsdProposer::observe(const spec::RoundFeedback& fb) {
    last_verify_s_ = fb.forward_s;
    for (const spec::RoundOutcome& o : fb.seqs) {
        if (o.seq < 0 || o.seq >= (int)seqs_.size()) continue;
        seqs_[(size_t)o.seq].accepted = o.accepted;
        for (SsdRoundRecord& rec : round_recs_) {
            if (rec.seq != o.seq) continue;
            rec.accepted = o.accepted;
            rec.emitted.assign(o.emitted.begin(), o.emitted.end());
            // A stop may cut the round before the target's own token.
            rec.bonus = (int)o.emitted.size() == o.accepted + 1 ? o.emitted.back() : -1;
            rec.tree_s = fb.tree_s;
            rec.verify_s = fb.forward_s;
        }
    }
    if (trace_) {
        pending_ = std::move(round_recs_);
        round_recs_.clear();
    }
}

void SsdProposer::finish_trace() {
    if (!trace_) return;
    for (SsdRoundRecord& rec : pending_) {
        rec.build_s = -1;  // the last build was never reported
        trace_->line(ssd_round_json(rec));
    }
    pending_.clear();
}

}  // namespace specdec::sched
