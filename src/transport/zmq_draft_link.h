// The target's end of a remote SSD draft side (sched/ssd_draft_side.h): a
// ZeroMQ DEALER socket talking to `specdec draft-serve` (a ROUTER,
// transport/ssd_draft_server.h) in the wire format of ssd_wire.h.
//
// Why ZeroMQ: Debian's libzmq is small, well kept, and gives message framing
// and automatic reconnection over tcp:// and ipc:// with nothing to generate
// (gRPC would bring protobuf code generation and a large runtime; MPI a
// launcher and a fixed set of ranks, when the draft server must be able to
// come and go). DEALER/ROUTER rather than REQ/REP: REP's strict
// send-receive alternation wedges the socket after a lost reply, while a
// DEALER can give up on a reply, send again, and drop the late reply when it
// comes (each reply carries its request's id).
//
// The socket is message_socket.h's ClientSocket (libzmq is loaded only when
// one is opened). Never blocks the target: sends are non-blocking with ZMQ_IMMEDIATE (a
// message to a server that is not connected fails at once instead of
// queueing), ZMQ_LINGER is 0 (closing never waits for a dead peer), and
// receive waits at most its timeout. Each session starts with a Hello
// carrying the DraftSideSpec; its HelloAck gives the server's vocabulary,
// and a vocabulary other than the target's is a fatal Error (a user error,
// not a fault to recover from).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sched/ssd_draft_side.h"
#include "transport/message_socket.h"

namespace specdec::transport {

struct ZmqDraftLinkOptions {
    std::string addr;            // tcp://HOST:PORT or ipc://PATH of the draft server
    bool allow_remote = false;   // an address that is not loopback or ipc needs it
    double connect_wait_s = 2.0; // at start, how long to wait for the connection before drafting locally
    bool log = true;             // connection changes and faults to stderr
};

class ZmqDraftLink final : public sched::DraftSide {
public:
    ZmqDraftLink(const ZmqDraftLinkOptions& opts, const sched::DraftSideSpec& spec);
    ~ZmqDraftLink() override;
    ZmqDraftLink(const ZmqDraftLink&) = delete;
    ZmqDraftLink& operator=(const ZmqDraftLink&) = delete;

    void send(sched::ToDraft msg) override;
    std::optional<sched::FromDraft> receive(double timeout_s) override;
    std::string fault() const override { return fault_; }
    bool can_fail() const override { return true; }
    void restart() override;

    int late_replies() const { return late_; }  // replies to requests already given up on, dropped

private:
    bool send_frame(const std::vector<uint8_t>& frame);
    void note(const std::string& what);

    ZmqDraftLinkOptions opts_;
    sched::DraftSideSpec spec_;
    std::unique_ptr<ClientSocket> sock_;  // a ZeroMQ DEALER (message_socket.h)
    uint64_t next_id_ = 0;
    uint64_t hello_id_ = 0;     // this session's Hello
    uint64_t awaited_id_ = 0;   // the Outcomes message whose reply receive waits for
    bool need_hello_ = true;    // the next send starts a session
    bool broken_ = false;       // a send of this session failed: nothing more goes out until restart
    bool acked_ = false;        // this session's Hello was answered
    int sessions_ = 0;
    int late_ = 0;
    std::string fault_, last_note_;
};

}  // namespace specdec::transport
