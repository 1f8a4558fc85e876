// SSD cohorts of the server's BatchScheduler (see batch_scheduler.h): SSD runs
// its own loop (sched::SsdScheduler) with a draft thread and a speculation
// cache, so a cohort of SSD jobs is decoded to the end while the continuous
// batch is empty, then the batch resumes.
#include <algorithm>
#include <exception>
#include <optional>

#include "core/error.h"
#include "sched/ssd_scheduler.h"
#include "server/batch_scheduler.h"

namespace specdec::server {

using Clock = std::chrono::steady_clock;

namespace {
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// One SsdScheduler::run shares one set of sampling parameters and one random
// stream. Greedy jobs draw no random numbers, so they share a run when their
// penalties agree; a sampled job runs alone, so that its seed reproduces.
bool can_share(const Job& a, const Job& b, int k_a, int k_b) {
    const sample::SamplingParams& p = a.req.sampling;
    const sample::SamplingParams& q = b.req.sampling;
    return p.greedy() && q.greedy() && k_a == k_b && p.repeat_penalty == q.repeat_penalty &&
           p.repeat_last_n == q.repeat_last_n;
}

// A cohort member: the StopChecker holds a reference to job->req.
struct Member {
    std::unique_ptr<Job> job;
    std::unique_ptr<runtime::StopChecker> stop;
    std::optional<TokenProvenance> prov;  // when the job asked for provenance
    Clock::time_point first_token{};
    bool started = false;  // got its first token (prefill done)
    bool ended = false;    // the stop checker, the context or a cancellation ended it
    std::optional<JobEvent> failure;  // ended by the request timeout or the shutdown
};
}  // namespace

std::vector<std::unique_ptr<Job>> BatchScheduler::take_ssd_cohort() {
    const auto k_of = [&](const Job& j) { return j.draft_k > 0 ? j.draft_k : opts_.ssd.k; };
    std::vector<std::unique_ptr<Job>> cohort;
    cohort.push_back(std::move(queue_.front()));
    queue_.pop_front();
    const Job& head = *cohort.front();
    for (auto it = queue_.begin(); it != queue_.end() && (int)cohort.size() < opts_.max_batch;) {
        if ((*it)->method == sched::Method::Ssd && can_share(head, **it, k_of(head), k_of(**it))) {
            cohort.push_back(std::move(*it));
            it = queue_.erase(it);
        } else {
            ++it;
        }
    }
    return cohort;
}

void BatchScheduler::run_ssd_cohort(std::vector<std::unique_ptr<Job>> jobs) {
    std::vector<Member> m;
    for (auto& j : jobs) {
        // Gone before it started: nothing to answer.
        if (j->channel->cancelled()) {
            metrics_.record_generation(secs(j->arrived, Clock::now()), -1.0, (int)j->prompt.size(), 0);
            continue;
        }
        if (!draft_) {  // parse_request refuses ssd without a draft; never reached
            j->channel->push(JobEvent::failure(400, "ssd needs a draft model", "draft_model_required"));
            continue;
        }
        Member x;
        x.job = std::move(j);
        x.stop = std::make_unique<runtime::StopChecker>(engine_.tokenizer(), x.job->req);
        if (x.job->provenance) x.prov.emplace();
        m.push_back(std::move(x));
    }
    if (m.empty()) return;
    const int B = (int)m.size();
    metrics_.set_queue_depth(queue_depth(), B);

    sched::SsdConfig cfg = opts_.ssd;
    if (m[0].job->draft_k > 0) cfg.k = m[0].job->draft_k;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<int> max_new;
    for (const Member& x : m) {
        prompts.push_back(x.job->prompt);
        max_new.push_back(x.job->req.max_tokens);
    }
    const sched::TargetContext tc{&engine_.model(), &engine_.cache(), &engine_.pool(),
                                  engine_.options().prefill_chunk};
    const sched::DraftContext dc{&draft_->model(), &draft_->cache(), draft_->options().prefill_chunk};

    // Called on this thread as tokens are verified. Returning true ends that
    // sequence: its stop checker ended it, its client went away, it ran out
    // of time, or the shutdown's deadline passed (the others keep going).
    const auto on_token = [&](int i, int32_t tok, sched::TokenSource source) {
        Member& x = m[i];
        const auto now = Clock::now();
        if (!x.started) {
            x.started = true;
            x.first_token = now;
        }
        if (timed_out(*x.job, now))
            x.failure = timeout_failure();
        else if (stop_now())
            x.failure = shutdown_failure();
        if (x.failure || x.job->channel->cancelled()) {
            x.ended = true;
            return true;
        }
        x.ended = feed(*x.job, *x.stop, x.prov ? &*x.prov : nullptr, tok, source);
        return x.ended;
    };

    sched::SsdStats st;
    std::string error;
    try {
        sched::SsdScheduler sch(tc, dc, m[0].job->req.sampling, cfg);
        sch.run(prompts, max_new, on_token, st);
    } catch (const std::exception& e) {
        error = std::string("ssd decode failed: ") + e.what();
    }
    // The next admissions start from clean sequences (the chain and tree
    // proposers also reset their draft sequence when a slot is admitted).
    for (int s = 0; s < B; ++s) engine_.cache().clear(s);
    for (int s = 0; s < draft_->cache().n_seq(); ++s) draft_->cache().clear(s);

    const bool shutdown = shutting_down();
    const auto now = Clock::now();
    int tokens = 0;
    for (Member& x : m) {
        const int n_gen = (int)x.stop->tokens().size();
        tokens += n_gen;
        if (!error.empty()) {
            x.job->channel->push(JobEvent::failure(500, error, "decode_failed"));
        } else if (x.job->channel->cancelled()) {
            // Its client went away: nothing to answer.
        } else if (x.failure) {
            if (x.failure->status == 503) cancelled_.push_back(x.job->id);
            x.job->channel->push(std::move(*x.failure));
        } else {
            x.job->channel->push(done_event(*x.job, *x.stop, x.prov ? &*x.prov : nullptr));
            if (shutdown) finished_.push_back(x.job->id);
        }
        const double ttft = x.started ? secs(x.job->arrived, x.first_token) : -1.0;
        metrics_.record_generation(secs(x.job->arrived, now), ttft, (int)x.job->prompt.size(), n_gen);
        if (x.started) {
            // The first token of each sequence comes from its prefill.
            metrics_.record_prefill((int)x.job->prompt.size(), st.spec.prefill_s / B);
            metrics_.record_method_tokens("ssd", 0, 1, 0, 0);
        }
    }
    const int started = (int)std::count_if(m.begin(), m.end(), [](const Member& x) { return x.started; });
    const int decoded = std::max(0, tokens - started);
    metrics_.record_method_tokens("ssd", st.spec.seq_rounds, decoded, st.spec.drafted, st.spec.accepted);
    metrics_.record_decode_rounds(st.spec.rounds, st.spec.seq_rounds, decoded, st.spec.decode_s);
    metrics_.record_spec_times(st.stall_s, st.spec.verify_s);
    metrics_.record_ssd(st.draft.lookups, st.draft.hits, st.stall_s);
}

}  // namespace specdec::server
