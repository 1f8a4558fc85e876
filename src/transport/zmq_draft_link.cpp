#include "transport/zmq_draft_link.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <zmq.hpp>

#include "core/clock.h"
#include "core/error.h"
#include "transport/ssd_wire.h"
#include "transport/zmq_address.h"

namespace specdec::transport {

struct ZmqDraftLink::Zmq {
    zmq::context_t ctx{1};
    zmq::socket_t sock{ctx, zmq::socket_type::dealer};
};

ZmqDraftLink::ZmqDraftLink(const ZmqDraftLinkOptions& opts, const sched::DraftSideSpec& spec)
    : opts_(opts), spec_(spec), z_(std::make_unique<Zmq>()) {
    check_endpoint(opts_.addr, opts_.allow_remote, "--ssd-draft");
    zmq::socket_t& s = z_->sock;
    s.set(zmq::sockopt::linger, 0);           // closing never waits for a dead server
    s.set(zmq::sockopt::immediate, 1);        // no queueing towards a server that is not there
    s.set(zmq::sockopt::reconnect_ivl, 100);  // a restarted server is found within ~0.1 s
    s.set(zmq::sockopt::reconnect_ivl_max, 1000);
    try {
        s.connect(opts_.addr);
    } catch (const zmq::error_t& e) {
        throw Error("--ssd-draft " + opts_.addr + ": " + e.what());
    }
    // connect is asynchronous: give the connection a moment so that the
    // first rounds do not fall back only because it was still being set up.
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLOUT, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds((long)(opts_.connect_wait_s * 1000)));
    if (!(item.revents & ZMQ_POLLOUT))
        note("no draft server at " + opts_.addr + " yet; drafting locally until one answers");
}

ZmqDraftLink::~ZmqDraftLink() = default;

void ZmqDraftLink::note(const std::string& what) {
    if (!opts_.log || what == last_note_) return;  // one line per change, not per round
    last_note_ = what;
    std::fprintf(stderr, "ssd draft link: %s\n", what.c_str());
}

bool ZmqDraftLink::send_frame(const std::vector<uint8_t>& frame) {
    try {
        const auto sent = z_->sock.send(zmq::buffer(frame), zmq::send_flags::dontwait);
        return sent.has_value();  // empty: EAGAIN, no connected server
    } catch (const zmq::error_t&) {
        return false;
    }
}

void ZmqDraftLink::restart() {
    need_hello_ = true;
    broken_ = false;
    acked_ = false;
    awaited_id_ = 0;
}

void ZmqDraftLink::send(sched::ToDraft msg) {
    if (broken_) return;  // the session lost a message: everything after it would be out of step
    if (need_hello_) {
        hello_id_ = ++next_id_;
        if (!send_frame(encode_hello(hello_id_, spec_))) {
            broken_ = true;
            return;
        }
        need_hello_ = false;
        acked_ = false;
    }
    const uint64_t id = ++next_id_;
    if (!send_frame(encode_to_draft(id, msg))) {
        broken_ = true;
        return;
    }
    const bool wants_reply = msg.kind == sched::ToDraft::Kind::Outcomes &&
                             std::any_of(msg.outcomes.begin(), msg.outcomes.end(), [](auto& o) { return !o.done; });
    if (wants_reply) awaited_id_ = id;
}

std::optional<sched::FromDraft> ZmqDraftLink::receive(double timeout_s) {
    if (broken_ || awaited_id_ == 0) {
        fault_ = "disconnected";
        note("draft server at " + opts_.addr + " not connected; drafting locally");
        return std::nullopt;
    }
    const double deadline = now_s() + (timeout_s > 0 ? timeout_s : 1e9);
    zmq::socket_t& s = z_->sock;
    for (;;) {
        const double left = deadline - now_s();
        if (left <= 0) {
            fault_ = "timeout";
            note("no reply from " + opts_.addr + " within " + std::to_string((int)std::lround(timeout_s * 1000)) +
                 " ms; drafting locally");
            return std::nullopt;
        }
        zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
        try {
            zmq::poll(&item, 1, std::chrono::milliseconds(std::max(1L, (long)std::ceil(left * 1000))));
        } catch (const zmq::error_t& e) {
            if (e.num() == EINTR) continue;  // a signal: wait on until the deadline
            throw;
        }
        if (!(item.revents & ZMQ_POLLIN)) continue;
        zmq::message_t msg;
        if (!s.recv(msg, zmq::recv_flags::dontwait)) continue;
        const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(msg.data()), msg.size());
        try {
            const WireFrame f = parse_frame(bytes);
            switch (f.kind) {
                case WireKind::HelloAck: {
                    if (f.id != hello_id_) break;  // an earlier session's
                    const HelloAck a = decode_hello_ack(f.payload);
                    // A user error, not a fault: no retry makes the vocabularies agree.
                    SPECDEC_CHECK(a.n_vocab == spec_.target_n_vocab, "the draft server at ", opts_.addr, " (",
                                  a.model, ") has a vocabulary of ", a.n_vocab, " tokens, the target ",
                                  spec_.target_n_vocab, ": not a draft for this target");
                    acked_ = true;
                    ++sessions_;
                    note("session " + std::to_string(sessions_) + " with " + opts_.addr + " (" + a.model + ")");
                    break;
                }
                case WireKind::Error: {
                    if (f.id != 0 && f.id < hello_id_) break;  // about an earlier session
                    fault_ = "error";
                    note("draft server error: " + decode_error(f.payload) + "; drafting locally");
                    return std::nullopt;
                }
                case WireKind::FromDraft: {
                    if (f.id != awaited_id_) {
                        ++late_;  // the reply to a request already given up on
                        break;
                    }
                    if (!acked_) throw WireError("wire: a reply before the session's HelloAck");
                    WireLimits lim;
                    lim.n_vocab = spec_.target_n_vocab;
                    lim.n_seq = spec_.n_batch;
                    sched::FromDraft r = decode_from_draft(f.payload, lim);
                    awaited_id_ = 0;
                    return r;
                }
                default: throw WireError("wire: a server sent a message only targets send");
            }
        } catch (const WireError& e) {
            fault_ = "invalid";
            note(std::string("invalid reply from ") + opts_.addr + ": " + e.what() + "; drafting locally");
            return std::nullopt;
        }
    }
}

}  // namespace specdec::transport
