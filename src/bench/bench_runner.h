// The sweep behind `specdec bench`: every decoding configuration over every
// turn of every conversation, with per-turn records and the AR baseline.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/prompt_set.h"

namespace specdec::bench {

// One point of the sweep. Parameters that do not apply to the method are 0.
struct RunConfig {
    std::string method;     // ar, auto, chain, tree, ngram, ssd; llamacpp-* (external)
    int tree_budget = 0, tree_depth = 0, tree_topk = 0;
    int draft_k = 0;
    int lookup_min = 0;     // chain/tree: prompt lookup first from this suffix length (0: off)
    int ssd_k = 0;          // ssd: speculation length K
    std::string fanout;     // ssd: geometric or uniform
    double saguaro_c = 0;   // ssd: Saguaro C (1 = off)
    bool ssd_remote = false;  // ssd: the draft side is BenchOptions::ssd_remote (another process or host)
    double auto_min_gain = 0;  // auto: the cost model's margin over AR (SpecConfig::auto_min_gain)
    int batch = 1;
    double temp = 0;
    int threads = 0;        // resolved thread count (ssd: target + draft side together)
    bool external = false;  // measured by tools/bench_llamacpp.py
    std::string label() const;
    nlohmann::json to_json() const;
};

struct TurnRecord {
    int config = 0;         // index into BenchResult::configs
    int conv = 0;           // index into BenchResult::conversations
    int turn = 0;           // 0-based
    int batch_id = 0;       // records of one batched run share it (and its times)
    int n_prompt = 0, n_generated = 0;
    double prefill_s = 0, decode_s = 0;   // median over reps
    std::vector<double> rep_decode_s;
    int rounds = 0;         // target (verify) forwards after the prefill
    int emitted = 0;        // tokens those forwards produced (accepted + bonus)
    int drafted = 0, accepted = 0;
    int lookup_rounds = 0;  // sequence-rounds whose tree was a prompt-lookup chain
    std::vector<int> accepted_hist;  // sequence-rounds by draft tokens accepted (SpecStats::accepted_hist)
    int auto_none = 0, auto_draft = 0;  // auto: sequence-rounds without a draft / with a draft-model chain
    double mean_accept_len = 0;  // emitted / rounds (sequence-rounds in a batch)
    double draft_s = 0, tree_s = 0, verify_s = 0, commit_s = 0;
    bool has_ssd = false;   // SSD-only fields below are meaningful
    double ssd_hit_rate = 0, stall_s = 0;
    std::string finish_reason;
    int matches_ar = -1;    // greedy: 1 if the tokens equal the AR baseline's, 0 if not; -1 unknown
    std::string trace_file;
    double speedup = 0;     // tok/s over the AR baseline's tok/s of the same turn (0: none)
    bool shared_prefill = false;  // prefill_s is the turn's one shared target prefill
    double draft_prefill_s = 0;   // shared prefill: the draft's part (0: none or not shared)
    std::vector<int32_t> tokens;  // generated ids (greedy checks across runs and resumes)
    std::string text;             // generated text (the reference answers of a resumed run)
    double tok_s() const { return decode_s > 0 ? n_generated / decode_s : 0.0; }
};

struct BenchResult {
    BenchOptions opts;
    std::vector<Conversation> conversations;
    std::vector<RunConfig> configs;
    std::vector<TurnRecord> records;
    // Prompt tokens per (conv, turn) as every method saw them (for llama.cpp).
    std::vector<std::vector<std::vector<int32_t>>> prompt_tokens;
    std::vector<int32_t> eog_tokens;
    nlohmann::json meta = nlohmann::json::object();
    nlohmann::json unavailable = nlohmann::json::object();  // method -> reason
    nlohmann::json skipped = nlohmann::json::array();       // turns left out, with why
    nlohmann::json micro = nlohmann::json::array();         // AR micro-mode rows
    nlohmann::json llamacpp = nlohmann::json::object();     // raw baseline output
    nlohmann::json fingerprint;         // what a resumed run must match (checkpoint header)
    bool stopped = false;               // --stop-after ended this run before its last unit
    int units_run = 0, units_resumed = 0;  // units of work run now / found in the checkpoint
};

// Progress lines on stderr ("\r" updates on a terminal).
class Progress {
public:
    Progress(int total, bool quiet);
    void step(const std::string& what, double tok_s);
    void note(const std::string& msg);
    void finish();
    void add_total(int n) { total_ += n; }

private:
    int total_, done_ = 0;
    bool quiet_, tty_;
    double t0_;
};

// Methods this build can run; for the others, why not.
bool method_available(const std::string& method, const BenchOptions& o, std::string* why);

// eagle3 (the head's dynamic tree), eagle3-chain and eagle3-auto (auto's
// chains from the head): draft from --eagle3's head.
bool is_eagle3_method(const std::string& m);

// What a resumed run must match: the options that change records, the model
// sha256s and the prompts (r.meta and r.conversations filled).
nlohmann::json run_fingerprint(const BenchResult& r);

// Runs the sweep over the conversations (options already validated): the
// units this shard has not done yet, each appended to the checkpoint when
// done; then fills r.records from every checkpoint in the output directory.
void run_sweep(BenchResult& r);

// The llama.cpp speculative types `--llamacpp-spec` can name (those that
// apply to plain GGUF models: the others need an EAGLE-3 head, MTP layers or a
// DFlash drafter), and the bench method each one's rows carry.
const std::vector<std::string>& llamacpp_spec_types();
std::string llamacpp_spec_method(const std::string& spec_type);  // draft-simple -> llamacpp-draft
// Rows measured by llama.cpp's speculative example: they carry its drafted and
// accepted counts (no rounds).
bool is_llamacpp_spec_method(const std::string& method);

// Runs tools/bench_llamacpp.py on the same model, threads and prompt tokens
// (or the micro-mode workload) and merges its records.
void run_llamacpp(BenchResult& r, const std::string& repo_root);

}  // namespace specdec::bench
