// `specdec draft-serve`: SSD's draft side in a process of its own. A ZeroMQ
// ROUTER socket (see zmq_draft_link.h for the choice) receives the target's
// wire messages (ssd_wire.h); a Hello (re)creates the draft worker
// (sched/ssd_draft_worker.h) and its KV cache for the target's batch,
// context and SSD configuration, then each Begin/Outcomes goes to the worker
// and each reply goes back under its request's id.
//
// One target at a time: a Hello from another target replaces the session
// (a restarted target gets a new ZeroMQ identity), and messages from any
// other peer are answered with an error. The server never exits on a bad
// message: anything it cannot decode or serve is answered with an Error
// message (the target then drafts locally and starts a new session) and
// logged to stderr.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "sched/ssd_draft_side.h"
#include "transport/message_socket.h"

namespace specdec::transport {

struct DraftServerOptions {
    std::string listen;           // tcp://HOST:PORT or ipc://PATH
    bool allow_remote = false;    // listen on an address other than loopback or ipc
    int threads = 1;              // the draft worker's threads
    // Testing only (hidden option --fault): after `fault_after` good replies,
    // "garbage" corrupts every reply (random bytes, a flipped bit, a token
    // outside the vocabulary in turn); "slow" delays each by fault_delay_ms.
    std::string fault;
    int fault_after = 0;
    int fault_delay_ms = 2000;
};

class DraftServer {
public:
    // Binds at once (throws Error when the address is refused or taken).
    DraftServer(runtime::Engine& draft, const DraftServerOptions& opts);
    ~DraftServer();
    DraftServer(const DraftServer&) = delete;
    DraftServer& operator=(const DraftServer&) = delete;

    // Serves until `stop` becomes true (looked at every 100 ms).
    void serve(const std::atomic<bool>& stop);

private:
    struct Session;
    // The frames to answer `bytes` with (empty: no answer).
    std::vector<uint8_t> handle(const std::string& peer, std::span<const uint8_t> bytes);
    std::vector<uint8_t> hello(const std::string& peer, uint64_t id, std::span<const uint8_t> payload);
    std::vector<uint8_t> corrupt(std::vector<uint8_t> frame, const sched::FromDraft& reply, uint64_t id);

    runtime::Engine& draft_;
    DraftServerOptions opts_;
    std::unique_ptr<ServerSocket> sock_;  // a ZeroMQ ROUTER (message_socket.h)
    std::unique_ptr<Session> session_;
    long replies_ = 0;
};

}  // namespace specdec::transport
