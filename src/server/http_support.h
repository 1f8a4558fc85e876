// What `specdec serve` adds around Debian's cpp-httplib (0.11.4): a server
// with a total deadline on each request's headers, a thread pool that grows
// on demand up to a bound, a "has this request's client hung up?" check, a
// request body reader with a size limit, and OpenAI-shaped bodies for the
// errors httplib answers itself.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace specdec::server {

// httplib::Server with a total deadline on each request's line and headers.
// httplib 0.11.4 has only a per-read timeout (set_read_timeout), which every
// byte resets: a client that sends a header byte every few seconds and never
// ends its headers holds a worker thread for as long as it likes, and enough
// of them hold every worker (slowloris). This server runs the connection's
// keep-alive loop itself (process_and_close_socket, httplib's override
// point) over a socket stream of its own whose reads, until httplib has
// parsed the headers, also end at the deadline; the connection is then
// closed without an answer. The body and the response keep httplib's
// per-read and per-write timeouts. Everything else (keep-alive count and
// timeout, read and write timeouts, request parsing, routing) is httplib's,
// configured as usual. Once stop() has closed the listener, a connection
// waiting for its next request, or still sending headers, is closed at once
// rather than at its timeout, so that a shutdown is not held up by clients
// that have not asked for anything yet.
class HttpServer : public httplib::Server {
public:
    // From a request's first byte to the end of its headers; zero or less: no deadline.
    HttpServer& set_header_timeout(std::chrono::milliseconds t) {
        header_timeout_ = t;
        return *this;
    }

private:
    bool process_and_close_socket(socket_t sock) override;

    std::chrono::milliseconds header_timeout_{10000};
};

// httplib::TaskQueue with at most `max_threads` workers, started only when a
// connection arrives and none is idle (httplib's ThreadPool starts all of
// them up front, and each waiting or generating request holds one).
// Connections beyond the bound wait here until a worker frees up.
class GrowingTaskQueue : public httplib::TaskQueue {
public:
    explicit GrowingTaskQueue(size_t max_threads) : max_threads_(max_threads < 1 ? 1 : max_threads) {}
    ~GrowingTaskQueue() override { shutdown(); }
    void enqueue(std::function<void()> fn) override;
    // Runs what is queued, then joins every worker.
    void shutdown() override;
    size_t threads() const;

private:
    void work();

    const size_t max_threads_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> jobs_;
    std::vector<std::thread> threads_;
    size_t idle_ = 0;
    bool shutdown_ = false;
};

// The connected socket a request arrived on, or -1 if it cannot be found.
// httplib 0.11.4 has no Request::is_connection_closed and does not hand the
// socket to handlers, so it is looked up among the process's descriptors by
// the request's local and remote address and port. Call it from the handler
// (or a content provider) of that request: httplib keeps the socket open
// until they return, so the descriptor stays the request's meanwhile.
int request_socket(const httplib::Request& req);

// Non-blocking: true when the peer of connected socket `fd` has closed its
// side or the connection broke (pipelined bytes mean it is still there).
// False for fd < 0.
bool peer_closed(int fd);

// Keeps httplib from compressing this request's response. 0.11.4 gzips
// text/event-stream too, and its compressor holds the data back until the
// stream ends, which would defeat streaming.
void disable_response_compression(const httplib::Request& req);

// Reads a request's body through httplib's ContentReader (a handler
// registered with one), at most `limit` bytes. httplib 0.11.4 limits only a
// body that states its Content-Length (set_payload_max_length: 413, body
// skipped); a chunked one, or one without a length, would grow without bound.
// Throws ApiError 413 for a body over the limit, 400 for one that could not
// be read (the client stalled past the read timeout or hung up); both answer
// with Connection: close, since the rest of the stream is in an unknown place.
// A multipart/form-data body is refused (415) unread.
std::string read_body(const httplib::Request& req, const httplib::ContentReader& reader, httplib::Response& res,
                      size_t limit);

// OpenAI error JSON for a status httplib produced itself (400 for a bad
// request line, 413 for a body over the limit, 404, ...).
std::string http_error_json(int status);

}  // namespace specdec::server
