#include "server/batch_scheduler.h"

#include <cstdio>
#include <exception>

#include "core/error.h"
#include "core/rng.h"
#include "sample/sampler.h"

namespace specdec::server {

using Clock = std::chrono::steady_clock;

namespace {
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
}  // namespace

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
    Rng rng;
    std::vector<int32_t> history;  // prompt + generated: what the repetition penalty sees
    int32_t last = -1;             // sampled, not yet forwarded
    bool done = false;
    Clock::time_point first_token{};
};

BatchScheduler::BatchScheduler(runtime::Engine& engine, SchedulerOptions opts, Metrics& metrics)
    : engine_(engine), opts_(opts), metrics_(metrics) {
    SPECDEC_CHECK(opts_.max_batch >= 1 && opts_.max_batch <= engine_.cache().n_seq(), "max batch ", opts_.max_batch,
                  " must be in [1, ", engine_.cache().n_seq(), "] (the engine's KV sequences)");
    for (int s = opts_.max_batch - 1; s >= 0; --s) free_seqs_.push_back(s);
}

BatchScheduler::~BatchScheduler() { stop(); }

void BatchScheduler::start() { thread_ = std::thread([this] { loop(); }); }

void BatchScheduler::stop() {
    {
        std::lock_guard lk(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard lk(mu_);
    for (auto& j : queue_) j->channel->push({JobEvent::Failed, "", "", 0, 0, 503, "server is shutting down"});
    queue_.clear();
}

BatchScheduler::Submit BatchScheduler::submit(std::unique_ptr<Job> job) {
    int depth = 0;
    {
        std::lock_guard lk(mu_);
        if (stopping_) return Submit::Stopped;
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
        {
            std::unique_lock lk(mu_);
            // Sleep only when there is nothing to decode.
            cv_.wait(lk, [&] { return stopping_ || !queue_.empty() || !active_.empty(); });
            if (stopping_) break;
            while (!queue_.empty() && !free_seqs_.empty()) {
                auto a = std::make_unique<Active>();
                a->job = std::move(queue_.front());
                queue_.pop_front();
                a->seq = free_seqs_.back();
                free_seqs_.pop_back();
                fresh.push_back(std::move(a));
            }
        }
        admit(fresh);
        decode_step();
        // Retire in place; free sequences become available to the next admit.
        for (auto& a : active_) {
            if (!a->done && a->job->channel->cancelled()) {
                a->done = true;
                a->stop->take_remaining();
            }
            if (a->done) retire(*a);
        }
        std::erase_if(active_, [](const auto& a) { return a->seq < 0; });
        metrics_.set_queue_depth(queue_depth(), (int)active_.size());
    }
    for (auto& a : active_) fail(*a, 503, "server is shutting down");
    active_.clear();
}

void BatchScheduler::admit(std::vector<std::unique_ptr<Active>>& fresh) {
    for (auto& up : fresh) {
        Active& a = *up;
        active_.push_back(std::move(up));
        if (a.job->channel->cancelled()) {
            a.done = true;
            a.stop = std::make_unique<runtime::StopChecker>(engine_.tokenizer(), a.job->req);
            continue;
        }
        try {
            start_sequence(a);
        } catch (const std::exception& e) {
            // A failed prefill only touches its own sequence; others continue.
            fail(a, 500, std::string("prefill failed: ") + e.what());
        }
    }
}

void BatchScheduler::start_sequence(Active& a) {
    const Job& job = *a.job;
    a.rng.reseed(job.req.sampling.seed);
    a.history = job.prompt;
    a.stop = std::make_unique<runtime::StopChecker>(engine_.tokenizer(), job.req);
    engine_.cache().clear(a.seq);
    const auto t0 = Clock::now();
    const float* logits = engine_.prefill(a.seq, job.prompt);
    metrics_.record_prefill((int)job.prompt.size(), secs(t0, Clock::now()));
    on_logits(a, logits);
}

void BatchScheduler::on_logits(Active& a, const float* logits) {
    const int n_vocab = engine_.config().n_vocab;
    const int32_t tok = sample::sample_token(logits, n_vocab, a.history, a.job->req.sampling, a.rng, scratch_);
    if (a.first_token == Clock::time_point{}) a.first_token = Clock::now();
    a.history.push_back(tok);
    a.last = tok;
    // Same order as runtime::generate_ar: stop checker, then the context limit.
    a.done = a.stop->push(tok);
    if (!a.done) {
        std::string piece = a.stop->take_stable_text();
        if (!piece.empty()) {
            JobEvent ev;
            ev.text = std::move(piece);
            a.job->channel->push(std::move(ev));
        }
        if (engine_.cache().committed(a.seq) + 1 > engine_.n_ctx()) a.done = true;
    }
}

void BatchScheduler::decode_step() {
    batch_.clear();
    std::vector<Active*> rows;
    for (auto& a : active_) {
        if (a->done || a->seq < 0 || a->job->channel->cancelled()) continue;
        batch_.add(a->last, engine_.cache().committed(a->seq), a->seq, -1, true);
        rows.push_back(a.get());
    }
    if (rows.empty()) return;
    const auto t0 = Clock::now();
    try {
        engine_.model().forward(batch_, engine_.cache(), engine_.pool(), result_);
    } catch (const std::exception& e) {
        // Should not happen (rows are checked against the context before they
        // are added); if it does, fail the rows of this step, not the server.
        for (Active* a : rows) fail(*a, 500, std::string("decode failed: ") + e.what());
        return;
    }
    for (size_t k = 0; k < rows.size(); ++k) {
        engine_.cache().commit_length(rows[k]->seq, 1);
        on_logits(*rows[k], result_.row_logits(k));
    }
    metrics_.record_decode_step((int)rows.size(), (int)rows.size(), secs(t0, Clock::now()));
}

void BatchScheduler::retire(Active& a) {
    if (a.seq < 0) return;
    const auto now = Clock::now();
    if (!a.job->channel->cancelled()) {
        JobEvent ev;
        ev.kind = JobEvent::Done;
        ev.text = a.stop->take_remaining();
        ev.finish_reason = a.stop->finish_reason();
        ev.n_prompt = (int)a.job->prompt.size();
        ev.n_generated = (int)a.stop->tokens().size();
        a.job->channel->push(std::move(ev));
    }
    const double ttft = a.first_token == Clock::time_point{} ? -1.0 : secs(a.job->arrived, a.first_token);
    metrics_.record_generation(secs(a.job->arrived, now), ttft, (int)a.job->prompt.size(),
                               a.stop ? (int)a.stop->tokens().size() : 0);
    engine_.cache().clear(a.seq);
    free_seqs_.push_back(a.seq);
    a.seq = -1;
}

void BatchScheduler::fail(Active& a, int status, const std::string& msg) {
    a.job->channel->push({JobEvent::Failed, "", "", 0, 0, status, msg});
    a.done = true;
    if (a.seq >= 0) {
        engine_.cache().clear(a.seq);
        free_seqs_.push_back(a.seq);
        a.seq = -1;
    }
}

}  // namespace specdec::server
