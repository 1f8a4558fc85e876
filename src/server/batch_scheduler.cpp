#include "server/batch_scheduler.h"

#include <algorithm>
#include <cstdio>
#include <exception>

#include "core/error.h"
#include "sample/sampler.h"
#include "sched/ssd_proposer.h"
#include "sched/ssd_scheduler.h"
#include "spec/adaptive_proposer.h"

namespace specdec::server {

using Clock = std::chrono::steady_clock;

namespace {
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
}  // namespace

JobEvent JobEvent::failure(int status, std::string message, std::string code) {
    JobEvent ev;
    ev.kind = Failed;
    ev.status = status;
    ev.message = std::move(message);
    ev.code = std::move(code);
    return ev;
}

void JobChannel::push(JobEvent ev) {
    {
        std::lock_guard lk(mu_);
        events_.push_back(std::move(ev));
    }
    cv_.notify_one();
}

std::optional<JobEvent> JobChannel::pop(std::chrono::milliseconds timeout) {
    std::unique_lock lk(mu_);
    if (!cv_.wait_for(lk, timeout, [&] { return !events_.empty(); })) return std::nullopt;
    JobEvent ev = std::move(events_.front());
    events_.pop_front();
    return ev;
}

// One running request. The StopChecker keeps a reference to job->req, so the
// Job lives on the heap and never moves while the sequence runs.
struct BatchScheduler::Active {
    std::unique_ptr<Job> job;
    int seq = -1;
    std::unique_ptr<runtime::StopChecker> stop;
    std::optional<TokenProvenance> prov;  // when the job asked for provenance
    bool done = false;
    Clock::time_point first_token{};
};

namespace {
// Drafts for every request are deterministic (the draft's argmax / top-k,
// never sampled): they draw no random numbers, so a seeded request's tokens do
// not depend on its neighbours, and one proposer serves requests with any
// sampling parameters. The verifier keeps sampled requests exact (deterministic
// drafts are verified as sampling without replacement).
sample::SamplingParams draft_params() {
    sample::SamplingParams p;
    p.temperature = 0.0f;
    return p;
}
}  // namespace

BatchScheduler::BatchScheduler(runtime::Engine& engine, runtime::Engine* draft, SchedulerOptions opts,
                               Metrics& metrics)
    : engine_(engine),
      draft_(draft),
      opts_(opts),
      metrics_(metrics),
      spec_(sched::TargetContext{&engine.model(), &engine.cache(), &engine.pool(), engine.options().prefill_chunk},
            spec::ExecMode::Performance) {
    SPECDEC_CHECK(opts_.max_batch >= 1 && opts_.max_batch <= engine_.cache().n_seq(), "max batch ", opts_.max_batch,
                  " must be in [1, ", engine_.cache().n_seq(), "] (the engine's KV sequences)");
    SPECDEC_CHECK(!draft_ || draft_->cache().n_seq() >= opts_.max_batch, "the draft engine holds ",
                  draft_ ? draft_->cache().n_seq() : 0, " sequences, the batch needs ", opts_.max_batch);
    for (int s = opts_.max_batch - 1; s >= 0; --s) free_seqs_.push_back(s);
    by_slot_.assign(engine_.cache().n_seq(), nullptr);
}

BatchScheduler::~BatchScheduler() { stop(); }

void BatchScheduler::start() { thread_ = std::thread([this] { loop(); }); }

void BatchScheduler::begin_shutdown(Clock::time_point deadline) {
    std::deque<std::unique_ptr<Job>> waiting;
    {
        std::lock_guard lk(mu_);
        if (!shutting_down_) {
            shutting_down_ = true;
            waiting.swap(queue_);
            for (const auto& j : waiting) refused_.push_back(j->id);
        }
        stop_deadline_ = std::min(stop_deadline_, deadline);
    }
    for (auto& j : waiting) j->channel->push(shutdown_failure());
    if (!waiting.empty()) metrics_.set_queue_depth(0, -1);
    cv_.notify_all();
}

bool BatchScheduler::shutting_down() const {
    std::lock_guard lk(mu_);
    return shutting_down_;
}

bool BatchScheduler::stop_now() const {
    std::lock_guard lk(mu_);
    return shutting_down_ && Clock::now() >= stop_deadline_;
}

ShutdownReport BatchScheduler::stop() {
    begin_shutdown(Clock::now());
    if (thread_.joinable()) thread_.join();
    std::lock_guard lk(mu_);
    return ShutdownReport{finished_, cancelled_, refused_};
}

bool BatchScheduler::timed_out(const Job& job, Clock::time_point now) const {
    return opts_.request_timeout_s > 0 && secs(job.arrived, now) > opts_.request_timeout_s;
}

JobEvent BatchScheduler::shutdown_failure() {
    return JobEvent::failure(503, "server is shutting down", "shutting_down");
}

JobEvent BatchScheduler::timeout_failure() const {
    char s[32];
    std::snprintf(s, sizeof s, "%g", opts_.request_timeout_s);
    return JobEvent::failure(504, std::string("the request took longer than this server's limit of ") + s +
                                      " s (--request-timeout)",
                             "request_timeout");
}

BatchScheduler::Submit BatchScheduler::submit(std::unique_ptr<Job> job) {
    int depth = 0;
    {
        std::lock_guard lk(mu_);
        if (shutting_down_) return Submit::Stopped;
        if ((int)queue_.size() >= opts_.max_queue) return Submit::QueueFull;
        queue_.push_back(std::move(job));
        depth = (int)queue_.size();
    }
    metrics_.set_queue_depth(depth, -1);
    cv_.notify_one();
    return Submit::Ok;
}

int BatchScheduler::queue_depth() const {
    std::lock_guard lk(mu_);
    return (int)queue_.size();
}

void BatchScheduler::loop() {
    while (true) {
        std::vector<std::unique_ptr<Active>> fresh;
        std::vector<std::unique_ptr<Job>> expired;
        {
            std::unique_lock lk(mu_);
            // Sleep only when there is nothing to decode.
            cv_.wait(lk, [&] { return shutting_down_ || !queue_.empty() || !active_.empty(); });
            // A shutdown lets the running jobs finish until its deadline.
            if (shutting_down_ && (active_.empty() || Clock::now() >= stop_deadline_)) break;
            if (opts_.request_timeout_s > 0) {
                const auto now = Clock::now();
                for (auto it = queue_.begin(); it != queue_.end();) {
                    if (timed_out(**it, now)) {
                        expired.push_back(std::move(*it));
                        it = queue_.erase(it);
                    } else {
                        ++it;
                    }
                }
            }
            while (!queue_.empty() && !free_seqs_.empty()) {
                auto a = std::make_unique<Active>();
                a->job = std::move(queue_.front());
                queue_.pop_front();
                a->seq = free_seqs_.back();
                free_seqs_.pop_back();
                fresh.push_back(std::move(a));
            }
        }
        for (auto& j : expired) j->channel->push(timeout_failure());
        admit(fresh);
        decode_step();
        // Retire in place; free sequences become available to the next admit.
        const auto now = Clock::now();
        for (auto& a : active_) {
            if (!a->done && a->job->channel->cancelled()) {
                a->done = true;
                a->stop->take_remaining();
            }
            if (!a->done && timed_out(*a->job, now)) fail(*a, timeout_failure());
            // The round ends a sequence whose context is full without a token.
            if (!a->done && a->seq >= 0 && spec_.admitted(a->seq) && !spec_.running(a->seq)) a->done = true;
            if (a->done) retire(*a);
        }
        std::erase_if(active_, [](const auto& a) { return a->seq < 0; });
        metrics_.set_queue_depth(queue_depth(), (int)active_.size());
        report_kv();
    }
    // The shutdown's deadline passed with these still running.
    for (auto& a : active_) {
        if (a->seq < 0) continue;
        cancelled_.push_back(a->job->id);
        fail(*a, shutdown_failure());
    }
    active_.clear();
    metrics_.set_queue_depth(queue_depth(), 0);
    report_kv();
    done_.store(true);
}

void BatchScheduler::report_kv() {
    const auto committed = [](kv::KvCache& c) {
        int n = 0;
        for (int s = 0; s < c.n_seq(); ++s) n += c.committed(s);
        return n;
    };
    metrics_.set_kv_tokens(committed(engine_.cache()), draft_ ? committed(draft_->cache()) : 0);
    // mincore over the whole cache: when idle, and at most once a second while busy.
    const auto now = Clock::now();
    if (active_.empty() || now - kv_resident_at_ >= std::chrono::seconds(1)) {
        kv_resident_at_ = now;
        size_t draft_bytes = draft_ ? draft_->cache().resident_bytes() : 0;
        // The SSD draft sides' own caches count as draft KV. Only their pages:
        // their token counts change on the draft threads (resident_bytes reads
        // nothing those threads write).
        for (auto& [key, e] : methods_)
            if (const sched::SsdProposer* p = e.bundle.ssd)
                if (p->own_cache()) draft_bytes += p->own_cache()->resident_bytes();
        metrics_.set_kv_resident_bytes(engine_.cache().resident_bytes(), draft_bytes);
    }
}

void BatchScheduler::admit(std::vector<std::unique_ptr<Active>>& fresh) {
    for (auto& up : fresh) {
        Active& a = *up;
        active_.push_back(std::move(up));
        by_slot_[a.seq] = &a;
        a.stop = std::make_unique<runtime::StopChecker>(engine_.tokenizer(), a.job->req);
        if (a.job->provenance) a.prov.emplace();
        if (a.job->channel->cancelled()) {
            a.done = true;
            continue;
        }
        try {
            start_sequence(a);
        } catch (const std::exception& e) {
            // A failed prefill only touches its own sequence; others continue.
            fail(a, JobEvent::failure(500, std::string("prefill failed: ") + e.what(), "prefill_failed"));
        }
    }
}

const sched::SlotSpec& BatchScheduler::method_spec(sched::Method m, int draft_k) {
    const bool ssd = m == sched::Method::Ssd;
    const bool uses_k = m == sched::Method::Chain || m == sched::Method::NGram || ssd;
    const int k = uses_k ? (draft_k > 0 ? draft_k : ssd ? opts_.ssd.k : opts_.spec.draft_k) : 0;
    auto it = methods_.find({m, k});
    if (it != methods_.end()) return it->second.spec;
    sched::SpecConfig cfg = opts_.spec;
    cfg.method = m;
    if (uses_k) cfg.draft_k = k;
    MethodEntry e;
    if (ssd) {
        sched::SsdConfig sc = opts_.ssd;
        sc.k = k;
        sc.lookup = sched::lookup_first_options(cfg);
        if (opts_.ssd_remote) {
            e.bundle = sched::make_remote_ssd_proposer(sc, engine_, opts_.ssd_remote, opts_.max_batch, draft_params());
        } else {
            SPECDEC_CHECK(draft_, "ssd needs a draft model");  // parse_request refuses it before
            e.bundle = sched::make_ssd_proposer(sc, engine_, *draft_, opts_.max_batch, draft_params());
        }
    } else {
        e.bundle = sched::make_proposer(cfg, engine_, draft_, draft_params());
    }
    const sched::SchedulerOptions so = sched::scheduler_options(cfg);
    e.spec = sched::SlotSpec{e.bundle.proposer.get(), so.tree_budget, so.tree_depth, so.distinct_siblings};
    return methods_.emplace(std::make_pair(m, k), std::move(e)).first->second.spec;
}

void BatchScheduler::start_sequence(Active& a) {
    const Job& job = *a.job;
    const sched::SlotSpec& spec = method_spec(job.method, job.draft_k);
    const auto t0 = Clock::now();
    spec_.admit(a.seq, job.prompt, spec, job.req.sampling, job.req.max_tokens,
                [this](int slot, int32_t tok, sched::TokenSource src) { return on_token(slot, tok, src); });
    metrics_.record_prefill((int)job.prompt.size(), secs(t0, Clock::now()));
    metrics_.record_method_tokens(sched::method_name(job.method), 0, 1, 0, 0);
}

bool BatchScheduler::on_token(int slot, int32_t tok, sched::TokenSource source) {
    Active& a = *by_slot_[slot];
    if (a.first_token == Clock::time_point{}) a.first_token = Clock::now();
    // Same order as runtime::generate_ar: stop checker, then (in the next
    // round) the context limit.
    a.done = feed(*a.job, *a.stop, a.prov ? &*a.prov : nullptr, tok, source);
    return a.done;
}

bool BatchScheduler::feed(Job& job, runtime::StopChecker& stop, TokenProvenance* prov, int32_t tok,
                          sched::TokenSource source) {
    const size_t n_before = stop.tokens().size();
    const bool done = stop.push(tok);
    // End-of-generation tokens end the text without entering it (nor the usage).
    if (prov && stop.tokens().size() > n_before) prov->add(stop.text().size(), source);
    if (done) return true;
    JobEvent ev;
    ev.text = stop.take_stable_text();
    if (ev.text.empty()) return false;  // the token counts go with the next piece
    if (prov) ev.provenance = prov->take(ev.text);
    job.channel->push(std::move(ev));
    return false;
}

JobEvent BatchScheduler::done_event(const Job& job, runtime::StopChecker& stop, TokenProvenance* prov) {
    JobEvent ev;
    ev.kind = JobEvent::Done;
    ev.text = stop.take_remaining();
    if (prov) ev.provenance = prov->take(ev.text);
    ev.finish_reason = stop.finish_reason();
    ev.n_prompt = (int)job.prompt.size();
    ev.n_generated = (int)stop.tokens().size();
    return ev;
}

void BatchScheduler::decode_step() {
    if (!spec_.any_running()) return;
    sched::StepReport rep;
    try {
        rep = spec_.step([this](int slot, int32_t tok, sched::TokenSource src) { return on_token(slot, tok, src); });
    } catch (const std::exception& e) {
        // Should not happen (trees are sized to the context before they are
        // verified); if it does, fail the sequences of this round, not the server.
        for (auto& a : active_)
            if (!a->done && a->seq >= 0 && spec_.running(a->seq))
                fail(*a, JobEvent::failure(500, std::string("decode failed: ") + e.what(), "decode_failed"));
        return;
    }
    if (rep.rows == 0) return;
    int tokens = 0;
    for (const sched::SlotRound& r : rep.slots) {
        tokens += r.emitted;
        const Active* a = by_slot_[r.slot];
        const std::string method = sched::method_name(a->job->method);
        metrics_.record_method_tokens(method, 1, r.emitted, r.drafted, r.accepted);
        if (r.lookup) metrics_.record_lookup_rounds(method, 1, r.accepted);
    }
    metrics_.record_decode_step(rep.rows, tokens, rep.draft_s + rep.verify_s);
    metrics_.record_spec_times(rep.draft_s, rep.verify_s);
    report_ssd();
    const auto it = methods_.find({sched::Method::Auto, 0});
    if (it != methods_.end())
        if (const auto* ap = dynamic_cast<const spec::AdaptiveProposer*>(it->second.bundle.proposer.get())) {
            const spec::AdaptiveStats d = ap->stats().since(auto_seen_);
            metrics_.record_auto((int)d.rounds_none, (int)d.rounds_lookup, (int)d.rounds_draft, d.predicted_s,
                                 d.measured_s);
            auto_seen_ = ap->stats();
        }
}

void BatchScheduler::report_ssd() {
    for (auto& [key, e] : methods_) {
        if (key.first != sched::Method::Ssd) continue;
        const sched::SsdProposer* p = e.bundle.ssd;
        if (!p) continue;
        const sched::DraftSideStats& now = p->draft_stats();
        if (now.lookups == e.ssd_seen.lookups && p->stall_s() == e.ssd_stall_seen) continue;
        metrics_.record_ssd(now.lookups - e.ssd_seen.lookups, now.hits - e.ssd_seen.hits,
                            p->stall_s() - e.ssd_stall_seen);
        e.ssd_seen = now;
        e.ssd_stall_seen = p->stall_s();
    }
}

void BatchScheduler::retire(Active& a) {
    if (a.seq < 0) return;
    const auto now = Clock::now();
    if (!a.job->channel->cancelled()) {
        a.job->channel->push(done_event(*a.job, *a.stop, a.prov ? &*a.prov : nullptr));
        if (shutting_down()) finished_.push_back(a.job->id);
    }
    const double ttft = a.first_token == Clock::time_point{} ? -1.0 : secs(a.job->arrived, a.first_token);
    metrics_.record_generation(secs(a.job->arrived, now), ttft, (int)a.job->prompt.size(),
                               a.stop ? (int)a.stop->tokens().size() : 0);
    release(a);
}

void BatchScheduler::release(Active& a) {
    if (spec_.admitted(a.seq)) spec_.retire(a.seq);
    else engine_.cache().clear(a.seq);
    by_slot_[a.seq] = nullptr;
    free_seqs_.push_back(a.seq);
    a.seq = -1;
}

void BatchScheduler::fail(Active& a, JobEvent failure) {
    a.job->channel->push(std::move(failure));
    a.done = true;
    if (a.seq >= 0) release(a);
}

}  // namespace specdec::server
