#include "sched/ssd_proposer.h"

#include <algorithm>
#include <cmath>

#include "core/clock.h"
#include "core/error.h"
#include "spec/ngram_proposer.h"

namespace specdec::sched {

namespace {
// Counters of a remote side restart with each session; the run reports their
// sum. Rates and estimates are the latest session's.
DraftSideStats add_stats(const DraftSideStats& a, const DraftSideStats& b) {
    DraftSideStats s = b;
    s.lookups += a.lookups;
    s.hits += a.hits;
    const auto add_vec = [](std::vector<int>& into, const std::vector<int>& v) {
        if (into.size() < v.size()) into.resize(v.size(), 0);
        for (size_t i = 0; i < v.size(); ++i) into[i] += v[i];
    };
    add_vec(s.lookups_k, a.lookups_k);
    add_vec(s.hits_k, a.hits_k);
    s.jit += a.jit;
    s.ngram += a.ngram;
    s.random += a.random;
    s.trees += a.trees;
    s.interrupted += a.interrupted;
    s.branches += a.branches;
    s.glue_reused += a.glue_reused;
    s.tree_s += a.tree_s;
    s.backup_s += a.backup_s;
    return s;
}
}  // namespace

SsdProposer::SsdProposer(const DraftContext& draft, const DraftWorkerOptions& opts, spec::TraceWriter* trace)
    : opts_(opts), trace_(trace) {
    SPECDEC_CHECK(draft.model && draft.cache, "SSD: the draft model and cache are required");
    seqs_.resize((size_t)draft.cache->n_seq());
    side_ = std::make_unique<DraftWorker>(draft, opts_);
}

SsdProposer::SsdProposer(OwnDraft own, DraftWorkerOptions opts) : own_(std::move(own)), opts_(opts), trace_(nullptr) {
    SPECDEC_CHECK(own_.model && own_.cache, "SSD: the draft model and cache are required");
    opts_.subset = own_.subset.get();
    seqs_.resize((size_t)own_.cache->n_seq());
    side_ = std::make_unique<DraftWorker>(
        DraftContext{own_.model.get(), own_.cache.get(), own_.prefill_chunk, own_.subset.get()}, opts_);
}

SsdProposer::SsdProposer(std::unique_ptr<DraftSide> side, const DraftWorkerOptions& opts, int n_seq,
                         spec::TraceWriter* trace)
    : opts_(opts), trace_(trace), side_(std::move(side)) {
    SPECDEC_CHECK(side_ && n_seq >= 1, "SSD: a draft side and at least one sequence are required");
    seqs_.resize((size_t)n_seq);
}

SsdProposer::~SsdProposer() = default;  // the side's destructor stops its thread or closes its link

DraftSideStats SsdProposer::draft_stats() const { return add_stats(earlier_sessions_, draft_stats_); }

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
    seqs_[(size_t)seq].active = true;
    if (out_of_sync_) return;  // the next round's resync begins it from its history
    seqs_[(size_t)seq].next_len = prompt.size() + 1;  // the prompt, then the target's first token
    ToDraft m;
    m.kind = ToDraft::Kind::Begin;
    m.begins.push_back({seq, std::vector<int32_t>(prompt.begin(), prompt.end()), in_cache});
    begun_tokens_ += (long)prompt.size();
    side_->send(std::move(m));
}

void SsdProposer::begin_with_prompt(int seq, std::span<const int32_t> prompt) { start(seq, prompt, false); }

void SsdProposer::begin_with_prefix(int seq, std::span<const int32_t> prefix) { start(seq, prefix, true); }

void SsdProposer::resync() {
    // Whatever the old session held is gone: counters carry over, state does not.
    earlier_sessions_ = add_stats(earlier_sessions_, draft_stats_);
    draft_stats_ = DraftSideStats{};
    side_->restart();
    ++fallback_.resyncs;
    done_ = ToDraft{};  // ends of sequences the new session never saw
    for (Seq& S : seqs_) S.next_len = 0;
    out_of_sync_ = false;
}

std::string SsdProposer::check_reply(const FromDraft& r, std::span<const spec::ProposeInput> in) const {
    if (r.specs.size() != in.size())
        return "the draft answered " + std::to_string(r.specs.size()) + " speculations for " +
               std::to_string(in.size()) + " sequences";
    for (size_t i = 0; i < r.specs.size(); ++i) {
        const Speculation& sp = r.specs[i];
        const auto it =
            std::find_if(in.begin(), in.end(), [&](const spec::ProposeInput& x) { return x.seq == sp.seq; });
        if (it == in.end() || sp.root != it->history.back())
            return "the draft answered for the wrong sequence or root";
        for (size_t j = 0; j < i; ++j)
            if (r.specs[j].seq == sp.seq) return "the draft answered twice for one sequence";
        if ((int)sp.tokens.size() > std::max(0, it->max_nodes - 1))
            return "the draft sent " + std::to_string(sp.tokens.size()) + " drafts where " +
                   std::to_string(it->max_nodes - 1) + " fit";
        for (int32_t t : sp.tokens)
            if (t < 0 || t >= opts_.target_n_vocab) return "the draft sent a token outside the vocabulary";
        if (sp.kind == spec::DraftKind::Sampled && !opts_.params.greedy()) {
            if (sp.n_vocab != opts_.target_n_vocab || sp.q.size() != sp.tokens.size() * (size_t)sp.n_vocab)
                return "sampled speculation without its proposal distributions";
            for (float v : sp.q)
                if (!std::isfinite(v) || v < 0.0f) return "a proposal distribution that is not one";
        }
    }
    return {};
}

void SsdProposer::flush_pending(double build_s, bool interrupted) {
    if (!trace_) return;
    for (SsdRoundRecord& rec : pending_) {
        if (!rec.fallback.empty()) build_s = -1, interrupted = false;  // no build overlapped a local round
        rec.build_s = build_s;
        rec.build_interrupted = interrupted;
        trace_->line(ssd_round_json(rec));
    }
    pending_.clear();
}

SsdRoundRecord SsdProposer::round_record(const spec::ProposeInput& x, const Seq& S, std::vector<int32_t> drafts,
                                         double stall) const {
    SsdRoundRecord rec;
    rec.seq = x.seq;
    rec.round = S.round;
    rec.batch_round = batch_round_;
    rec.prefix_len = (int)x.history.size() - 1;  // committed before the root
    rec.root = x.history.back();
    rec.drafts = std::move(drafts);
    rec.stall_s = stall;
    return rec;
}

void SsdProposer::fall_back(std::span<const spec::ProposeInput> in, std::span<spec::DraftTree> out,
                            const std::string& why, double stall) {
    ++fallback_.rounds;
    if (why == "timeout") ++fallback_.timeout;
    else if (why == "disconnected") ++fallback_.disconnected;
    else if (why == "error") ++fallback_.error;
    else if (why == "backoff") ++fallback_.backoff;
    else ++fallback_.invalid;
    if (why != "backoff") {
        out_of_sync_ = true;
        // A missing connection fails at once: retry every round. Anything
        // that cost a wait (or may repeat, as garbage does) backs off.
        if (why != "disconnected") {
            ++fault_streak_;
            skip_rounds_ = (1 << std::min(fault_streak_ - 1, 4)) - 1;
        }
    }
    flush_pending(-1, false);  // the build that overlapped them will never be reported
    round_recs_.clear();
    const int K = opts_.cfg.k;
    for (size_t i = 0; i < in.size(); ++i) {
        const spec::ProposeInput& x = in[i];
        const int cap = std::clamp(x.max_nodes - 1, 0, K);
        const std::vector<int32_t> chain =
            spec::NgramProposer::lookup(x.history, opts_.cfg.ngram_min, opts_.cfg.ngram_max, cap);
        spec::DraftTree& tr = out[i];
        tr.reset(x.history.back());
        tr.kind = spec::DraftKind::Deterministic;  // q a point mass: lossless under sampling too
        for (size_t j = 0; j < chain.size(); ++j) tr.add(chain[j], (int32_t)j, 0.0f, -1);
        Seq& S = seqs_[(size_t)x.seq];
        if (trace_) {
            SsdRoundRecord rec = round_record(x, S, chain, stall);
            rec.backup = BackupKind::Ngram;
            rec.fallback = why;
            round_recs_.push_back(std::move(rec));
        }
        ++S.round;
    }
    ++batch_round_;
}

bool SsdProposer::drafted_elsewhere(const spec::ProposeInput& x, const spec::DraftTree& tree) {
    // Only a draft side in step can follow; otherwise the next round it
    // drafts begins the sequence again from its history.
    if (out_of_sync_ || x.seq < 0 || x.seq >= (int)seqs_.size() || !seqs_[(size_t)x.seq].active) return false;
    const int L = tree.size() - 1;
    if (L < 1 || L > opts_.cfg.k || tree.tokens[0] != x.history.back()) return false;
    for (int j = 1; j <= L; ++j)
        if (tree.parents[(size_t)j] != j - 1) return false;  // a chain only
    adopted_.push_back({x, std::vector<int32_t>(tree.tokens.begin() + 1, tree.tokens.end())});
    Seq& S = seqs_[(size_t)x.seq];
    if (trace_) {
        SsdRoundRecord rec = round_record(x, S, adopted_.back().chain, 0.0);
        rec.from_lookup = true;
        adopted_recs_.push_back(std::move(rec));
    }
    return true;
}

void SsdProposer::add_outcome(const spec::ProposeInput& x, std::vector<int32_t> adopt, ToDraft& m, ToDraft& begins) {
    Seq& S = seqs_[(size_t)x.seq];
    DraftOutcome o;
    o.seq = x.seq;
    o.accepted = S.accepted;
    o.bonus = x.history.back();  // the root of the next speculation
    // A speculation of L drafts is a tree of L + 1 nodes.
    o.max_drafts = std::max(0, x.max_nodes - 1);
    o.adopt = std::move(adopt);
    if (x.history.size() != S.next_len) {
        // The draft side is behind (or in a new session): it takes the
        // history but its last token, keeping what its cache holds of it,
        // then that token as a first bonus: the state of a sequence after
        // its prefill.
        begins.begins.push_back({x.seq, std::vector<int32_t>(x.history.begin(), x.history.end() - 1), true});
        const size_t held = S.next_len == 0 ? 0 : std::min(x.history.size() - 1, S.proposed_len);
        begun_tokens_ += (long)(x.history.size() - 1 - held);
        o.accepted = 0;
        S.accepted = 0;
        S.round = 0;  // no speculation cache to look this round up in
    }
    S.proposed_len = x.history.size();
    if (!o.adopt.empty()) ++S.round;  // the draft side's next speculation for it is looked up in its cache
    m.outcomes.push_back(std::move(o));
}

void SsdProposer::propose(std::span<const spec::ProposeInput> in, std::span<spec::DraftTree> out, Rng&) {
    for (const spec::ProposeInput& x : in) {
        SPECDEC_CHECK(x.seq >= 0 && x.seq < (int)seqs_.size() && seqs_[(size_t)x.seq].active, "SSD: sequence ",
                      x.seq, " has not begun with its prompt");
        SPECDEC_CHECK(!x.history.empty(), "SSD: empty history");
    }
    if (out_of_sync_ && !in.empty() && skip_rounds_ > 0) {
        --skip_rounds_;
        fall_back(in, out, "backoff", 0.0);
        return;
    }
    if (out_of_sync_ && !in.empty()) resync();
    ToDraft m = std::move(done_);  // the ends first, then this round's outcomes
    done_ = ToDraft{};
    m.kind = ToDraft::Kind::Outcomes;
    ToDraft begins;
    begins.kind = ToDraft::Kind::Begin;
    m.batch_size = (int)(in.size() + adopted_.size());
    for (const spec::ProposeInput& x : in) add_outcome(x, {}, m, begins);
    for (Adopted& a : adopted_) add_outcome(a.in, std::move(a.chain), m, begins);
    adopted_.clear();
    if (!begins.begins.empty()) side_->send(std::move(begins));
    m.verify_s = last_verify_s_;
    if (in.empty()) {
        if (!m.outcomes.empty()) side_->send(std::move(m));  // ends and adopted chains only: no reply
        return;
    }
    side_->send(std::move(m));
    const bool can_fail = side_->can_fail();
    // The wait: unbounded in process (a reply always comes); bounded for a
    // remote side, longer while the draft still has Begins to prefill.
    const double wait = can_fail ? opts_.cfg.link_timeout_ms * 1e-3 +
                                       (double)begun_tokens_ * opts_.cfg.link_prefill_ms_per_token * 1e-3
                                 : 0.0;
    const double t0 = now_s();
    std::optional<FromDraft> reply = side_->receive(wait);
    const double stall = now_s() - t0;
    stall_s_ += stall;
    if (!reply) {
        SPECDEC_CHECK(can_fail, "SSD: the draft side did not answer");
        fall_back(in, out, side_->fault(), stall);
        return;
    }
    FromDraft& r = *reply;
    if (!r.error.empty()) {
        if (!can_fail) throw Error(r.error);
        fall_back(in, out, "error", stall);
        return;
    }
    if (const std::string why = check_reply(r, in); !why.empty()) {
        if (!can_fail) throw Error("SSD: " + why);
        fall_back(in, out, "invalid", stall);
        return;
    }
    begun_tokens_ = 0;
    fault_streak_ = 0;
    draft_stats_ = r.stats;
    flush_pending(r.build_s, r.build_interrupted);
    round_recs_.clear();
    const int K = opts_.cfg.k;
    for (const Speculation& sp : r.specs) {
        const auto it =
            std::find_if(in.begin(), in.end(), [&](const spec::ProposeInput& x) { return x.seq == sp.seq; });
        spec::DraftTree& tr = out[(size_t)(it - in.begin())];
        tr.reset(sp.root);
        const bool with_q = sp.kind == spec::DraftKind::Sampled && !opts_.params.greedy();
        if (with_q) {
            tr.kind = sp.kind;
            tr.n_vocab = sp.n_vocab;
            tr.q_pool = sp.q;
        } else {
            tr.kind = spec::DraftKind::Deterministic;
        }
        for (size_t j = 0; j < sp.tokens.size(); ++j) tr.add(sp.tokens[j], (int32_t)j, 0.0f, with_q ? (int32_t)j : -1);
        Seq& S = seqs_[(size_t)sp.seq];
        if (trace_) {
            SsdRoundRecord rec = round_record(*it, S, sp.tokens, stall);
            rec.lookup = S.round > 0;
            rec.lookup_k = rec.lookup ? std::min(S.accepted, K) : -1;
            rec.hit = sp.hit;
            rec.backup = sp.backup;
            rec.fanout = r.stats.fanout;
            rec.backup_s = r.backup_s;
            round_recs_.push_back(std::move(rec));
        }
        ++S.round;
    }
    ++batch_round_;
}

void SsdProposer::observe(const spec::RoundFeedback& fb) {
    last_verify_s_ = fb.forward_s;
    for (SsdRoundRecord& rec : adopted_recs_) round_recs_.push_back(std::move(rec));
    adopted_recs_.clear();
    for (const spec::RoundOutcome& o : fb.seqs) {
        if (o.seq < 0 || o.seq >= (int)seqs_.size()) continue;
        Seq& S = seqs_[(size_t)o.seq];
        S.accepted = o.accepted;
        S.next_len = S.proposed_len + (size_t)o.accepted + 1;
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
        // Appended: a round of adopted lookup chains only gets no reply, so
        // the records before it are still waiting for a build time.
        for (SsdRoundRecord& rec : round_recs_) pending_.push_back(std::move(rec));
        round_recs_.clear();
    }
}

void SsdProposer::finish_trace() { flush_pending(-1, false); }  // the last build was never reported

}  // namespace specdec::sched
