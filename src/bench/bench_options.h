// Options of `specdec bench` and the small helpers that turn them into a sweep.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sched/spec_config.h"
#include "sched/ssd_scheduler.h"

namespace specdec::bench {

struct BenchOptions {
    // Models.
    std::string target, draft;          // as given (path or manifest name)
    std::string target_path, draft_path;  // resolved
    // Self-speculation (--draft-layers L|LIST|auto): the draft is the target
    // running only these layers (draft_path == target_path).
    std::string draft_layers;
    std::vector<int> draft_keep_layers;
    // EAGLE-3 head (--eagle3 HEAD) for the methods eagle3 (its dynamic tree),
    // eagle3-chain and eagle3-auto, beside -d's draft-model chain, tree and
    // auto in one run (without -d, auto drafts with the head too).
    std::string eagle3;
    // Sweeps (comma-separated on the command line).
    std::vector<std::string> methods{"ar"};
    std::vector<int> tree_budget{16};
    std::vector<int> tree_depth{5};
    std::vector<int> tree_topk{4};
    int tree_width = 0;                 // tree frontier width (0: top-k; 1: one-row draft forwards)
    std::vector<int> draft_k{5};
    std::vector<double> auto_min_gain{sched::SpecConfig{}.auto_min_gain};  // auto: margins over AR, one config each
    std::vector<int> lookup_min{0};     // chain/tree: prompt lookup first (0: off; see LookupFirstProposer)
    std::vector<int> batch{1};
    std::vector<double> temp{0.0};
    std::vector<int> threads{0};        // 0: all cores
    // SSD (issue #6): speculation length, fan-out kind, Saguaro C (swept), and
    // the fixed options. Threads: the draft side takes draft_threads of each
    // thread count, the target the rest (at least 1), so SSD uses the same
    // cores as the other methods of that row.
    std::vector<int> ssd_k{4};
    std::vector<std::string> fanout{"geometric"};
    std::vector<double> saguaro_c{1.0};
    int fanout_budget = 8;
    std::string ssd_backup = "auto";
    int draft_threads = 1;
    // --ssd-draft: the ssd configurations draft on this remote side (a
    // `specdec draft-serve` at ssd_remote_addr) instead of a thread beside the
    // target; the app makes the link (the bench library needs no transport).
    std::string ssd_remote_addr;
    sched::DraftSideFactory ssd_remote;
    // Repetition.
    int warmup = 1;
    int reps = 1;
    // Prompts.
    std::string prompts_file;           // JSONL of {"id","set","turns"}
    std::vector<std::string> sets;      // humaneval, sharegpt (via tools/prompts.py)
    int limit = 0;                      // conversations per set (0: all)
    int max_turns = 0;                  // turns per conversation (0: all)
    bool chat = false;
    std::string system;
    int n_predict = 128;                // max new tokens per turn
    bool ignore_eos = false;
    int max_prompt_tokens = 0;          // skip turns whose prompt is longer (0: what fits the context)
    int n_ctx = 4096;
    uint64_t seed = 0;
    int ngram_min = 1, ngram_max = 3;
    // Draft vocabulary subset for chain and tree (0: off): the N most frequent
    // target tokens of vocab_corpus, cached in vocab_subset_file.
    int vocab_subset = 0;
    std::string vocab_subset_file, vocab_corpus;
    std::string mode = "performance";
    std::string trace_dir;              // per-turn traces of the speculative methods
    bool skip_unavailable = false;
    // Run order and resumption (prompt-set mode).
    // "turn": every configuration of a group runs back to back on each turn
    // (paired: a turn's speedup compares runs seconds apart), from one shared
    // prefill of the turn's prompt; "config": each configuration over every
    // turn, each run prefilling for itself (the older order).
    std::string order = "turn";
    bool shared_prefill = true;         // turn order: prefill each turn once for all configurations
    bool resume = false;                // skip the units OUT/checkpoint*.jsonl already holds
    int shard_i = 0, shard_n = 1;       // run only conversations with index % shard_n == shard_i
    int stop_after = 0;                 // stop after this many units of work (0: run to the end)
    std::string protocol;               // named preset that filled the options ("eagle")
    // AR micro-mode (issue #4).
    int micro_prefill = 0;
    int micro_decode = 0;
    std::vector<int> forward_sizes;
    int micro_reps = 5;
    // Output.
    std::string out_dir = "bench-out";
    bool llamacpp = false;
    std::vector<std::string> llamacpp_spec;  // llama.cpp speculative types (llamacpp_spec_types())
    bool plots = false;
    bool quiet = false;
    std::vector<std::string> argv;      // the command line, for the record

    bool micro() const { return micro_prefill > 0 || micro_decode > 0 || !forward_sizes.empty(); }
};

// "1,2,4" -> {1,2,4}; throws specdec::Error naming `what` on a bad item.
std::vector<int> parse_int_list(const std::string& s, const std::string& what);
std::vector<double> parse_double_list(const std::string& s, const std::string& what);
std::vector<std::string> parse_string_list(const std::string& s);

// Linear-interpolated percentile (numpy's default), q in [0, 100]; 0 for empty input.
double percentile(std::vector<double> v, double q);
double mean(const std::vector<double>& v);

}  // namespace specdec::bench
