// SSD round traces (`--trace FILE` with --method ssd): after the run header
// (seed, configuration, model hashes), one JSON line per sequence per round,
// type "ssd_round": the speculation verified (root, drafts), where it came
// from (a cache hit, or which backup served the miss, and the accept point it
// was looked up for), the outcome (k accepted, bonus, tokens emitted), the
// fan-out F_k of the cache the draft built while this round verified, and the
// round's times: that build on the draft side against the target's
// verification, the backups and the target's stall waiting for them. Rounds
// the target drafted itself because a remote draft side failed say why in
// "fallback" (timeout, disconnected, invalid, error, backoff; null otherwise).
// "source" is "lookup" for a round whose chain came from prompt lookup first
// (the draft side adopted it: no cache lookup, no backup), "draft" otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/engine.h"
#include "sample/sampler.h"
#include "sched/ssd_config.h"

namespace specdec::sched {

struct SsdRoundRecord {
    int seq = 0;
    int round = 0;                  // this sequence's round (0: the first speculation, never a lookup)
    int batch_round = 0;            // the scheduler's round (one target forward for the whole batch)
    int prefix_len = 0;             // committed tokens before the root
    int32_t root = 0;
    std::vector<int32_t> drafts;    // the speculation after the root
    bool from_lookup = false;       // a prompt-lookup chain (lookup first) the draft side adopted
    bool lookup = false;            // the draft looked this speculation up in its cache
    int lookup_k = -1;              // the accept point it was looked up for (-1: no lookup)
    bool hit = false;
    BackupKind backup = BackupKind::Jit;  // misses: the backup that drafted it
    std::string fallback;           // non-empty: the draft side failed, the target drafted (ngram)
    int accepted = 0;               // k
    int32_t bonus = 0;              // the target's token after the accepted drafts (-1: a stop cut it off)
    std::vector<int32_t> emitted;   // tokens this round delivered (cut at a stop)
    std::vector<int> fanout;        // F_k of the cache built while this round verified
    double build_s = -1;            // that build's draft-side seconds (-1: unknown, the run ended)
    bool build_interrupted = false;
    double backup_s = 0;            // draft-side backups for this round's reply (whole batch)
    double stall_s = 0;             // the target waiting for this round's reply (whole batch)
    double tree_s = 0;              // target side: tree tensors and batch (whole batch)
    double verify_s = 0;            // target forward and verification (whole batch)
};

nlohmann::json ssd_round_json(const SsdRoundRecord& r);

// The run header: sampling parameters, SSD configuration, thread layout,
// and both models' paths and content hashes.
// draft: null when the draft side is remote (cfg.remote_draft says where).
nlohmann::json ssd_run_header(const SsdConfig& cfg, const sample::SamplingParams& p, const runtime::Engine& target,
                              runtime::Engine* draft, int target_threads);

}  // namespace specdec::sched
