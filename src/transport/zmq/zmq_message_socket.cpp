// libspecdec_zmq.so: transport/message_socket.h's sockets over ZeroMQ, the
// only code that includes zmq.hpp. Loaded with dlopen (message_socket.cpp),
// so it links libzmq and nothing of the engine; no exception leaves it.
//
// Why ZeroMQ, and DEALER/ROUTER: see zmq_draft_link.h.
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <zmq.hpp>

#include "transport/message_socket.h"

namespace specdec::transport {
namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

long to_ms(double s) { return std::max(0L, (long)std::ceil(s * 1000)); }

// The target's DEALER socket.
class ZmqClient final : public ClientSocket {
public:
    explicit ZmqClient(const std::string& addr) {
        sock_.set(zmq::sockopt::linger, 0);           // closing never waits for a dead server
        sock_.set(zmq::sockopt::immediate, 1);        // no queueing towards a server that is not there
        sock_.set(zmq::sockopt::reconnect_ivl, 100);  // a restarted server is found within ~0.1 s
        sock_.set(zmq::sockopt::reconnect_ivl_max, 1000);
        sock_.connect(addr);
    }

    bool wait_connected(double wait_s) override {
        // connect is asynchronous; with ZMQ_IMMEDIATE the socket is writable
        // only once a connection is up.
        zmq::pollitem_t item{sock_.handle(), 0, ZMQ_POLLOUT, 0};
        try {
            zmq::poll(&item, 1, std::chrono::milliseconds(to_ms(wait_s)));
        } catch (const zmq::error_t&) {
            return false;
        }
        return (item.revents & ZMQ_POLLOUT) != 0;
    }

    bool send(std::span<const uint8_t> bytes) override {
        try {
            const auto sent = sock_.send(zmq::buffer(bytes.data(), bytes.size()), zmq::send_flags::dontwait);
            return sent.has_value();  // empty: EAGAIN, no connected server
        } catch (const zmq::error_t&) {
            return false;
        }
    }

    std::optional<std::vector<uint8_t>> receive(double timeout_s) override {
        const double deadline = now_s() + timeout_s;
        for (;;) {
            const double left = deadline - now_s();
            if (left <= 0) return std::nullopt;
            zmq::pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
            try {
                zmq::poll(&item, 1, std::chrono::milliseconds(std::max(1L, to_ms(left))));
                if (!(item.revents & ZMQ_POLLIN)) continue;
                zmq::message_t msg;
                if (!sock_.recv(msg, zmq::recv_flags::dontwait)) continue;
                const auto* p = static_cast<const uint8_t*>(msg.data());
                return std::vector<uint8_t>(p, p + msg.size());
            } catch (const zmq::error_t& e) {
                if (e.num() == EINTR) continue;  // a signal: wait on until the deadline
                return std::nullopt;
            }
        }
    }

private:
    zmq::context_t ctx_{1};
    zmq::socket_t sock_{ctx_, zmq::socket_type::dealer};
};

// The draft server's ROUTER socket, with a monitor for connection events
// (a ROUTER hides connections from its messages).
class ZmqServer final : public ServerSocket {
public:
    explicit ZmqServer(const std::string& addr) {
        sock_.set(zmq::sockopt::linger, 0);
        sock_.bind(addr);
        const std::string mon = "inproc://draft-serve-events";
        if (zmq_socket_monitor(sock_.handle(), mon.c_str(), ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) == 0) {
            events_.set(zmq::sockopt::linger, 0);
            events_.connect(mon);
            monitored_ = true;
        }
    }

    ServerEvent poll(double timeout_s) override {
        ServerEvent out;
        try {
            zmq::pollitem_t items[2] = {{sock_.handle(), 0, ZMQ_POLLIN, 0}, {events_.handle(), 0, ZMQ_POLLIN, 0}};
            zmq::poll(items, monitored_ ? 2 : 1, std::chrono::milliseconds(to_ms(timeout_s)));
            if (monitored_ && (items[1].revents & ZMQ_POLLIN)) {
                // A monitor event: 6 bytes (u16 event, u32 value), then the endpoint.
                zmq::message_t ev, where;
                if (events_.recv(ev, zmq::recv_flags::dontwait) && ev.more() &&
                    events_.recv(where, zmq::recv_flags::none) && ev.size() >= 2) {
                    uint16_t event = 0;
                    std::memcpy(&event, ev.data(), 2);
                    out.kind = event == ZMQ_EVENT_ACCEPTED ? ServerEvent::Kind::Accepted : ServerEvent::Kind::Closed;
                    out.where = where.to_string();
                    return out;
                }
            }
            if (!(items[0].revents & ZMQ_POLLIN)) return out;
            // A ROUTER message: the peer's routing id, then the frame.
            zmq::message_t id, body;
            if (!sock_.recv(id, zmq::recv_flags::dontwait) || !id.more()) return out;
            (void)sock_.recv(body, zmq::recv_flags::none);
            bool more = body.more();
            while (more) {  // a well-behaved target sends one frame; drop any extra
                zmq::message_t extra;
                (void)sock_.recv(extra, zmq::recv_flags::none);
                more = extra.more();
            }
            out.kind = ServerEvent::Kind::Message;
            out.peer.assign(static_cast<const char*>(id.data()), id.size());
            const auto* p = static_cast<const uint8_t*>(body.data());
            out.body.assign(p, p + body.size());
        } catch (const zmq::error_t&) {
            out = ServerEvent{};  // EINTR (SIGINT/SIGTERM): the caller looks at its stop flag
        }
        return out;
    }

    bool send(const std::string& peer, std::span<const uint8_t> bytes, std::string& error) override {
        try {
            if (!sock_.send(zmq::buffer(peer), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
                error = "the target is not connected";
                return false;
            }
            (void)sock_.send(zmq::buffer(bytes.data(), bytes.size()), zmq::send_flags::dontwait);
            return true;
        } catch (const zmq::error_t& e) {
            error = e.what();
            return false;
        }
    }

private:
    zmq::context_t ctx_{1};
    zmq::socket_t sock_{ctx_, zmq::socket_type::router};
    zmq::socket_t events_{ctx_, zmq::socket_type::pair};
    bool monitored_ = false;
};

template <class T>
T* make(const std::string& addr, std::string& error) {
    try {
        return new T(addr);
    } catch (const std::exception& e) {
        error = e.what();
        return nullptr;
    }
}

const SocketModule kModule{kSocketModuleAbi, [](const std::string& a, std::string& e) -> ClientSocket* {
                               return make<ZmqClient>(a, e);
                           },
                           [](const std::string& a, std::string& e) -> ServerSocket* { return make<ZmqServer>(a, e); }};

}  // namespace
}  // namespace specdec::transport

extern "C" __attribute__((visibility("default"))) const specdec::transport::SocketModule* specdec_socket_module() {
    return &specdec::transport::kModule;
}
