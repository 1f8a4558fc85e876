// Options of speculative speculative decoding (SSD / Saguaro): the draft runs
// asynchronously on its own thread and pre-builds the next speculation for the
// likeliest verification outcomes while the target verifies the current one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "spec/lookup_first_proposer.h"

namespace specdec::sched {

// How the branch budget is split over the accept points k = 0..K.
enum class FanoutKind { Geometric, Uniform };

// What proposes the next speculation when the cache misses.
enum class BackupKind {
    Auto,    // JIT at small batch, n-gram past the measured switch point b*
    Jit,     // the same draft drafts K tokens now (the target waits)
    Ngram,   // prompt lookup: deterministic, q a point mass
    Random,  // uniform random tokens, q uniform
};

inline FanoutKind parse_fanout(const std::string& s) {
    if (s == "geometric") return FanoutKind::Geometric;
    if (s == "uniform") return FanoutKind::Uniform;
    throw Error("unknown fan-out '" + s + "' (expected geometric or uniform)");
}
inline const char* fanout_name(FanoutKind f) { return f == FanoutKind::Geometric ? "geometric" : "uniform"; }

inline BackupKind parse_backup(const std::string& s) {
    if (s == "auto") return BackupKind::Auto;
    if (s == "jit") return BackupKind::Jit;
    if (s == "ngram") return BackupKind::Ngram;
    if (s == "random") return BackupKind::Random;
    throw Error("unknown backup '" + s + "' (expected auto, jit, ngram or random)");
}
inline const char* backup_name(BackupKind b) {
    switch (b) {
        case BackupKind::Auto: return "auto";
        case BackupKind::Jit: return "jit";
        case BackupKind::Ngram: return "ngram";
        case BackupKind::Random: return "random";
    }
    return "?";
}

struct SsdConfig {
    int k = 4;                  // speculation length K
    FanoutKind fanout = FanoutKind::Geometric;
    int fanout_budget = 8;      // B: bonus branches per sequence and round (sum of F_k)
    // C: the cached bonus guesses' draft probability times C, renormalised
    // (1 = off). C < 1 (the design's range) concentrates the target's residual
    // on cached tokens; C > 1 is allowed for ablation (drafts favour them).
    float saguaro_c = 1.0f;
    static constexpr float kMaxSaguaroC = 16.0f;  // every command's --saguaro-c bound
    BackupKind backup = BackupKind::Auto;
    int ngram_min = 1, ngram_max = 3;
    // Draft side: threads of its own pool (the worker thread is one of them),
    // optionally pinned to CPUs (worker i on draft_pin_cpus[i % size]).
    int draft_threads = 1;
    std::vector<int> draft_pin_cpus;
    // Niceness added to the draft side's threads (0: the target's priority).
    // With more threads than cores (target T + draft D > cores) a positive
    // value makes the draft yield the cores to the target's verification and
    // run in the gaps (sampling, messages, the target's stalls).
    int draft_nice = 0;
    // Target side: 0 runs it on the target engine's pool; > 0 on a pool of
    // this many threads of its own (the bench splits one thread count between
    // the two sides without reloading the target).
    int target_threads = 0;
    // Stop building the speculation cache as soon as the target's outcome
    // arrives and answer from the branches built so far (shorter hits instead
    // of a stall). Off: the tree is always finished first (deterministic).
    bool interrupt = true;
    // Testing and ablation: ignore the cache (every round takes the backup).
    bool force_miss = false;
    uint64_t draft_seed = 0x55d;  // the draft's own random stream (xor the request seed)
    // The draft proposes only the N most frequent target tokens and computes
    // its LM head over those rows only (0: off); the subset is read from
    // vocab_subset_path, or built from vocab_corpus_path and saved there.
    int vocab_subset_n = 0;
    std::string vocab_subset_path, vocab_corpus_path;
    std::string trace_path;       // "": no round trace (sched/ssd_trace.h)
    // A remote draft side (draft-serve at this address; "": the in-process
    // thread). Recorded in traces; the link itself is made above this layer.
    std::string remote_draft;
    // Remote draft side: how long the target waits for a round's reply
    // before it drafts the round locally, plus, in a round that carries
    // Begins (the first, or a resync after a fault), this much per token the
    // draft has to prefill (a 0.5B draft reads ~100-200 tokens/s on a core).
    int link_timeout_ms = 1000;
    double link_prefill_ms_per_token = 10.0;
    // Target side: prompt lookup first (spec/lookup_first_proposer.h): a
    // sequence whose history ends with an earlier n-gram of at least
    // lookup.min_n tokens takes that continuation as its round's chain and
    // the draft side is not asked (min_n 0: off). The draft side is begun
    // again from the sequence's history when it drafts for it next.
    spec::LookupFirstOptions lookup{0, 3, 4};

    void validate() const {
        SPECDEC_CHECK(k >= 1 && k <= 64, "--ssd-k must be in [1, 64], got ", k);
        SPECDEC_CHECK(fanout_budget >= 0 && fanout_budget <= 256, "--fanout-budget must be in [0, 256], got ",
                      fanout_budget);
        SPECDEC_CHECK(saguaro_c >= 0.0f && saguaro_c <= kMaxSaguaroC, "--saguaro-c must be in [0, ", kMaxSaguaroC,
                      "], got ", saguaro_c);
        SPECDEC_CHECK(draft_threads >= 1, "draft threads must be >= 1");
        SPECDEC_CHECK(draft_nice >= 0 && draft_nice <= 19, "--ssd-draft-nice must be in [0, 19], got ", draft_nice);
        SPECDEC_CHECK(target_threads >= 0, "target threads must be >= 0 (0: the engine's pool)");
        SPECDEC_CHECK(ngram_min >= 1 && ngram_max >= ngram_min, "bad n-gram range");
        SPECDEC_CHECK(vocab_subset_n >= 0, "--vocab-subset must be >= 0, got ", vocab_subset_n);
        SPECDEC_CHECK(link_timeout_ms >= 1 && link_timeout_ms <= 600000, "--ssd-timeout-ms must be in [1, 600000], got ",
                      link_timeout_ms);
        SPECDEC_CHECK(link_prefill_ms_per_token >= 0 && link_prefill_ms_per_token <= 1000,
                      "link prefill allowance must be in [0, 1000] ms per token");
        SPECDEC_CHECK(lookup.min_n >= 0 && lookup.min_n <= 16, "--lookup-min must be in [0, 16], got ", lookup.min_n);
        SPECDEC_CHECK(lookup.min_n == 0 || (lookup.max_n >= lookup.min_n && lookup.max_draft >= 1),
                      "lookup first: need min_n <= max_n and a chain of at least 1");
    }
};

}  // namespace specdec::sched
