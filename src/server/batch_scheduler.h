// Continuous batching for `specdec serve`.
//
// One scheduler thread owns the engines (target and optional draft). HTTP
// threads submit jobs into a bounded queue and read their results from a
// per-request channel. Between rounds the scheduler admits waiting jobs into
// free KV sequences (prefill, first token, draft prefill), then runs ONE
// speculative round (sched::SpecBatch) for every active sequence: each
// sequence's proposer (its request's method: ar, auto, chain, tree, ngram or
// ssd) drafts a tree, ONE target forward verifies all the trees, and each
// sequence keeps the tokens its own Rng and verifier accept. Sequences that
// stopped, hit max_tokens or the context, or whose client went away are
// retired (target and draft sequences freed). Each sequence sees only its own
// KV prefix, so what one request sends never changes what another one
// generates.
//
// SSD is a proposer like the others: its draft side runs on a thread of its
// own, with a second instance of the draft model and a KV cache of its own
// (sched::make_ssd_proposer), so it builds the next speculations while the
// batch's target forward (and the chain and tree drafts on the draft engine)
// run, without sharing their scratch or their cache. As for every method in
// the batch, SSD's drafts are deterministic (the draft's greedy choices and
// top-ranked bonus guesses); sampled requests stay exact through the
// verifier.
//
// Limits: a job waiting or running longer than request_timeout_s fails with
// 504 (checked between rounds). A shutdown
// (begin_shutdown) refuses new and waiting jobs, gives running ones until a
// deadline to finish, fails the rest, and reports which were which by id.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine.h"
#include "sched/spec_batch.h"
#include "sched/spec_config.h"
#include "sched/ssd_config.h"
#include "sched/ssd_messages.h"
#include "sched/ssd_scheduler.h"
#include "sched/sync_scheduler.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"
#include "server/token_provenance.h"
#include "spec/adaptive_proposer.h"

namespace specdec::server {

struct JobEvent {
    enum Kind { Text, Done, Failed } kind = Text;
    std::string text;           // Text: a stable piece; Done: the unstreamed rest
    Provenance provenance;      // Text, Done: of `text`, when the job asked for it
    std::string finish_reason;  // Done: "stop" or "length"
    int n_prompt = 0, n_generated = 0;
    int status = 500;           // Failed
    std::string message;        // Failed
    std::string code;           // Failed: OpenAI's error code ("request_timeout", "shutting_down", ...)
    static JobEvent failure(int status, std::string message, std::string code);
};

// The scheduler -> handler pipe of one request, plus the handler -> scheduler
// cancellation flag (set when the client disconnects).
class JobChannel {
public:
    void push(JobEvent ev);
    // Waits up to `timeout` for the next event.
    std::optional<JobEvent> pop(std::chrono::milliseconds timeout);
    void cancel() { cancelled_.store(true); }
    bool cancelled() const { return cancelled_.load(); }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<JobEvent> events_;
    std::atomic<bool> cancelled_{false};
};

struct Job {
    std::string id;                 // the response's id (chatcmpl-...), for the shutdown report
    runtime::GenerateRequest req;   // max_tokens already resolved (>= 1)
    std::vector<int32_t> prompt;    // tokenize_request(engine, req), checked to fit
    sched::Method method = sched::Method::AR;  // the request's (or the server's) method
    int draft_k = 0;                // chain/ngram length, ssd K; 0: the server's
    bool provenance = false;        // events carry each token's source (specdec.provenance)
    std::shared_ptr<JobChannel> channel;
    std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();
};

struct SchedulerOptions {
    int max_batch = 4;   // sequences decoded together (the engines must hold that many)
    int max_queue = 16;  // jobs waiting for a sequence; more are refused
    // Server defaults of the speculative options (draft_k, tree shape); each
    // job picks the method (and may override draft_k).
    sched::SpecConfig spec;
    // SSD defaults (K, fan-out, backup, draft threads); used when a job asks
    // for ssd (a job's draft_k overrides K). Its draft side has a cache of its
    // own (max_batch * (1 + fanout_budget) sequences), made at the first ssd job.
    sched::SsdConfig ssd;
    // Set: ssd's draft side is this remote one (`serve --ssd-draft`, a
    // `specdec draft-serve`), not a thread over the draft engine.
    sched::DraftSideFactory ssd_remote;
    // A job still waiting or running this many seconds after it arrived fails
    // with 504 (checked between rounds); 0: no limit.
    double request_timeout_s = 0;
};

// What a shutdown did with the requests it found, by response id.
struct ShutdownReport {
    std::vector<std::string> finished;   // running when it began, finished within the grace
    std::vector<std::string> cancelled;  // still running when the grace ran out: failed (503)
    std::vector<std::string> refused;    // waiting for a sequence when it began: failed (503) at once
};

class BatchScheduler {
public:
    enum class Submit { Ok, QueueFull, Stopped };

    // `draft` (may be null) drafts for chain and tree; jobs asking for those
    // without a draft must be refused before they are submitted.
    using Clock = std::chrono::steady_clock;

    BatchScheduler(runtime::Engine& engine, runtime::Engine* draft, SchedulerOptions opts, Metrics& metrics);
    ~BatchScheduler();
    void start();
    // Graceful stop, from any thread: from now on submit() answers Stopped,
    // the waiting jobs fail (503) at once, and running jobs go on until
    // `deadline`, then fail (503). Called again, it only brings the deadline
    // forward (a second signal: stop now).
    void begin_shutdown(Clock::time_point deadline);
    bool shutting_down() const;
    // The scheduler thread has ended (after begin_shutdown: every job is answered).
    bool done() const { return done_.load(); }
    // begin_shutdown(now) unless begun earlier, joins the thread, and says what
    // became of the requests the shutdown found. Idempotent.
    ShutdownReport stop();
    Submit submit(std::unique_ptr<Job> job);
    int queue_depth() const;

private:
    struct Active;
    // One proposer per (method, draft_k) in use, made on first use and kept.
    struct MethodEntry {
        sched::ProposerBundle bundle;
        sched::SlotSpec spec;
        sched::DraftSideStats ssd_seen;  // ssd: the draft side's counters already in the metrics
        double ssd_stall_seen = 0;
    };
    void loop();
    void admit(std::vector<std::unique_ptr<Active>>& fresh);
    void start_sequence(Active& a);
    void decode_step();
    // Feeds the stop checker, streams text; returns true when the sequence is done.
    bool on_token(int slot, int32_t tok, sched::TokenSource source);
    // One token of a job: the stop checker takes it,
    // the text that became stable goes to the job's channel (with its
    // provenance when `prov` is given). Returns true when the job is done.
    static bool feed(Job& job, runtime::StopChecker& stop, TokenProvenance* prov, int32_t tok,
                     sched::TokenSource source);
    // The job's last event: the rest of its text, finish reason and counts.
    static JobEvent done_event(const Job& job, runtime::StopChecker& stop, TokenProvenance* prov);
    const sched::SlotSpec& method_spec(sched::Method m, int draft_k);
    void retire(Active& a);
    // Frees the sequence slot (target and draft).
    void release(Active& a);
    void fail(Active& a, JobEvent failure);
    // Waited or ran past SchedulerOptions::request_timeout_s.
    bool timed_out(const Job& job, Clock::time_point now) const;
    JobEvent timeout_failure() const;
    static JobEvent shutdown_failure();
    // Past the shutdown's deadline: end every sequence now.
    bool stop_now() const;
    // KV positions committed in the target and draft caches (all sequences),
    // and the bytes of those caches in RAM, for /metrics.
    void report_kv();
    // The SSD proposers' cache lookups, hits and stalls since the last report.
    void report_ssd();

    runtime::Engine& engine_;
    runtime::Engine* draft_;
    SchedulerOptions opts_;
    Metrics& metrics_;

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::unique_ptr<Job>> queue_;
    bool shutting_down_ = false;
    Clock::time_point stop_deadline_ = Clock::time_point::max();
    std::vector<std::string> refused_;  // ShutdownReport::refused
    std::thread thread_;
    std::atomic<bool> done_{false};

    // Owned by the scheduler thread.
    std::vector<std::unique_ptr<Active>> active_;
    std::vector<Active*> by_slot_;  // (n_seq) the active job of each sequence slot
    std::vector<int> free_seqs_;
    sched::SpecBatch spec_;
    std::map<std::pair<sched::Method, int>, MethodEntry> methods_;
    spec::AdaptiveStats auto_seen_;  // the auto proposer's counters already in the metrics
    std::vector<std::string> finished_, cancelled_;  // ShutdownReport's; read after the join
    Clock::time_point kv_resident_at_{};             // report_kv's last mincore
};

}  // namespace specdec::server
