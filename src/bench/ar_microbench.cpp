#include "bench/ar_microbench.h"

#include <algorithm>
#include <chrono>

#include "bench/bandwidth_probe.h"
#include "bench/sys_info.h"
#include "core/clock.h"
#include "core/error.h"
#include "kernels/kernel_choice.h"
#include "runtime/engine.h"

namespace specdec::bench {
namespace {

// A deterministic, ordinary-text workload: a paragraph tokenized and repeated.
std::vector<int32_t> workload(const runtime::Engine& e, int n) {
    static const char* text =
        "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n"
        "    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n"
        "Speculative decoding drafts several tokens with a cheap model and verifies them with the "
        "target model in a single forward pass, keeping the longest accepted prefix. ";
    std::vector<int32_t> base = e.tokenizer().encode(text, false, false);
    SPECDEC_CHECK(!base.empty(), "micro workload tokenized to nothing");
    std::vector<int32_t> out;
    out.reserve(n);
    while ((int)out.size() < n) out.push_back(base[out.size() % base.size()]);
    return out;
}
}  // namespace

void run_ar_micro(BenchResult& r) {
    const BenchOptions& o = r.opts;
    const int P = std::max(1, o.micro_prefill > 0 ? o.micro_prefill : 512);
    const int D = std::max(1, o.micro_decode > 0 ? o.micro_decode : 128);
    std::vector<int> sizes = o.forward_sizes;
    if (sizes.empty()) sizes = {1, 4, 8, 16, 32, 64};
    if (std::find(sizes.begin(), sizes.end(), 1) == sizes.end()) sizes.insert(sizes.begin(), 1);
    const int max_n = *std::max_element(sizes.begin(), sizes.end());
    const int n_ctx = P + std::max(D, max_n) + 16;
    const int reps = std::max(1, o.reps);
    const int freps = std::max(1, o.micro_reps);
    Progress prog((int)o.threads.size() * (2 + 2 * reps + (int)sizes.size() * (freps + 1)), o.quiet);

    for (int threads_opt : o.threads) {
        runtime::EngineOptions eo;
        eo.model_path = o.target_path;
        eo.n_ctx = n_ctx;
        eo.n_seq = 1;
        eo.n_threads = threads_opt;
        auto e = runtime::Engine::load(eo);
        const int threads = (int)e->pool().size();
        const auto toks = workload(*e, P + D);
        if (!r.meta.contains("micro_tokens")) r.meta["micro_tokens"] = toks;
        const std::vector<int32_t> prompt(toks.begin(), toks.begin() + P);
        kv::KvCache& cache = e->cache();
        model::ForwardBatch batch;
        model::ForwardResult out;
        const std::string tag = "ar micro t=" + std::to_string(threads);

        // Which level's tiles each weight type runs, per row bucket (chosen by
        // measurement, kernels/kernel_choice.h; any calibration runs here,
        // before anything is timed).
        nlohmann::json kernels_used = nlohmann::json::object();
        for (TensorType t : model::matmul_weight_types(e->model().weights()))
            kernels_used[std::string(tensor_type_name(t))] = kernels::kernel_choice_summary(t);
        // The read roofline of this thread count, measured before the model
        // runs (a 1 GiB buffer: 32x this machine kind's last-level cache).
        const BandwidthProbe bw = probe_read_bandwidth(e->pool());
        // The probe's and the calibration's buffers are freed: the peak RSS below is the engine's own.
        reset_peak_rss();
        const size_t token_bytes = model::weight_bytes_per_token(e->model().weights(), e->model().config());
        prog.step(tag + " read bandwidth", 0);

        // Warm-up: a short prefill touches every weight page once.
        cache.clear(0);
        e->prefill(0, std::vector<int32_t>(prompt.begin(), prompt.begin() + std::min(P, 16)));
        prog.step(tag + " warm-up", 0);

        std::vector<double> pre, dec;
        for (int rep = 0; rep < reps; ++rep) {
            cache.clear(0);
            double t0 = now_s();
            e->prefill(0, prompt);
            pre.push_back(now_s() - t0);
            prog.step(tag + " prefill " + std::to_string(P), P / pre.back());
            t0 = now_s();
            for (int i = 0; i < D; ++i) {
                batch.clear();
                batch.add(toks[P + i], cache.committed(0), 0, -1, true);
                e->model().forward(batch, cache, e->pool(), out);
                cache.commit_length(0, 1);
            }
            dec.push_back(now_s() - t0);
            prog.step(tag + " decode " + std::to_string(D), D / dec.back());
        }
        const double pre_s = percentile(pre, 50), dec_s = percentile(dec, 50);

        // Verification-like forwards: N rows (a chain, the LM head for every
        // row) after a committed prefix of P tokens, then rolled back. Each row
        // gets its greedy token, what greedy verification reads, so the LM head
        // runs over vocabulary slices (ForwardBatch::argmax_only): the same work
        // as full logits without N x n_vocab floats resident (64 MiB at 64 rows
        // of Gemma 3's 262144-token vocabulary, more than the 20 % the memory
        // target leaves over the model file and KV cache).
        cache.truncate(0, P);
        nlohmann::json fwd = nlohmann::json::array();
        double t1 = 0;
        for (int n : sizes) {
            std::vector<double> ts;
            for (int rep = 0; rep <= freps; ++rep) {  // rep 0: warm-up
                batch.clear();
                std::vector<int32_t> rows(toks.begin() + P, toks.begin() + P + std::min(n, D));
                while ((int)rows.size() < n) rows.push_back(toks[rows.size() % P]);
                batch.add_chain(rows, P, 0, true);
                batch.argmax_only = true;
                const double t0 = now_s();
                e->model().forward(batch, cache, e->pool(), out);
                batch.argmax_only = false;
                const double dt = now_s() - t0;
                cache.commit_length(0, n);
                cache.truncate(0, P);
                if (rep > 0) ts.push_back(dt);
                prog.step(tag + " forward(" + std::to_string(n) + ")", n / dt);
            }
            const double med = percentile(ts, 50);
            if (n == 1) t1 = med;
            fwd.push_back({{"n", n}, {"seconds", med}, {"rep_seconds", ts}, {"ratio", 0.0}});
        }
        for (auto& f : fwd) f["ratio"] = t1 > 0 ? f["seconds"].get<double>() / t1 : 0.0;

        const uint64_t rss = peak_rss_bytes();
        const uint64_t fsz = file_size(o.target_path);
        const uint64_t kvb = cache.bytes();
        r.micro.push_back({{"engine", "specdec"},
                           {"threads", threads},
                           {"prefill_tokens", P},
                           {"prefill_s", pre_s},
                           {"prefill_rep_s", pre},
                           {"prefill_tok_s", P / pre_s},
                           {"decode_tokens", D},
                           {"decode_s", dec_s},
                           {"decode_rep_s", dec},
                           {"decode_tok_s", D / dec_s},
                           {"kernels", kernels_used},
                           {"read_bw_bytes_s", bw.bytes_per_s},
                           {"read_bw_probe_bytes", bw.buffer_bytes},
                           {"weight_bytes_per_token", token_bytes},
                           // decode's share of the roofline: bytes it streams per second over what a plain read reaches
                           {"decode_roofline_fraction", bw.bytes_per_s > 0 ? (double)token_bytes * (D / dec_s) / bw.bytes_per_s : 0.0},
                           {"prefill_chunk", e->options().prefill_chunk},
                           {"forward_logits", "argmax"},  // forward(N): each row's greedy token, sliced LM head
                           {"forward", fwd},
                           {"peak_rss_bytes", rss},
                           {"model_file_bytes", fsz},
                           {"kv_cache_bytes", kvb},
                           {"n_ctx", e->n_ctx()},
                           {"rss_over_file_plus_kv", (double)rss / (double)(fsz + kvb)}});
    }
    prog.finish();
}

}  // namespace specdec::bench
