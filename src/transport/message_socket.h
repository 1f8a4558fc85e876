// The message sockets SSD's remote draft side needs (the target's link,
// zmq_draft_link.h, and `specdec draft-serve`, ssd_draft_server.h), behind an
// interface, so that only a process that talks to a draft server loads
// libzmq.
//
// Why: linking libzmq into the specdec binary made every command (generate,
// serve, bench) load it and the 14 libraries it needs (Kerberos, libsodium,
// PGM, NORM, ...) at start, 1.7 MiB more resident memory for a 135M model
// run that never opens a socket. The ZeroMQ code lives in a module of its own
// (transport/zmq/zmq_message_socket.cpp, libspecdec_zmq.so) that
// connect_client/bind_server load with dlopen the first time a socket is
// opened.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace specdec::transport {

// The target's end: messages of bytes to and from one draft server. Never
// blocks the target: sends do not queue towards a server that is not
// connected, closing never waits for a dead peer, and the connection is made
// again by itself when a server comes back.
class ClientSocket {
public:
    virtual ~ClientSocket() = default;
    // Waits up to wait_s for the connection to be up; whether it is.
    virtual bool wait_connected(double wait_s) = 0;
    // Sends one message at once; false when no server is connected (or the send failed).
    virtual bool send(std::span<const uint8_t> bytes) = 0;
    // The next message, waiting at most timeout_s (a signal does not cut the
    // wait short); nullopt when none came.
    virtual std::optional<std::vector<uint8_t>> receive(double timeout_s) = 0;
};

// What a server socket's poll found.
struct ServerEvent {
    enum class Kind { None, Message, Accepted, Closed };
    Kind kind = Kind::None;
    std::string peer;           // Message: the sender's routing id (binary bytes)
    std::vector<uint8_t> body;  // Message: its first frame (extra frames are dropped)
    std::string where;          // Accepted, Closed: the endpoint
};

// The draft server's end: messages from any number of targets, each tagged
// with its peer, and connection events for the log.
class ServerSocket {
public:
    virtual ~ServerSocket() = default;
    // Waits up to timeout_s for a message or a connection event (None: none
    // came, or a signal cut the wait short).
    virtual ServerEvent poll(double timeout_s) = 0;
    // Sends at once (a target that went away never stalls the server); on
    // failure false, with the reason in `error`.
    virtual bool send(const std::string& peer, std::span<const uint8_t> bytes, std::string& error) = 0;
};

// Open a socket (loading the ZeroMQ module on first use). Throw Error when
// the module cannot be loaded or the address is refused; `who` names the
// command or option in the message. The endpoint rules are check_endpoint's
// (zmq_address.h), checked by the callers.
std::unique_ptr<ClientSocket> connect_client(const std::string& addr, const std::string& who);
std::unique_ptr<ServerSocket> bind_server(const std::string& addr, const std::string& who);

// The module's one entry point, resolved with dlsym: the ABI version and its
// two factories (nullptr with `error` set on failure; no exception crosses
// the module boundary).
struct SocketModule {
    int abi;
    ClientSocket* (*connect)(const std::string& addr, std::string& error);
    ServerSocket* (*bind)(const std::string& addr, std::string& error);
};
inline constexpr int kSocketModuleAbi = 1;
inline constexpr const char* kSocketModuleSymbol = "specdec_socket_module";
inline constexpr const char* kSocketModuleFile = "libspecdec_zmq.so";

}  // namespace specdec::transport
