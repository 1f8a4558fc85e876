// Where SSD's draft side runs, behind one interface: the proposer
// (ssd_proposer.h) sends it each round's records (ssd_messages.h) and waits,
// boundedly where the placement can fail, for the reply. Two placements:
//   - DraftWorker (ssd_draft_worker.h): a thread of this process; it cannot
//     lose a message, so the proposer waits for it without a bound and treats
//     an error reply as fatal (as before the interface existed);
//   - a remote draft server (transport/zmq_draft_link.h): another process or
//     host; messages can be lost, late or garbled, so receive is bounded and
//     a fault makes the proposer draft the round locally and later start a
//     new session (restart) that rebuilds the server's state.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "sample/sampler.h"
#include "sched/ssd_config.h"
#include "sched/ssd_messages.h"

namespace specdec::sched {

// What a draft side is built from, wherever it runs: a remote link sends it
// as its Hello, from which the server (re)creates its worker and cache.
struct DraftSideSpec {
    SsdConfig cfg;                  // the fields the draft side uses (k, fan-out, backups, seeds)
    sample::SamplingParams params;  // the draft draws with the target's processors
    int target_n_vocab = 0;         // speculations are rows of this vocabulary
    int target_n_ctx = 0;           // the draft cache must hold as much context
    int n_batch = 1;                // sequences (draft cache slots 0..n_batch-1)
    int branch_slots = 0;           // scratch slots per sequence for cached branches
    // The target's runtime::vocabulary_fingerprint over its n_vocab ids (0:
    // not known). Not sent: a remote link checks the server's HelloAck
    // against it, so that a draft of another family is refused.
    uint64_t target_vocab_fingerprint = 0;
};

// Rounds the target drafted itself because the draft side failed (a remote
// placement only), by the fault that caused them.
struct SsdFallbackStats {
    int rounds = 0;                // every fallback round
    int timeout = 0;               // no reply in time (a hung, slow or dead server)
    int disconnected = 0;          // nothing to send to (no connection)
    int invalid = 0;               // a malformed or inconsistent reply
    int error = 0;                 // the draft side answered with an error
    int backoff = 0;               // rounds skipped before retrying after repeated faults
    int resyncs = 0;               // new sessions started after a fault
};

class DraftSide {
public:
    virtual ~DraftSide() = default;
    // Queues a message for the draft side; never blocks on it. A remote side
    // that cannot send now drops it and reports the fault at the next receive.
    virtual void send(ToDraft msg) = 0;
    // The reply to the last Outcomes message sent. timeout_s <= 0 waits as
    // long as it takes; otherwise nothing comes back when no valid reply
    // arrived in time (fault() then says why). Replies to earlier messages
    // (late after a timeout) are recognised and dropped.
    virtual std::optional<FromDraft> receive(double timeout_s) = 0;
    // Why the last receive returned nothing: "timeout", "disconnected",
    // "invalid" (a malformed or inconsistent reply) or "error" (the draft side
    // reported one).
    virtual std::string fault() const { return {}; }
    // Whether messages can be lost (a remote placement): the proposer then
    // bounds its waits and recovers from faults instead of failing.
    virtual bool can_fail() const { return false; }
    // Starts a new session after a fault: everything sent before is
    // forgotten (a remote server rebuilds its worker and cache); the caller
    // then begins every running sequence again.
    virtual void restart() {}
};

}  // namespace specdec::sched
