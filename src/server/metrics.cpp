#include "server/metrics.h"

#include <cstdio>

namespace specdec::server {

namespace {
constexpr double kRateWindowS = 10.0;  // tokens/s is measured over the last 10 s

std::string num(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}
void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}
void scalar(std::string& out, const std::string& name, const char* type, const std::string& help, double v) {
    header(out, name, type, help);
    out += name + " " + num(v) + "\n";
}
}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
    size_t i = 0;
    while (i < bounds_.size() && v > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += v;
    ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
    header(out, name, "histogram", help);
    uint64_t cum = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cum += counts_[i];
        out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
    }
    cum += counts_.back();
    out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
    out += name + "_sum " + num(sum_) + "\n";
    out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : latency_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}),
      ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}),
      step_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}) {}

void Metrics::record_request(const std::string& endpoint, int status) {
    std::lock_guard lk(mu_);
    ++requests_[{endpoint, status}];
}

void Metrics::record_generation(double latency_s, double ttft_s, int prompt_tokens, int completion_tokens) {
    std::lock_guard lk(mu_);
    latency_.observe(latency_s);
    if (ttft_s >= 0) ttft_.observe(ttft_s);
    prompt_tokens_ += (uint64_t)prompt_tokens;
    ++completions_;
    (void)completion_tokens;  // counted per step, as they are produced
}

void Metrics::record_decode_step(int rows, int tokens, double seconds) {
    std::lock_guard lk(mu_);
    ++decode_steps_;
    decode_rows_ += (uint64_t)rows;
    decode_tokens_ += (uint64_t)tokens;
    tokens_generated_ += (uint64_t)tokens;
    decode_seconds_ += seconds;
    step_.observe(seconds);
    const auto now = Clock::now();
    recent_.emplace_back(now, tokens);
    while (!recent_.empty() && std::chrono::duration<double>(now - recent_.front().first).count() > kRateWindowS)
        recent_.pop_front();
}

void Metrics::record_ssd(int lookups, int hits, double stall_s) {
    std::lock_guard lk(mu_);
    ssd_lookups_ += (uint64_t)lookups;
    ssd_hits_ += (uint64_t)hits;
    ssd_stall_seconds_ += stall_s;
}

void Metrics::record_prefill(int tokens, double seconds) {
    std::lock_guard lk(mu_);
    prefill_tokens_ += (uint64_t)tokens;
    prefill_seconds_ += seconds;
    // The first generated token comes from the prefill logits.
    ++tokens_generated_;
}

void Metrics::record_method_tokens(const std::string& method, int rows, int tokens, int drafted, int accepted) {
    std::lock_guard lk(mu_);
    MethodCounts& m = methods_[method];
    m.rows += (uint64_t)rows;
    m.tokens += (uint64_t)tokens;
    if (rows > 0) m.decode_tokens += (uint64_t)tokens;
    m.drafted += (uint64_t)drafted;
    m.accepted += (uint64_t)accepted;
}

void Metrics::record_lookup_rounds(const std::string& method, int rows, int accepted) {
    std::lock_guard lk(mu_);
    MethodCounts& m = methods_[method];
    m.lookup_rows += (uint64_t)rows;
    m.lookup_accepted += (uint64_t)accepted;
}

void Metrics::record_spec_times(double draft_s, double verify_s) {
    std::lock_guard lk(mu_);
    draft_seconds_ += draft_s;
    verify_seconds_ += verify_s;
}

void Metrics::record_auto(int none, int lookup, int draft, double predicted_s, double measured_s) {
    std::lock_guard lk(mu_);
    auto_none_ += (uint64_t)none;
    auto_lookup_ += (uint64_t)lookup;
    auto_draft_ += (uint64_t)draft;
    auto_predicted_s_ += predicted_s;
    auto_measured_s_ += measured_s;
}

void Metrics::set_queue_depth(int waiting, int active) {
    std::lock_guard lk(mu_);
    queue_depth_ = waiting;
    if (active >= 0) active_ = active;  // -1: unchanged (HTTP threads do not know it)
}

void Metrics::set_kv_tokens(int target, int draft) {
    std::lock_guard lk(mu_);
    kv_target_ = target;
    kv_draft_ = draft;
}

void Metrics::set_kv_resident_bytes(size_t target, size_t draft) {
    std::lock_guard lk(mu_);
    kv_resident_target_ = target;
    kv_resident_draft_ = draft;
}

uint64_t Metrics::tokens_generated() const {
    std::lock_guard lk(mu_);
    return tokens_generated_;
}

std::string Metrics::render() const {
    std::lock_guard lk(mu_);
    std::string out;
    header(out, "specdec_requests_total", "counter", "HTTP requests by endpoint and status code");
    for (const auto& [key, n] : requests_)
        out += "specdec_requests_total{endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) +
               "\"} " + std::to_string(n) + "\n";
    scalar(out, "specdec_tokens_generated_total", "counter", "Completion tokens generated", (double)tokens_generated_);
    scalar(out, "specdec_prompt_tokens_total", "counter", "Prompt tokens prefilled", (double)prefill_tokens_);
    scalar(out, "specdec_completions_total", "counter", "Generations finished (any reason)", (double)completions_);

    double rate = 0;
    const auto now = Clock::now();
    int window_tokens = 0;
    for (const auto& [t, n] : recent_) {
        if (std::chrono::duration<double>(now - t).count() <= kRateWindowS) window_tokens += n;
    }
    rate = window_tokens / kRateWindowS;
    scalar(out, "specdec_tokens_per_second", "gauge", "Decode tokens per second over the last 10 s", rate);
    scalar(out, "specdec_decode_tokens_per_second_busy", "gauge",
           "Decode tokens per second while decoding (all steps)",
           decode_seconds_ > 0 ? decode_tokens_ / decode_seconds_ : 0.0);
    scalar(out, "specdec_prefill_tokens_per_second", "gauge", "Prefill tokens per second (all prefills)",
           prefill_seconds_ > 0 ? prefill_tokens_ / prefill_seconds_ : 0.0);
    scalar(out, "specdec_mean_accept_length", "gauge",
           "Tokens committed per sequence per target forward (1 for autoregressive decoding)",
           decode_rows_ > 0 ? (double)decode_tokens_ / (double)decode_rows_ : 0.0);
    scalar(out, "specdec_mean_batch_size", "gauge", "Sequences per decode step",
           decode_steps_ > 0 ? (double)decode_rows_ / (double)decode_steps_ : 0.0);
    scalar(out, "specdec_draft_seconds_total", "counter", "Seconds spent drafting (proposers)", draft_seconds_);
    scalar(out, "specdec_verify_seconds_total", "counter",
           "Seconds spent verifying (tree tensors, target forward, verifier, commits)", verify_seconds_);
    // Per method: labels come only from the server's fixed method names.
    const auto per_method = [&](const std::string& name, const char* type, const std::string& help, auto value) {
        header(out, name, type, help);
        for (const auto& [method, m] : methods_) out += name + "{method=\"" + method + "\"} " + num(value(m)) + "\n";
    };
    per_method("specdec_method_tokens_total", "counter", "Completion tokens generated, by speculation method",
               [](const MethodCounts& m) { return (double)m.tokens; });
    per_method("specdec_method_rounds_total", "counter", "Sequence verifications (target forwards per sequence), by method",
               [](const MethodCounts& m) { return (double)m.rows; });
    per_method("specdec_method_drafted_total", "counter", "Draft tokens proposed, by method",
               [](const MethodCounts& m) { return (double)m.drafted; });
    per_method("specdec_method_accepted_total", "counter", "Draft tokens accepted, by method",
               [](const MethodCounts& m) { return (double)m.accepted; });
    per_method("specdec_method_lookup_rounds_total", "counter",
               "Sequence verifications whose draft was a prompt-lookup chain, by method",
               [](const MethodCounts& m) { return (double)m.lookup_rows; });
    per_method("specdec_method_lookup_accepted_total", "counter",
               "Draft tokens accepted from prompt-lookup chains, by method",
               [](const MethodCounts& m) { return (double)m.lookup_accepted; });
    per_method("specdec_method_mean_accept_length", "gauge",
               "Tokens per target forward per sequence, by method (1 for autoregressive decoding)",
               [](const MethodCounts& m) { return m.rows ? (double)m.decode_tokens / (double)m.rows : 0.0; });
    header(out, "specdec_auto_rounds_total", "counter",
           "Sequence-rounds of method auto, by the shape its cost model chose (none: a plain AR step)");
    out += "specdec_auto_rounds_total{shape=\"none\"} " + std::to_string(auto_none_) + "\n";
    out += "specdec_auto_rounds_total{shape=\"lookup\"} " + std::to_string(auto_lookup_) + "\n";
    out += "specdec_auto_rounds_total{shape=\"draft\"} " + std::to_string(auto_draft_) + "\n";
    scalar(out, "specdec_auto_predicted_seconds_total", "counter",
           "Seconds the auto cost model predicted for the rounds it planned (target forward + draft)",
           auto_predicted_s_);
    scalar(out, "specdec_auto_measured_seconds_total", "counter",
           "Seconds those rounds took (target forward + draft), to compare with the prediction", auto_measured_s_);
    scalar(out, "specdec_ssd_hit_rate", "gauge", "SSD speculation cache hit rate over all SSD rounds (0: none yet)",
           ssd_lookups_ > 0 ? (double)ssd_hits_ / (double)ssd_lookups_ : 0.0);
    scalar(out, "specdec_ssd_cache_lookups_total", "counter", "SSD speculation cache lookups (one per sequence-round)",
           (double)ssd_lookups_);
    scalar(out, "specdec_ssd_cache_hits_total", "counter", "SSD speculation cache hits", (double)ssd_hits_);
    scalar(out, "specdec_ssd_stall_seconds_total", "counter", "Seconds the target waited for the SSD draft",
           ssd_stall_seconds_);
    scalar(out, "specdec_queue_depth", "gauge", "Requests waiting for a sequence slot", queue_depth_);
    scalar(out, "specdec_active_sequences", "gauge", "Requests being decoded", active_);
    header(out, "specdec_kv_tokens", "gauge", "KV cache positions committed, all sequences (0 when idle)");
    out += "specdec_kv_tokens{cache=\"target\"} " + std::to_string(kv_target_) + "\n";
    out += "specdec_kv_tokens{cache=\"draft\"} " + std::to_string(kv_draft_) + "\n";
    header(out, "specdec_kv_resident_bytes", "gauge",
           "KV cache bytes in RAM (pages written at least once; never given back)");
    out += "specdec_kv_resident_bytes{cache=\"target\"} " + std::to_string(kv_resident_target_) + "\n";
    out += "specdec_kv_resident_bytes{cache=\"draft\"} " + std::to_string(kv_resident_draft_) + "\n";
    latency_.render(out, "specdec_request_latency_seconds", "End-to-end generation latency");
    ttft_.render(out, "specdec_time_to_first_token_seconds", "Time from arrival to the first generated token");
    step_.render(out, "specdec_decode_step_seconds", "Duration of one batched decode step");
    return out;
}

}  // namespace specdec::server
