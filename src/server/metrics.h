// Server metrics in Prometheus text exposition format (GET /metrics).
// Written by the HTTP threads (request outcomes) and the scheduler thread
// (decode steps); one mutex is enough at these rates (a few updates per step).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace specdec::server {

// Cumulative histogram with fixed upper bounds (seconds).
class Histogram {
public:
    explicit Histogram(std::vector<double> bounds);
    void observe(double v);
    // Appends "<name>_bucket{le=..}", "_sum" and "_count" lines.
    void render(std::string& out, const std::string& name, const std::string& help) const;
    uint64_t count() const { return count_; }

private:
    std::vector<double> bounds_;
    std::vector<uint64_t> counts_;  // per bucket, not cumulative; last is +Inf
    double sum_ = 0;
    uint64_t count_ = 0;
};

class Metrics {
public:
    using Clock = std::chrono::steady_clock;
    Metrics();

    // A finished HTTP request (any endpoint, any status).
    void record_request(const std::string& endpoint, int status);
    // A finished generation: end-to-end latency and time to first token.
    void record_generation(double latency_s, double ttft_s, int prompt_tokens, int completion_tokens);
    // One target forward that decoded `rows` sequences and committed `tokens`
    // new tokens among them (AR: tokens == rows, so mean accept length is 1).
    void record_decode_step(int rows, int tokens, double seconds);
    void record_prefill(int tokens, double seconds);
    // SSD since the last report: speculation-cache lookups and hits, and the
    // seconds the target waited for the draft.
    void record_ssd(int lookups, int hits, double stall_s);
    // Per speculation method: `rows` sequence-rounds (target verifications of
    // one sequence) that produced `tokens`, with `drafted` draft nodes of which
    // `accepted` were accepted. A first token (from the prefill) is rows 0, tokens 1.
    void record_method_tokens(const std::string& method, int rows, int tokens, int drafted, int accepted);
    // Of those, `rows` sequence-rounds whose tree was a prompt-lookup chain
    // (--lookup-min, or the n-gram method), with `accepted` tokens accepted.
    void record_lookup_rounds(const std::string& method, int rows, int accepted);
    // Seconds of one round spent in the proposers and in verification (tree
    // tensors, the target forward, the verifier, commits).
    void record_spec_times(double draft_s, double verify_s);
    // Auto (--method auto): sequence-rounds by the shape the cost model chose,
    // and its predicted against the measured seconds of those rounds.
    void record_auto(int none, int lookup, int draft, double predicted_s, double measured_s);
    void set_queue_depth(int waiting, int active);
    // KV positions committed over all sequences of the target and draft caches
    // (0 when idle: a finished request frees its sequences).
    void set_kv_tokens(int target, int draft);
    // Bytes of the two KV caches in RAM (kv::KvCache::resident_bytes): they
    // only grow, as a load writes slots no request wrote before.
    void set_kv_resident_bytes(size_t target, size_t draft);

    // Prometheus text; `now` decides the tokens/s window.
    std::string render() const;
    uint64_t tokens_generated() const;

private:
    mutable std::mutex mu_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;
    uint64_t tokens_generated_ = 0, prompt_tokens_ = 0, completions_ = 0;
    uint64_t decode_steps_ = 0, decode_rows_ = 0, decode_tokens_ = 0;
    double decode_seconds_ = 0, prefill_seconds_ = 0;
    uint64_t prefill_tokens_ = 0;
    int queue_depth_ = 0, active_ = 0;
    int kv_target_ = 0, kv_draft_ = 0;
    size_t kv_resident_target_ = 0, kv_resident_draft_ = 0;
    struct MethodCounts {
        uint64_t rows = 0, tokens = 0, decode_tokens = 0, drafted = 0, accepted = 0;
        uint64_t lookup_rows = 0, lookup_accepted = 0;
    };
    std::map<std::string, MethodCounts> methods_;
    double draft_seconds_ = 0, verify_seconds_ = 0;
    uint64_t auto_none_ = 0, auto_lookup_ = 0, auto_draft_ = 0;
    double auto_predicted_s_ = 0, auto_measured_s_ = 0;
    uint64_t ssd_lookups_ = 0, ssd_hits_ = 0;
    double ssd_stall_seconds_ = 0;
    // Recent decode steps (time, tokens) for a windowed tokens/s gauge.
    std::deque<std::pair<Clock::time_point, int>> recent_;
    Histogram latency_, ttft_, step_;
};

}  // namespace specdec::server
