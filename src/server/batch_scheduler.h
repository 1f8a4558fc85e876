// Continuous batching for `specdec serve`.
//
// One scheduler thread owns the Engine. HTTP threads submit jobs into a
// bounded queue and read their results from a per-request channel. Between
// decode steps the scheduler admits waiting jobs into free KV sequences
// (prefill, first token), then runs ONE transformer forward holding one row per
// active sequence, commits each row, samples each sequence with its own Rng,
// and retires sequences that stopped, hit max_tokens or the context, or whose
// client went away. Each sequence sees only its own KV prefix, so what one
// request sends never changes what another one generates.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine.h"
#include "server/metrics.h"

namespace specdec::server {

struct JobEvent {
    enum Kind { Text, Done, Failed } kind = Text;
    std::string text;           // Text: a stable piece; Done: the unstreamed rest
    std::string finish_reason;  // Done: "stop" or "length"
    int n_prompt = 0, n_generated = 0;
    int status = 500;           // Failed
    std::string message;        // Failed
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
    runtime::GenerateRequest req;   // max_tokens already resolved (>= 1)
    std::vector<int32_t> prompt;    // tokenize_request(engine, req), checked to fit
    std::shared_ptr<JobChannel> channel;
    std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();
};

struct SchedulerOptions {
    int max_batch = 4;   // sequences decoded together (the engine must hold that many)
    int max_queue = 16;  // jobs waiting for a sequence; more are refused
};

class BatchScheduler {
public:
    enum class Submit { Ok, QueueFull, Stopped };

    BatchScheduler(runtime::Engine& engine, SchedulerOptions opts, Metrics& metrics);
    ~BatchScheduler();
    void start();
    // Fails every waiting and running job (503) and joins the thread.
    void stop();
    Submit submit(std::unique_ptr<Job> job);
    int queue_depth() const;

private:
    struct Active;
    void loop();
    void admit(std::vector<std::unique_ptr<Active>>& fresh);
    void start_sequence(Active& a);
    void decode_step();
    // Samples from `logits`, feeds the stop checker, streams text; marks done.
    void on_logits(Active& a, const float* logits);
    void retire(Active& a);
    void fail(Active& a, int status, const std::string& msg);

    runtime::Engine& engine_;
    SchedulerOptions opts_;
    Metrics& metrics_;

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::unique_ptr<Job>> queue_;
    bool stopping_ = false;
    std::thread thread_;

    // Owned by the scheduler thread.
    std::vector<std::unique_ptr<Active>> active_;
    std::vector<int> free_seqs_;
    model::ForwardBatch batch_;
    model::ForwardResult result_;
    std::vector<float> scratch_;
};

}  // namespace specdec::server
