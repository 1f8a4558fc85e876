// The message seam between the target side and the asynchronous draft side of
// SSD. Everything crossing it is a plain record (no pointers into either
// side's memory): the in-process channel below carries them between threads,
// and transport/ssd_wire.h serialises the same records for a draft side in
// another process (ssd_draft_side.h).
//
// Protocol, per sequence:
//   target -> draft  Begin{prompt}         draft prefills its own cache
//   target -> draft  Outcome{k=0, bonus}   the first token (from the target's prefill)
//   draft -> target  Speculation           (a miss: the backup drafted it)
//   repeat:  target verifies the speculation while the draft builds its cache
//            for every likely outcome; target -> draft Outcome{k, bonus};
//            draft -> target the next Speculation (cache hit or backup).
//   target -> draft  Outcome{done}         the sequence has ended (no reply)
//   target -> draft  Outcome{k, bonus, adopt}  this round the target verifies
//            a chain drafted elsewhere (prompt lookup first): the draft side
//            takes it as the speculation under verification and builds its
//            cache for its accept points (no reply for the sequence)
// One message per round carries every sequence of the batch.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sched/ssd_config.h"
#include "spec/draft_tree.h"

namespace specdec::sched {

struct DraftBegin {
    int seq = 0;
    std::vector<int32_t> prompt;
    bool in_cache = false;  // the draft cache already holds the prompt (a shared prefill)
};

// The result of verifying the last speculation of a sequence.
struct DraftOutcome {
    int seq = 0;
    int accepted = 0;     // k: drafts accepted
    int32_t bonus = 0;    // t: the token the target chose after them
    int max_drafts = 0;   // cap on the next speculation's length (context room, tokens left)
    bool done = false;    // the sequence has ended: no reply
    // Non-empty: the chain after `bonus` that the target verifies this round
    // instead of a speculation of the draft side's (no reply for it).
    std::vector<int32_t> adopt;
};


struct ToDraft {
    enum class Kind { Begin, Outcomes, Stop };
    Kind kind = Kind::Outcomes;
    std::vector<DraftBegin> begins;
    std::vector<DraftOutcome> outcomes;
    int batch_size = 1;      // sequences still running (the auto backup's b)
    double verify_s = 0;     // the target's last verification (calibrates b*)
};

// Whether an outcome asks the draft side for the sequence's next speculation
// (not an end, not an adopted chain).
inline bool asks_for_speculation(const DraftOutcome& o) { return !o.done && o.adopt.empty(); }

// Whether the draft side answers a message: an Outcomes message with a
// sequence that asks for its next speculation.
inline bool wants_reply(const ToDraft& m) {
    if (m.kind != ToDraft::Kind::Outcomes) return false;
    for (const DraftOutcome& o : m.outcomes)
        if (asks_for_speculation(o)) return true;
    return false;
}

// A speculation: K draft tokens after the root, and how they were drawn.
struct Speculation {
    int seq = 0;
    int32_t root = 0;
    std::vector<int32_t> tokens;           // (L) drafts after the root
    spec::DraftKind kind = spec::DraftKind::Deterministic;
    int n_vocab = 0;                       // target vocabulary (q row width)
    std::vector<float> q;                  // Sampled: (L, n_vocab) proposal each draft was drawn from
    bool hit = false;                      // came from the speculation cache
    BackupKind backup = BackupKind::Jit;   // misses: which backup drafted it
};

// Cumulative draft-side counters, sent with every reply.
struct DraftSideStats {
    int lookups = 0, hits = 0;
    std::vector<int> lookups_k, hits_k;  // (K + 1) by realised accept point
    int jit = 0, ngram = 0, random = 0;  // backups run (per sequence)
    int trees = 0;                       // cache builds (rounds)
    int interrupted = 0;                 // builds cut short by the target's outcome
    int branches = 0;                    // branches built
    int glue_reused = 0;                 // glue forwards cut to one row by a hit branch slot
    double tree_s = 0;                   // time building caches (overlaps verification)
    double backup_s = 0;                 // time in backups (the target waits)
    double acceptance = 0, miss_exponent = 0;
    double b_star = 0;
    std::vector<int> fanout;             // last F_k
};

struct FromDraft {
    std::vector<Speculation> specs;
    DraftSideStats stats;
    // Per-reply draft-side times, for the round traces: the cache build that
    // ran since the previous reply (it overlapped the target's last
    // verification) and whether the target's outcome cut it short, and the
    // backups run for this reply (the target waited for them).
    double build_s = 0;
    bool build_interrupted = false;
    double backup_s = 0;
    std::string error;  // non-empty: the draft side failed
};

// Unbounded blocking queue between two threads.
template <class T>
class Channel {
public:
    void push(T v) {
        {
            std::lock_guard<std::mutex> lk(mu_);
            q_.push_back(std::move(v));
        }
        cv_.notify_one();
    }
    T pop() {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return !q_.empty(); });
        T v = std::move(q_.front());
        q_.pop_front();
        return v;
    }
    // pop with a bound: nothing when no value arrived within `seconds`.
    std::optional<T> pop_for(double seconds) {
        std::unique_lock<std::mutex> lk(mu_);
        if (!cv_.wait_for(lk, std::chrono::duration<double>(seconds), [&] { return !q_.empty(); }))
            return std::nullopt;
        T v = std::move(q_.front());
        q_.pop_front();
        return v;
    }
    bool empty() const {
        std::lock_guard<std::mutex> lk(mu_);
        return q_.empty();
    }

private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<T> q_;
};

}  // namespace specdec::sched
