#include "sched/ssd_draft_worker.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "core/clock.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "spec/ngram_proposer.h"

namespace specdec::sched {

namespace {
// Tokens the processors look at: the tail of the history plus a path. The
// repetition penalty reads at most repeat_last_n tokens, so the tail suffices.
void context_of(std::span<const int32_t> hist, std::span<const int32_t> path, int keep, std::vector<int32_t>& out) {
    const size_t n = std::min(hist.size(), (size_t)std::max(keep, 0));
    out.assign(hist.end() - n, hist.end());
    out.insert(out.end(), path.begin(), path.end());
}
}  // namespace

void top_n(const float* s, int V, int n, std::vector<int>& out) {
    out.clear();
    if (n <= 0) return;
    // Insertion into a short sorted list: O(V) when n is small.
    for (int x = 0; x < V; ++x) {
        const float v = s[x];
        if ((int)out.size() == n && !(v > s[out.back()])) continue;
        int pos = (int)out.size();
        while (pos > 0 && v > s[out[pos - 1]]) --pos;
        out.insert(out.begin() + pos, x);
        if ((int)out.size() > n) out.pop_back();
    }
}

void saguaro_reweight(std::vector<float>& q, int F, float C) {
    if (F <= 0 || C == 1.0f) return;
    std::vector<int> top;
    top_n(q.data(), (int)q.size(), F, top);
    double rest = 0, cached = 0;
    for (int x : top) cached += q[x];
    for (float v : q) rest += v;
    rest -= cached;
    const double total = rest + C * cached;
    if (!(total > 0)) return;  // nothing would remain: keep q
    for (int x : top) q[x] *= C;
    const float inv = (float)(1.0 / total);
    for (float& v : q) v *= inv;
}

DraftWorker::DraftWorker(const DraftContext& ctx, const DraftWorkerOptions& opts)
    : ctx_(ctx), opts_(opts), rng_(opts.params.seed ^ opts.cfg.draft_seed) {
    SPECDEC_CHECK(ctx_.model && ctx_.cache, "SSD: the draft model and cache are required");
    opts_.cfg.validate();
    vt_ = opts_.target_n_vocab;
    vd_ = ctx_.model->config().n_vocab;
    SPECDEC_CHECK(vt_ > 0, "SSD: target vocabulary size missing");
    if (opts_.subset) {
        SPECDEC_CHECK(opts_.subset->n_target_vocab() == vt_, "SSD: vocabulary subset made for another vocabulary");
        const int bound = std::min(vt_, vd_);
        for (int32_t t : opts_.subset->ids())  // ascending
            if (t < bound) allowed_.push_back(t);
        SPECDEC_CHECK(!allowed_.empty(), "SSD: the vocabulary subset holds no token the draft has");
        head_ = std::make_unique<model::LmHeadSubset>(*ctx_.model, allowed_);
    }
    seqs_.resize(ctx_.cache->n_seq());
    if (opts_.n_batch > 0) {
        SPECDEC_CHECK(opts_.n_batch <= ctx_.cache->n_seq(), "SSD: a batch of ", opts_.n_batch,
                      " sequences in a draft cache of ", ctx_.cache->n_seq());
        n_batch_ = opts_.n_batch;
        slot_valid_.assign(ctx_.cache->n_seq(), 0);
    }
    fan_ = est_.fanout(opts_.cfg);
    st_.lookups_k.assign(opts_.cfg.k + 1, 0);
    st_.hits_k.assign(opts_.cfg.k + 1, 0);
    st_.b_star = INFINITY;  // JIT until calibrated
    thread_ = std::thread([this] { loop(); });
}

DraftWorker::~DraftWorker() {
    ToDraft m;
    m.kind = ToDraft::Kind::Stop;
    send(std::move(m));
    if (thread_.joinable()) thread_.join();
}

void DraftWorker::loop() {
    try {
        // Before the pool starts: its threads inherit this thread's niceness.
        // Best effort (raising one's own niceness needs no privilege).
        if (opts_.cfg.draft_nice > 0)
            (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), opts_.cfg.draft_nice);
        ThreadPoolOptions po;
        po.n_threads = opts_.cfg.draft_threads;
        po.pin_cpus = opts_.cfg.draft_pin_cpus;
        pool_ = std::make_unique<ThreadPool>(po);
        for (;;) {
            ToDraft m = inbox_.pop();
            if (m.kind == ToDraft::Kind::Stop) break;
            if (m.kind == ToDraft::Kind::Begin) {
                handle_begin(m);
                continue;
            }
            const bool reply = wants_reply(m);
            FromDraft r = handle_outcomes(m);
            if (reply) outbox_.push(std::move(r));
            const double tb = now_s();
            const int interrupted = st_.interrupted;
            build_caches();
            last_build_s_ = now_s() - tb;
            last_build_interrupted_ = st_.interrupted != interrupted;
        }
    } catch (const std::exception& e) {
        // Answer every request with the error until told to stop, so the
        // target never waits forever.
        const std::string what = std::string("SSD draft worker: ") + e.what();
        FromDraft r;
        r.error = what;
        outbox_.push(r);
        for (;;) {
            ToDraft m = inbox_.pop();
            if (m.kind == ToDraft::Kind::Stop) break;
            if (m.kind == ToDraft::Kind::Outcomes) outbox_.push(r);
        }
    }
    pool_.reset();
}

void DraftWorker::forward() {
    if (!head_) {
        ctx_.model->forward(batch_, *ctx_.cache, *pool_, result_);
        return;
    }
    head_->forward(*ctx_.model, batch_, *ctx_.cache, *pool_, result_);  // logits over the subset only
}

void DraftWorker::widen(const float* draft_row, std::vector<float>& out) const {
    out.assign(vt_, -std::numeric_limits<float>::infinity());
    if (head_) {
        for (size_t j = 0; j < allowed_.size(); ++j) out[allowed_[j]] = draft_row[j];
        return;
    }
    std::copy(draft_row, draft_row + std::min(vt_, vd_), out.begin());
}

bool DraftWorker::use_slots(int n_branches) const { return n_branches <= slots_per_seq(); }

void DraftWorker::sync_slot(int src, int dst, int n) {
    kv::KvCache& cache = *ctx_.cache;
    const int c = std::min({slot_valid_[dst], cache.committed(dst), n});
    cache.truncate(dst, c);
    cache.copy_range(src, dst, c, n - c);
}

void DraftWorker::handle_begin(const ToDraft& m) {
    kv::KvCache& cache = *ctx_.cache;
    if (opts_.n_batch > 0) {
        // A fixed layout: only the beginning sequences' branch slots start over.
        for (const DraftBegin& b : m.begins) {
            SPECDEC_CHECK(b.seq >= 0 && b.seq < n_batch_, "SSD: sequence ", b.seq, " outside the batch of ", n_batch_);
            for (int i = 0; i < slots_per_seq(); ++i) slot_valid_[branch_slot(b.seq, i)] = 0;
        }
    } else {
        for (const DraftBegin& b : m.begins) n_batch_ = std::max(n_batch_, b.seq + 1);
        slot_valid_.assign(cache.n_seq(), 0);  // the layout moved: branch slots are rebuilt from scratch
    }
    for (const DraftBegin& b : m.begins) {
        SPECDEC_CHECK(b.seq >= 0 && b.seq < (int)seqs_.size(), "SSD: sequence ", b.seq, " out of range");
        Seq& S = seqs_[b.seq];
        // What the cache holds of the prompt, when the Begin says it holds
        // some: all of it (a shared prefill), or, for a sequence begun again
        // after rounds drafted elsewhere, the prefix its old history shares
        // with the new one (the committed part of it).
        int keep = 0;
        if (b.in_cache) {
            const int committed = cache.committed(b.seq);
            if (committed >= (int)b.prompt.size()) {
                keep = (int)b.prompt.size();
            } else if (S.active) {
                const size_t n = std::min({(size_t)committed, S.hist.size(), b.prompt.size()});
                keep = (int)(std::mismatch(S.hist.begin(), S.hist.begin() + (long)n, b.prompt.begin()).first -
                             S.hist.begin());
            }
        }
        S = Seq{};
        S.active = true;
        S.hist = b.prompt;
        if (keep > 0) {
            cache.truncate(b.seq, keep);
        } else {
            cache.clear(b.seq);
        }
        if (keep == (int)b.prompt.size()) continue;
        const int chunk = std::max(1, ctx_.prefill_chunk);
        for (size_t off = (size_t)keep; off < b.prompt.size(); off += chunk) {
            const size_t n = std::min((size_t)chunk, b.prompt.size() - off);
            batch_.clear();
            for (size_t j = 0; j < n; ++j) {
                const int32_t tok = b.prompt[off + j] < vd_ ? b.prompt[off + j] : 0;
                batch_.add(tok, cache.committed(b.seq) + (int)j, b.seq, j == 0 ? -1 : batch_.size() - 1, false);
            }
            forward();
            cache.commit_length(b.seq, (int)n);
        }
    }
}

void DraftWorker::commit_outcomes(const std::vector<DraftOutcome>& outs) {
    kv::KvCache& cache = *ctx_.cache;
    // Sequences whose speculative region does not hold the speculation catch
    // up in one forward.
    batch_.clear();
    std::vector<std::pair<int, int>> catch_up;  // (seq, rows)
    for (const DraftOutcome& o : outs) {
        Seq& S = seqs_[o.seq];
        if (o.done || !S.active || !S.has_root || S.glue_valid) continue;
        const int n = o.accepted + 1;
        for (int j = 0; j < n; ++j) {
            const int32_t tok = j == 0 ? S.spec.root : S.spec.tokens[j - 1];
            batch_.add(tok < vd_ ? tok : 0, cache.committed(o.seq) + j, o.seq, j == 0 ? -1 : batch_.size() - 1, false);
        }
        catch_up.push_back({o.seq, n});
    }
    if (batch_.size() > 0) {
        forward();
        for (auto [s, n] : catch_up) {
            cache.commit_length(s, n);
            seqs_[s].glue_valid = true;  // committed below by length only
        }
    }
    for (const DraftOutcome& o : outs) {
        SPECDEC_CHECK(o.seq >= 0 && o.seq < (int)seqs_.size(), "SSD: sequence ", o.seq, " out of range");
        Seq& S = seqs_[o.seq];
        if (o.done) {
            S.active = false;
            S.branches.clear();
            continue;
        }
        SPECDEC_CHECK(S.active, "SSD: outcome for sequence ", o.seq, " which has not begun");
        if (S.has_root) {
            const int L = (int)S.spec.tokens.size();
            SPECDEC_CHECK(o.accepted >= 0 && o.accepted <= L, "SSD: ", o.accepted, " accepted of ", L, " drafts");
            const bool caught_up = std::find_if(catch_up.begin(), catch_up.end(),
                                                [&](auto& c) { return c.first == o.seq; }) != catch_up.end();
            if (!caught_up) cache.commit_length(o.seq, o.accepted + 1);
            // An adopted chain's acceptance says nothing about the draft's.
            if (!S.adopted) est_.observe_round(o.accepted, L);
            emitted_ += o.accepted + 1;
            ++rounds_;
            // Rank of the target's bonus among the draft's guesses at k.
            if (!S.scores.empty()) {
                const float* s = S.scores.data() + (size_t)o.accepted * vt_;
                const int32_t excl = o.accepted < L ? S.spec.tokens[o.accepted] : -1;
                if (o.bonus == excl || o.bonus >= vt_) {
                    est_.observe_bonus_rank(-1);
                } else {
                    int rank = 0;
                    const float sb = s[o.bonus];
                    for (int x = 0; x < vt_; ++x)
                        if (x != excl && (s[x] > sb || (s[x] == sb && x < o.bonus))) ++rank;
                    est_.observe_bonus_rank(rank);
                }
            }
            S.hist.insert(S.hist.end(), S.spec.tokens.begin(), S.spec.tokens.begin() + o.accepted);
        }
        S.hist.push_back(o.bonus);
        S.has_root = true;
        S.glue_valid = false;
        S.scores.clear();
        SPECDEC_CHECK(cache.committed(o.seq) + 1 == (int)S.hist.size(), "SSD: draft cache out of step (",
                      cache.committed(o.seq), " committed, history ", S.hist.size(), ")");
    }
}

void DraftWorker::draw(const float* logits, std::span<const int32_t> ctx, int F, int32_t& tok, std::vector<float>* q) {
    const sample::SamplingParams& p = opts_.params;
    widen(logits, row_);
    if (p.greedy()) {
        if (p.repeat_penalty != 1.0f) sample::apply_repetition_penalty(row_.data(), vt_, ctx, p);
        tok = sample::argmax(row_.data(), vt_);
        return;
    }
    sample::distribution(row_.data(), vt_, ctx, p, prob_);
    if (opts_.cfg.saguaro_c != 1.0f) saguaro_reweight(prob_, F, opts_.cfg.saguaro_c);
    tok = sample::sample_from(prob_, rng_);
    if (q) q->insert(q->end(), prob_.begin(), prob_.end());
}

BackupKind DraftWorker::choose_backup(int batch) const {
    if (opts_.cfg.backup != BackupKind::Auto) return opts_.cfg.backup;
    return batch < st_.b_star ? BackupKind::Jit : BackupKind::Ngram;
}

void DraftWorker::run_jit(const std::vector<int>& seqs, const std::vector<int>& caps) {
    kv::KvCache& cache = *ctx_.cache;
    const int keep = opts_.params.repeat_last_n + 1;
    int max_len = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
        Speculation& sp = seqs_[seqs[i]].spec;
        sp.tokens.clear();
        sp.q.clear();
        max_len = std::max(max_len, caps[i]);
    }
    std::vector<int32_t> ctx;
    for (int j = 0; j < max_len; ++j) {
        batch_.clear();
        for (size_t i = 0; i < seqs.size(); ++i) {
            if (j >= caps[i]) continue;
            const Speculation& sp = seqs_[seqs[i]].spec;
            const int32_t tok = j == 0 ? sp.root : sp.tokens[j - 1];
            batch_.add(tok < vd_ ? tok : 0, cache.committed(seqs[i]), seqs[i], -1, true);
        }
        forward();
        int row = 0;
        for (size_t i = 0; i < seqs.size(); ++i) {
            if (j >= caps[i]) continue;
            Seq& S = seqs_[seqs[i]];
            cache.commit_length(seqs[i], 1);
            context_of(S.hist, S.spec.tokens, keep, ctx);
            int32_t tok = 0;
            draw(result_.row_logits(row++), ctx, fan_[j], tok, opts_.params.greedy() ? nullptr : &S.spec.q);
            S.spec.tokens.push_back(tok);
        }
    }
    for (int s : seqs) cache.truncate(s, (int)seqs_[s].hist.size() - 1);
}

FromDraft DraftWorker::handle_outcomes(const ToDraft& m) {
    if (m.verify_s > 0) verify_s_ = verify_s_ > 0 ? 0.8 * verify_s_ + 0.2 * m.verify_s : m.verify_s;
    std::vector<uint8_t> was_started(m.outcomes.size());
    for (size_t i = 0; i < m.outcomes.size(); ++i) was_started[i] = seqs_[m.outcomes[i].seq].has_root;
    commit_outcomes(m.outcomes);

    const sample::SamplingParams& p = opts_.params;
    const spec::DraftKind drawn = p.greedy() ? spec::DraftKind::Deterministic : spec::DraftKind::Sampled;
    FromDraft reply;
    std::vector<int> jit_seqs, jit_caps;
    std::vector<size_t> misses;
    const int K = opts_.cfg.k;
    for (size_t i = 0; i < m.outcomes.size(); ++i) {
        const DraftOutcome& o = m.outcomes[i];
        if (o.done) continue;
        Seq& S = seqs_[o.seq];
        const int cap = std::clamp(o.max_drafts, 0, K);
        Speculation sp;
        sp.seq = o.seq;
        sp.root = o.bonus;
        sp.n_vocab = vt_;
        bool hit = false;
        S.reuse_slot = -1;
        S.reuse_scores.clear();
        S.adopted = !o.adopt.empty();
        if (S.adopted) {
            // The target verifies a chain of its own this round (no reply):
            // it becomes the speculation the cache is built for.
            SPECDEC_CHECK((int)o.adopt.size() <= K, "SSD: an adopted chain of ", o.adopt.size(),
                          " tokens is longer than K = ", K);
            sp.tokens = o.adopt;
            sp.kind = spec::DraftKind::Deterministic;
            S.branches.clear();
            S.spec = std::move(sp);
            continue;
        }
        if (was_started[i]) {
            ++st_.lookups;
            ++st_.lookups_k[std::min(o.accepted, K)];
            if (!opts_.cfg.force_miss) {
                for (size_t bi = 0; bi < S.branches.size(); ++bi) {
                    Branch& b = S.branches[bi];
                    if (b.k != o.accepted || b.t != o.bonus || b.drafts.empty()) continue;
                    hit = true;
                    const int L = std::min(cap, (int)b.drafts.size());
                    if (S.in_slots && L >= 1 && b.scores.size() >= (size_t)L * vt_) {
                        S.reuse_slot = branch_slot(o.seq, (int)bi);
                        S.reuse_scores = std::move(b.scores);
                    }
                    sp.tokens.assign(b.drafts.begin(), b.drafts.begin() + L);
                    if (!p.greedy()) sp.q.assign(b.q.begin(), b.q.begin() + (size_t)L * vt_);
                    sp.kind = drawn;
                    sp.hit = true;
                    break;
                }
            }
            if (hit) {
                ++st_.hits;
                ++st_.hits_k[std::min(o.accepted, K)];
            }
        }
        S.branches.clear();
        S.spec = std::move(sp);
        if (!hit) misses.push_back(i);
    }
    // Backups for the misses, all lossless: each declares its proposal.
    const double tb = now_s();
    const BackupKind kind = choose_backup(m.batch_size);
    for (size_t i : misses) {
        const DraftOutcome& o = m.outcomes[i];
        Seq& S = seqs_[o.seq];
        const int cap = std::clamp(o.max_drafts, 0, K);
        S.spec.backup = kind;
        switch (kind) {
            case BackupKind::Auto:
            case BackupKind::Jit:
                S.spec.kind = drawn;
                jit_seqs.push_back(o.seq);
                jit_caps.push_back(cap);
                ++st_.jit;
                break;
            case BackupKind::Ngram:
                S.spec.kind = spec::DraftKind::Deterministic;  // q a point mass
                S.spec.tokens = spec::NgramProposer::lookup(S.hist, opts_.cfg.ngram_min, opts_.cfg.ngram_max, cap);
                ++st_.ngram;
                break;
            case BackupKind::Random:
                S.spec.kind = drawn;  // q uniform over the target vocabulary
                for (int j = 0; j < cap; ++j) S.spec.tokens.push_back((int32_t)(rng_.uniform() * vt_) % vt_);
                if (!p.greedy()) S.spec.q.assign((size_t)cap * vt_, 1.0f / vt_);
                ++st_.random;
                break;
        }
    }
    if (!jit_seqs.empty()) {
        const double tj = now_s();
        run_jit(jit_seqs, jit_caps);
        const double dt = now_s() - tj;
        jit_s_ = jit_s_ > 0 ? 0.8 * jit_s_ + 0.2 * dt : dt;
    }
    reply.backup_s = now_s() - tb;
    st_.backup_s += reply.backup_s;
    reply.build_s = last_build_s_;
    reply.build_interrupted = last_build_interrupted_;
    last_build_s_ = 0;
    last_build_interrupted_ = false;
    // Calibrate the switch point from what was measured (JIT time per batch).
    if (st_.lookups >= 8 && verify_s_ > 0 && jit_s_ > 0 && rounds_ > 0) {
        const double ph = (double)st_.hits / st_.lookups;
        st_.b_star = backup_switch_batch(ph, (double)emitted_ / rounds_, jit_s_ / verify_s_);
    } else {
        st_.b_star = INFINITY;  // not calibrated yet: JIT
    }
    for (size_t i = 0; i < m.outcomes.size(); ++i)
        if (asks_for_speculation(m.outcomes[i])) reply.specs.push_back(seqs_[m.outcomes[i].seq].spec);
    fan_ = est_.fanout(opts_.cfg);
    st_.acceptance = est_.acceptance();
    st_.miss_exponent = est_.miss_exponent();
    st_.fanout = fan_;
    reply.stats = st_;
    return reply;
}

void DraftWorker::build_caches() {
    kv::KvCache& cache = *ctx_.cache;
    const double t0 = now_s();
    const int K = opts_.cfg.k;
    const int keep = opts_.params.repeat_last_n + 1;
    std::vector<int> work;
    for (int s = 0; s < (int)seqs_.size(); ++s)
        if (seqs_[s].active && seqs_[s].has_root) work.push_back(s);
    if (work.empty()) return;
    // Step 0, glue: [root, s1..sL] per sequence, logits at every accept point.
    batch_.clear();
    for (int s : work) {
        Seq& S = seqs_[s];
        const int L = (int)S.spec.tokens.size();
        const int P = cache.committed(s);
        if (S.reuse_slot >= 0 && L >= 1 && cache.committed(S.reuse_slot) >= P + L) {
            // The hit branch's slot holds [prefix, root, d1..d_{L-1}]: take
            // their KV, commit it for this forward, feed only d_L.
            cache.copy_range(S.reuse_slot, s, P, L);
            ++st_.glue_reused;
            S.glue_row = batch_.add(S.spec.tokens[L - 1] < vd_ ? S.spec.tokens[L - 1] : 0, P + L, s, -1, true);
            continue;
        }
        S.reuse_slot = -1;
        S.glue_row = batch_.size();
        for (int j = 0; j <= L; ++j) {
            const int32_t tok = j == 0 ? S.spec.root : S.spec.tokens[j - 1];
            batch_.add(tok < vd_ ? tok : 0, P + j, s, j == 0 ? -1 : batch_.size() - 1, true);
        }
    }
    forward();
    for (int s : work) {
        Seq& S = seqs_[s];
        if (S.reuse_slot < 0) continue;
        // Back to the prefix; the glue stays in the speculative region. The
        // reused rows' logits become q_0..q_{L-1}, the new row's q_L.
        cache.truncate(s, cache.committed(s) - (int)S.spec.tokens.size());
        S.glue_row -= (int)S.spec.tokens.size();
    }
    std::vector<int32_t> ctx;
    int n_branches = 0;
    for (int s : work) {
        Seq& S = seqs_[s];
        S.glue_valid = true;
        const int L = (int)S.spec.tokens.size();
        S.scores.resize((size_t)(L + 1) * vt_);
        S.branches.clear();
        int n_planned = 0;
        for (int k = 0; k <= L; ++k) n_planned += fan_[k];
        const bool room = cache.committed(s) + (L + 1) + n_planned * (K + 1) <= cache.n_ctx();
        for (int k = 0; k <= L; ++k) {
            float* sc = S.scores.data() + (size_t)k * vt_;
            if (S.reuse_slot >= 0 && k < L) {
                row_.assign(S.reuse_scores.begin() + (size_t)k * vt_, S.reuse_scores.begin() + (size_t)(k + 1) * vt_);
            } else {
                widen(result_.row_logits(S.reuse_slot >= 0 ? S.glue_row + L : S.glue_row + k), row_);
            }
            if (opts_.params.repeat_penalty != 1.0f && !(S.reuse_slot >= 0 && k < L)) {
                context_of(S.hist, std::span<const int32_t>(S.spec.tokens.data(), k), keep, ctx);
                sample::apply_repetition_penalty(row_.data(), vt_, ctx, opts_.params);
            }
            std::copy(row_.begin(), row_.end(), sc);
            if (opts_.cfg.force_miss || !room || fan_[k] <= 0) continue;
            top_n(sc, vt_, fan_[k] + 1, top_);
            int taken = 0;
            for (int x : top_) {
                if (taken == fan_[k]) break;
                if (k < L && x == S.spec.tokens[k]) continue;  // rejected token: never the bonus
                Branch b;
                b.k = k;
                b.t = x;
                S.branches.push_back(std::move(b));
                ++taken;
            }
        }
        n_branches += (int)S.branches.size();
    }
    const bool sampling = !opts_.params.greedy();
    int max_branches = 0;
    for (int s : work) max_branches = std::max(max_branches, (int)seqs_[s].branches.size());
    if (n_branches > 0 && use_slots(max_branches)) {
        // Scratch slots: commit the glue in the sequence, then walk the accept
        // points downwards, giving each branch the prefix up to its k.
        for (int s : work) {
            Seq& S = seqs_[s];
            if (S.branches.empty()) continue;
            const int P = cache.committed(s), L = (int)S.spec.tokens.size();
            cache.commit_length(s, L + 1);
            for (size_t i = 0; i < S.branches.size(); ++i) sync_slot(s, branch_slot(s, (int)i), P + S.branches[i].k + 1);
            cache.truncate(s, P);  // the glue stays in the speculative region
            for (size_t i = 0; i < S.branches.size(); ++i) slot_valid_[branch_slot(s, (int)i)] = P + 1;
        }
        for (int j = 1; j <= K; ++j) {
            if (opts_.cfg.interrupt && !inbox_.empty()) {
                ++st_.interrupted;
                break;
            }
            batch_.clear();
            for (int s : work) {
                Seq& S = seqs_[s];
                for (size_t i = 0; i < S.branches.size(); ++i) {
                    const Branch& b = S.branches[i];
                    const int slot = branch_slot(s, (int)i);
                    const int32_t tok = j == 1 ? b.t : b.drafts.back();
                    batch_.add(tok < vd_ ? tok : 0, cache.committed(slot), slot, -1, true);
                }
            }
            forward();
            int row = 0;
            for (int s : work) {
                Seq& S = seqs_[s];
                for (size_t i = 0; i < S.branches.size(); ++i) {
                    Branch& b = S.branches[i];
                    cache.commit_length(branch_slot(s, (int)i), 1);
                    std::vector<int32_t> path(S.spec.tokens.begin(), S.spec.tokens.begin() + b.k);
                    path.push_back(b.t);
                    path.insert(path.end(), b.drafts.begin(), b.drafts.end());
                    context_of(S.hist, path, keep, ctx);
                    const float* logits = result_.row_logits(row++);
                    // Kept for the next glue should this branch hit.
                    widen(logits, row_);
                    if (opts_.params.repeat_penalty != 1.0f)
                        sample::apply_repetition_penalty(row_.data(), vt_, ctx, opts_.params);
                    b.scores.insert(b.scores.end(), row_.begin(), row_.end());
                    int32_t tok = 0;
                    draw(logits, ctx, fan_[j - 1], tok, sampling ? &b.q : nullptr);
                    b.drafts.push_back(tok);
                }
            }
        }
        for (int s : work) seqs_[s].in_slots = true;
        st_.branches += n_branches;
        ++st_.trees;
        st_.tree_s += now_s() - t0;
        return;
    }
    for (int s : work) seqs_[s].in_slots = false;
    // Steps 1..K: every branch's path re-fed after its glue prefix; one new
    // draft per branch per step.
    for (int j = 1; j <= K && n_branches > 0; ++j) {
        if (opts_.cfg.interrupt && !inbox_.empty()) {
            ++st_.interrupted;
            break;
        }
        batch_.clear();
        for (int s : work) {
            Seq& S = seqs_[s];
            if (S.branches.empty()) continue;
            const int L = (int)S.spec.tokens.size();
            const int c = cache.committed(s);
            S.glue_row = batch_.size();
            for (int g = 0; g <= L; ++g) {
                const int32_t tok = g == 0 ? S.spec.root : S.spec.tokens[g - 1];
                batch_.add(tok < vd_ ? tok : 0, c + g, s, g == 0 ? -1 : batch_.size() - 1, false);
            }
            for (Branch& b : S.branches) {
                int prev = S.glue_row + b.k;
                const int pos0 = c + b.k + 1;
                for (int d = 0; d < j; ++d) {
                    const int32_t tok = d == 0 ? b.t : b.drafts[d - 1];
                    prev = batch_.add(tok < vd_ ? tok : 0, pos0 + d, s, prev, d + 1 == j);
                }
                b.last_row = prev;
            }
        }
        forward();
        int row = 0;
        for (int s : work) {
            Seq& S = seqs_[s];
            for (Branch& b : S.branches) {
                std::vector<int32_t> path(S.spec.tokens.begin(), S.spec.tokens.begin() + b.k);
                path.push_back(b.t);
                path.insert(path.end(), b.drafts.begin(), b.drafts.end());
                context_of(S.hist, path, keep, ctx);
                int32_t tok = 0;
                draw(result_.row_logits(row++), ctx, fan_[j - 1], tok, sampling ? &b.q : nullptr);
                b.drafts.push_back(tok);
            }
        }
    }
    st_.branches += n_branches;
    ++st_.trees;
    st_.tree_s += now_s() - t0;
}

}  // namespace specdec::sched
