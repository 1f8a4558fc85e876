#include "transport/zmq_draft_link.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/clock.h"
#include "core/error.h"
#include "transport/message_socket.h"
#include "transport/ssd_wire.h"
#include "transport/zmq_address.h"

namespace specdec::transport {

ZmqDraftLink::ZmqDraftLink(const ZmqDraftLinkOptions& opts, const sched::DraftSideSpec& spec)
    : opts_(opts), spec_(spec) {
    check_endpoint(opts_.addr, opts_.allow_remote, "--ssd-draft");
    sock_ = connect_client(opts_.addr, "--ssd-draft");
    // connect is asynchronous: give the connection a moment so that the
    // first rounds do not fall back only because it was still being set up.
    if (!sock_->wait_connected(opts_.connect_wait_s))
        note("no draft server at " + opts_.addr + " yet; drafting locally until one answers");
}

ZmqDraftLink::~ZmqDraftLink() = default;

void ZmqDraftLink::note(const std::string& what) {
    if (!opts_.log || what == last_note_) return;  // one line per change, not per round
    last_note_ = what;
    std::fprintf(stderr, "ssd draft link: %s\n", what.c_str());
}

bool ZmqDraftLink::send_frame(const std::vector<uint8_t>& frame) { return sock_->send(frame); }

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
    if (sched::wants_reply(msg)) awaited_id_ = id;
}

std::optional<sched::FromDraft> ZmqDraftLink::receive(double timeout_s) {
    if (broken_ || awaited_id_ == 0) {
        fault_ = "disconnected";
        note("draft server at " + opts_.addr + " not connected; drafting locally");
        return std::nullopt;
    }
    const double deadline = now_s() + (timeout_s > 0 ? timeout_s : 1e9);
    for (;;) {
        const double left = deadline - now_s();
        if (left <= 0) {
            fault_ = "timeout";
            note("no reply from " + opts_.addr + " within " + std::to_string((int)std::lround(timeout_s * 1000)) +
                 " ms; drafting locally");
            return std::nullopt;
        }
        const std::optional<std::vector<uint8_t>> msg = sock_->receive(left);
        if (!msg) continue;
        const std::span<const uint8_t> bytes(*msg);
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
                    SPECDEC_CHECK(spec_.target_vocab_fingerprint == 0 ||
                                      a.vocab_fingerprint == spec_.target_vocab_fingerprint,
                                  "the draft server at ", opts_.addr, " (", a.model, ") has as many tokens as the "
                                  "target but other token texts: not a draft for this target (use a draft of the "
                                  "same model family)");
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
