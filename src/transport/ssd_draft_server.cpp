#include "transport/ssd_draft_server.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "kv/kv_cache.h"
#include "runtime/draft_vocab.h"
#include "sched/ssd_draft_worker.h"
#include "transport/message_socket.h"
#include "transport/ssd_wire.h"
#include "transport/zmq_address.h"

namespace specdec::transport {

// One target's session: its spec, the draft cache sized for it and the worker.
struct DraftServer::Session {
    std::string peer;
    sched::DraftSideSpec spec;
    std::unique_ptr<kv::KvCache> cache;
    std::unique_ptr<sched::DraftWorker> worker;  // declared last: stopped before the cache goes
};

namespace {
void log(const std::string& s) { std::fprintf(stderr, "draft-serve: %s\n", s.c_str()); }

// A printable name for a ZeroMQ routing id (binary bytes).
std::string peer_name(const std::string& id) {
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (unsigned char c : id) {
        s += hex[c >> 4];
        s += hex[c & 15];
    }
    return s;
}
}  // namespace

DraftServer::DraftServer(runtime::Engine& draft, const DraftServerOptions& opts)
    : draft_(draft), opts_(opts) {
    check_endpoint(opts_.listen, opts_.allow_remote, "draft-serve");
    SPECDEC_CHECK(opts_.threads >= 1, "draft-serve: threads must be >= 1");
    SPECDEC_CHECK(opts_.fault.empty() || opts_.fault == "garbage" || opts_.fault == "slow",
                  "draft-serve: unknown fault '", opts_.fault, "' (garbage or slow)");
    sock_ = bind_server(opts_.listen, "draft-serve");
}

DraftServer::~DraftServer() = default;

std::vector<uint8_t> DraftServer::hello(const std::string& peer, uint64_t id, std::span<const uint8_t> payload) {
    const sched::DraftSideSpec spec = decode_hello(payload);
    const model::ModelConfig& mc = draft_.config();
    if (session_ && session_->peer != peer) log("target " + peer_name(peer) + " replaces " + peer_name(session_->peer));
    session_.reset();  // a new session: the old worker stops (joins) and its cache goes
    SPECDEC_CHECK(spec.target_n_ctx <= mc.n_ctx_train, "the target's context (", spec.target_n_ctx,
                  ") is longer than the draft's training context (", mc.n_ctx_train, ")");
    const long n_seq = (long)spec.n_batch * (1 + spec.branch_slots);
    // Bounds what a Hello can make this process reserve (cache entries).
    SPECDEC_CHECK(n_seq * spec.target_n_ctx <= (1L << 22), "a draft cache of ", n_seq, " sequences of ",
                  spec.target_n_ctx, " tokens is past this server's limit");
    auto s = std::make_unique<Session>();
    s->peer = peer;
    s->spec = spec;
    s->cache = std::make_unique<kv::KvCache>(draft_.model().kv_options(spec.target_n_ctx, (int)n_seq));
    sched::DraftWorkerOptions wo;
    wo.cfg = spec.cfg;
    wo.cfg.draft_threads = opts_.threads;  // the server's cores, not the target's idea of them
    wo.params = spec.params;
    wo.target_n_vocab = spec.target_n_vocab;
    // A fixed slot layout: a target's batch (a server's) may begin sequences while others run.
    wo.n_batch = spec.n_batch;
    sched::DraftContext ctx{&draft_.model(), s->cache.get(), draft_.options().prefill_chunk, nullptr};
    s->worker = std::make_unique<sched::DraftWorker>(ctx, wo);
    session_ = std::move(s);
    log("session " + std::to_string(id) + " from " + peer_name(peer) + ": batch " + std::to_string(spec.n_batch) +
        ", K " + std::to_string(spec.cfg.k) + ", T " + std::to_string(spec.params.temperature) + ", context " +
        std::to_string(spec.target_n_ctx));
    HelloAck a;
    a.n_vocab = mc.n_vocab;
    a.n_ctx_train = mc.n_ctx_train;
    a.model = std::filesystem::path(draft_.options().model_path).filename().string();
    a.vocab_fingerprint = runtime::vocabulary_fingerprint(draft_.tokenizer(), spec.target_n_vocab);
    return encode_hello_ack(id, a);
}

std::vector<uint8_t> DraftServer::corrupt(std::vector<uint8_t> frame, const sched::FromDraft& reply, uint64_t id) {
    switch (replies_ % 3) {
        case 0:  // random bytes
            for (size_t i = 0; i < frame.size(); ++i) frame[i] = (uint8_t)(i * 2654435761u >> 13);
            return frame;
        case 1:  // one flipped bit in the payload (or header)
            frame[frame.size() > kWireHeaderBytes ? kWireHeaderBytes + (frame.size() - kWireHeaderBytes) / 2 : 0] ^= 4;
            return frame;
        default: {  // well formed, but a token outside the vocabulary
            sched::FromDraft bad = reply;
            if (!bad.specs.empty()) bad.specs[0].tokens.assign(1, session_->spec.target_n_vocab);
            return encode_from_draft(id, bad);
        }
    }
}

std::vector<uint8_t> DraftServer::handle(const std::string& peer, std::span<const uint8_t> bytes) {
    WireFrame f;
    try {
        f = parse_frame(bytes);
    } catch (const WireError& e) {
        log(std::string("from ") + peer_name(peer) + ": " + e.what());
        return encode_error(0, e.what());
    }
    try {
        switch (f.kind) {
            case WireKind::Hello: return hello(peer, f.id, f.payload);
            case WireKind::ToDraft: {
                SPECDEC_CHECK(session_ && session_->peer == peer, "no session with this target (send Hello first)");
                WireLimits lim;
                lim.n_vocab = session_->spec.target_n_vocab;
                lim.n_seq = session_->spec.n_batch;  // slots past the batch are the worker's scratch
                sched::ToDraft m = decode_to_draft(f.payload, lim);
                if (m.kind == sched::ToDraft::Kind::Stop) return {};  // the session ends with the next Hello
                const bool reply = sched::wants_reply(m);
                session_->worker->send(std::move(m));
                if (!reply) return {};
                // The worker answers every such message (an error reply if it failed).
                const sched::FromDraft r = *session_->worker->receive(0);
                if (!r.error.empty()) log("worker: " + r.error);
                std::vector<uint8_t> out = encode_from_draft(f.id, r);
                ++replies_;
                if (!opts_.fault.empty() && replies_ > opts_.fault_after) {
                    if (opts_.fault == "slow") std::this_thread::sleep_for(std::chrono::milliseconds(opts_.fault_delay_ms));
                    if (opts_.fault == "garbage") out = corrupt(std::move(out), r, f.id);
                }
                return out;
            }
            default: throw WireError("wire: a target sent a message only servers send");
        }
    } catch (const Error& e) {
        log(std::string("from ") + peer_name(peer) + ": " + e.what());
        return encode_error(f.id, e.what());
    }
}

void DraftServer::serve(const std::atomic<bool>& stop) {
    log("serving " + std::filesystem::path(draft_.options().model_path).filename().string() + " on " + opts_.listen +
        " (" + std::to_string(opts_.threads) + " thread" + (opts_.threads == 1 ? "" : "s") + ")");
    while (!stop.load()) {
        const ServerEvent ev = sock_->poll(0.1);
        if (ev.kind == ServerEvent::Kind::Accepted || ev.kind == ServerEvent::Kind::Closed) {
            log(std::string(ev.kind == ServerEvent::Kind::Accepted ? "connection accepted on " : "connection closed on ") +
                ev.where);
            continue;
        }
        if (ev.kind != ServerEvent::Kind::Message) continue;
        const std::vector<uint8_t> out = handle(ev.peer, ev.body);
        if (out.empty()) continue;
        std::string error;
        if (!sock_->send(ev.peer, out, error)) log("reply not sent: " + error);
    }
    log("stopping");
}

}  // namespace specdec::transport
