#include "server/http_support.h"

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "server/openai_protocol.h"

namespace specdec::server {

namespace {

// Set by read_body when it answers before the request body has all been read
// (413, or 400 for a body that stopped arriving), for the connection's own
// thread: httplib runs the handler on the thread that runs the connection's
// loop (HttpServer::process_and_close_socket), which then closes lingering.
thread_local bool t_body_left_unread = false;

}  // namespace

void GrowingTaskQueue::enqueue(std::function<void()> fn) {
    {
        std::lock_guard lk(mu_);
        jobs_.push_back(std::move(fn));
        // Start a worker only when every existing one is busy; a failure to
        // start one leaves the job for a worker that frees up.
        if (idle_ < jobs_.size() && threads_.size() < max_threads_ && !shutdown_) {
            try {
                threads_.emplace_back([this] { work(); });
            } catch (const std::system_error&) {
            }
        }
    }
    cv_.notify_one();
}

void GrowingTaskQueue::work() {
    std::unique_lock lk(mu_);
    while (true) {
        ++idle_;
        cv_.wait(lk, [&] { return !jobs_.empty() || shutdown_; });
        --idle_;
        if (jobs_.empty()) return;  // shutting down
        auto fn = std::move(jobs_.front());
        jobs_.pop_front();
        lk.unlock();
        try {
            fn();
        } catch (...) {
            // A handler bug costs one connection, never the process.
        }
        lk.lock();
    }
}

void GrowingTaskQueue::shutdown() {
    std::vector<std::thread> threads;
    {
        std::lock_guard lk(mu_);
        shutdown_ = true;
        threads.swap(threads_);
    }
    cv_.notify_all();
    for (auto& t : threads) t.join();
}

size_t GrowingTaskQueue::threads() const {
    std::lock_guard lk(mu_);
    return threads_.size();
}

namespace {

// Numeric host and port of a socket address, as httplib reports them.
bool host_port(const sockaddr_storage& ss, socklen_t len, std::string& host, int& port) {
    char buf[NI_MAXHOST];
    if (::getnameinfo(reinterpret_cast<const sockaddr*>(&ss), len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) != 0)
        return false;
    host = buf;
    if (ss.ss_family == AF_INET)
        port = ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
    else if (ss.ss_family == AF_INET6)
        port = ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
    else
        return false;
    return true;
}

bool matches(int fd, const httplib::Request& req) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    std::string host;
    int port = -1;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 || !host_port(ss, len, host, port) ||
        port != req.remote_port || host != req.remote_addr)
        return false;
    len = sizeof ss;
    return ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0 && host_port(ss, len, host, port) &&
           port == req.local_port && host == req.local_addr;
}

}  // namespace

int request_socket(const httplib::Request& req) {
    if (req.remote_port < 0 || req.local_port < 0) return -1;
    DIR* d = ::opendir("/proc/self/fd");
    if (!d) return -1;
    const int own = ::dirfd(d);
    int found = -1;
    while (const dirent* e = ::readdir(d)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == own) continue;
        if (matches((int)fd, req)) {
            found = (int)fd;
            break;
        }
    }
    ::closedir(d);
    return found;
}

bool peer_closed(int fd) {
    if (fd < 0) return false;
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    if (p.revents & POLLIN) {
        char c;
        return ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
    }
    return false;
}

void disable_response_compression(const httplib::Request& req) {
    // The Request is httplib's own non-const local (Server::process_request),
    // handed to handlers as const; the encoding is chosen from this header
    // only after the handler returns.
    const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
}

std::string read_body(const httplib::Request& req, const httplib::ContentReader& reader, httplib::Response& res,
                      size_t limit) {
    if (req.is_multipart_form_data()) {
        // httplib would hand it to a multipart parser this reader has no callbacks for.
        res.set_header("Connection", "close");
        throw ApiError(415, "multipart/form-data bodies are not supported (send application/json)", "",
                       "unsupported_media_type");
    }
    std::string body;
    bool too_large = false;
    const bool ok = reader([&](const char* data, size_t n) {
        if (n > limit - body.size()) {
            too_large = true;
            return false;
        }
        body.append(data, n);
        return true;
    });
    if (ok) return body;
    res.set_header("Connection", "close");
    t_body_left_unread = true;
    // 413 from httplib itself: a Content-Length over set_payload_max_length.
    if (too_large || res.status == 413)
        throw ApiError(413,
                       "request body too large (this server accepts at most " +
                           (limit % (1u << 20) == 0 ? std::to_string(limit >> 20) + " MiB"
                                                    : std::to_string(limit) + " bytes") +
                           ", --max-body-mb)",
                       "", "payload_too_large");
    throw ApiError(400, "the request body could not be read (the client stopped sending or hung up)", "",
                   "incomplete_body");
}

std::string http_error_json(int status) {
    std::string message, code, type = "invalid_request_error";
    switch (status) {
        case 400: message = "malformed HTTP request"; code = "bad_request"; break;
        case 404: message = "not found"; code = "not_found"; break;
        case 405: message = "method not allowed"; code = "method_not_allowed"; break;
        case 413: message = "request body too large"; code = "payload_too_large"; break;
        case 414: message = "request URI too long"; code = "uri_too_long"; break;
        case 416: message = "range not satisfiable"; code = "range_not_satisfiable"; break;
        default:
            message = "HTTP error " + std::to_string(status);
            if (status >= 500) type = "server_error";
    }
    return dump(error_json(ApiError(status, message, "", code, type)));
}

namespace {

using Clock = std::chrono::steady_clock;

Clock::duration from_timeval(time_t sec, time_t usec) {
    return std::chrono::seconds(sec) + std::chrono::microseconds(usec);
}

// One connection's socket as an httplib::Stream, for every request on it
// (so bytes of a pipelined request read ahead into the buffer are kept).
// What httplib's own SocketStream does, plus the header phase: between
// begin_headers() and end_headers(), a read also fails at the deadline or
// once the listener is closed; then cut() is true and writes fail too, so
// that httplib's "400 malformed request" for the cut-off headers is not sent.
class ConnectionStream final : public httplib::Stream {
public:
    ConnectionStream(int sock, const std::atomic<socket_t>& listener, Clock::duration read_timeout,
                     Clock::duration write_timeout)
        : sock_(sock), listener_(listener), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

    // Waits up to `idle` for the next request's first byte; false when none
    // came, the peer closed or the listener was closed meanwhile.
    bool await_request(Clock::duration idle) {
        if (off_ < len_) return true;
        const auto until = Clock::now() + idle;
        while (listener_.load() != INVALID_SOCKET) {
            const auto now = Clock::now();
            if (now >= until) return false;
            const int r = poll_for(POLLIN, std::min<Clock::duration>(until - now, kSlice));
            if (r != 0) return r > 0;
        }
        return false;
    }
    void begin_headers(Clock::duration timeout) {
        in_headers_ = true;
        header_deadline_ = timeout > Clock::duration::zero() ? Clock::now() + timeout : Clock::time_point::max();
    }
    void end_headers() { in_headers_ = false; }
    // The header deadline or a stop cut this connection's current request off.
    bool cut() const { return cut_; }
    // Bytes received and not yet handed to httplib.
    bool has_buffered() const { return off_ < len_; }

    bool is_readable() const override { return off_ < len_ || wait_readable(); }
    bool is_writable() const override { return !cut_ && poll_for(POLLOUT, write_timeout_) > 0 && !peer_closed(sock_); }

    ssize_t read(char* ptr, size_t size) override {
        if (off_ == len_) {
            if (!wait_readable()) return -1;
            ssize_t n;
            do n = ::recv(sock_, buf_.data(), buf_.size(), 0);
            while (n < 0 && errno == EINTR);
            if (n <= 0) return n;
            off_ = 0;
            len_ = (size_t)n;
        }
        const size_t n = std::min(size, len_ - off_);
        std::memcpy(ptr, buf_.data() + off_, n);
        off_ += n;
        return (ssize_t)n;
    }

    ssize_t write(const char* ptr, size_t size) override {
        if (!is_writable()) return -1;
        ssize_t n;
        do n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        return n;
    }

    void get_remote_ip_and_port(std::string& ip, int& port) const override { address(::getpeername, ip, port); }
    void get_local_ip_and_port(std::string& ip, int& port) const override { address(::getsockname, ip, port); }
    socket_t socket() const override { return sock_; }

private:
    // The header phase polls in slices this long, to see a closed listener.
    static constexpr Clock::duration kSlice = std::chrono::milliseconds(100);

    // poll() for `events` up to `d`: > 0 ready, 0 timed out, < 0 error.
    int poll_for(short events, Clock::duration d) const {
        const auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
        pollfd p{sock_, events, 0};
        int r;
        do r = ::poll(&p, 1, (int)std::clamp<int64_t>(ms, 0, INT_MAX));
        while (r < 0 && errno == EINTR);
        return r;
    }

    // Readable within the read timeout (and, in the header phase, before the
    // deadline and while the listener is open).
    bool wait_readable() const {
        if (!in_headers_) return poll_for(POLLIN, read_timeout_) > 0;
        const auto until = Clock::now() + read_timeout_;
        while (true) {
            const auto now = Clock::now();
            if (now >= header_deadline_ || listener_.load() == INVALID_SOCKET) {
                cut_ = true;
                return false;
            }
            if (now >= until) return false;
            const int r = poll_for(POLLIN, std::min({until - now, header_deadline_ - now, kSlice}));
            if (r != 0) return r > 0;
        }
    }

    template <class Get>
    void address(Get get, std::string& ip, int& port) const {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        if (get(sock_, reinterpret_cast<sockaddr*>(&ss), &len) != 0 || !host_port(ss, len, ip, port)) {
            ip.clear();
            port = -1;
        }
    }

    const int sock_;
    const std::atomic<socket_t>& listener_;
    const Clock::duration read_timeout_, write_timeout_;
    std::array<char, 4096> buf_{};
    size_t off_ = 0, len_ = 0;
    bool in_headers_ = false;
    mutable bool cut_ = false;
    Clock::time_point header_deadline_ = Clock::time_point::max();
};

// Closes a connection whose peer may still be sending. A socket closed with
// unread bytes in its receive queue, or that receives more after the close,
// answers with a reset: the peer's pending sends fail, and most clients (an
// HTTP library that sends the whole body before it reads, asyncio streams)
// then report the failed send and never read the 413 that had reached them.
// So, as nginx's lingering close does: end our side (FIN after the answer),
// then read and discard what the peer still sends until it closes, it stays
// silent for kLingerQuiet, or kLingerTotal has passed.
void close_lingering(int sock, bool input_pending) {
    constexpr auto kLingerQuiet = std::chrono::seconds(1);
    constexpr auto kLingerTotal = std::chrono::seconds(5);
    if (!input_pending) {
        pollfd p{sock, POLLIN, 0};
        input_pending = ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
    }
    if (input_pending && ::shutdown(sock, SHUT_WR) == 0) {
        const auto until = Clock::now() + kLingerTotal;
        std::array<char, 16384> sink;
        for (auto now = Clock::now(); now < until; now = Clock::now()) {
            const auto wait = std::chrono::ceil<std::chrono::milliseconds>(std::min<Clock::duration>(until - now, kLingerQuiet));
            pollfd p{sock, POLLIN, 0};
            int r;
            do r = ::poll(&p, 1, (int)wait.count());
            while (r < 0 && errno == EINTR);
            if (r <= 0) break;  // quiet for kLingerQuiet, or an error
            ssize_t n;
            do n = ::recv(sock, sink.data(), sink.size(), MSG_DONTWAIT);
            while (n < 0 && errno == EINTR);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) break;  // the peer closed
        }
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
}

}  // namespace

// httplib's own loop (process_server_socket in 0.11.4) with the header phase
// marked: process_request calls its setup_request hook right after it has
// parsed the headers, before routing.
bool HttpServer::process_and_close_socket(socket_t sock) {
    bool ret = false;
    {
        ConnectionStream strm(sock, svr_sock_, from_timeval(read_timeout_sec_, read_timeout_usec_),
                              from_timeval(write_timeout_sec_, write_timeout_usec_));
        for (size_t left = keep_alive_max_count_; left > 0; --left) {
            if (!strm.await_request(std::chrono::seconds(keep_alive_timeout_sec_))) break;
            strm.begin_headers(header_timeout_);
            bool closed = false;
            t_body_left_unread = false;
            ret = process_request(strm, left == 1, closed, [&](httplib::Request&) { strm.end_headers(); });
            strm.end_headers();
            if (!ret || closed || strm.cut()) break;
        }
        // Bytes read ahead into the stream's buffer and never parsed count
        // as input the peer is still sending. A connection cut off in its
        // headers had no answer to protect: it closes at once.
        if (strm.cut()) {
            ::shutdown(sock, SHUT_RDWR);
            ::close(sock);
        } else {
            close_lingering(sock, t_body_left_unread || strm.has_buffered());
        }
    }
    t_body_left_unread = false;
    return ret;
}

}  // namespace specdec::server
