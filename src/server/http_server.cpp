#include "server/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"

namespace specdec::server {

namespace {

constexpr int kPollSliceMs = 200;  // how often blocked loops look at the stop flag
constexpr size_t kMaxHeaderBytes = 64 * 1024;

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = (char)std::tolower((unsigned char)c);
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

enum class ReadStatus { Ok, Closed, Timeout, Stopped, Error };

// Reads more bytes into buf, waiting at most `deadline`.
ReadStatus read_some(int fd, std::string& buf, std::chrono::steady_clock::time_point deadline,
                     const std::atomic<bool>& stopping) {
    while (true) {
        if (stopping.load()) return ReadStatus::Stopped;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                                std::chrono::steady_clock::now());
        if (left.count() <= 0) return ReadStatus::Timeout;
        pollfd p{fd, POLLIN, 0};
        const int r = ::poll(&p, 1, (int)std::min<long long>(left.count(), kPollSliceMs));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return ReadStatus::Error;
        if (r == 0) continue;
        char tmp[16384];
        const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
        if (n == 0) return ReadStatus::Closed;
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return ReadStatus::Error;
        }
        buf.append(tmp, (size_t)n);
        return ReadStatus::Ok;
    }
}

void send_simple(int fd, int status, const std::string& msg) {
    HttpResponder r(fd, false);
    r.respond(status, "application/json",
              std::string("{\"error\":{\"message\":\"") + msg + "\",\"type\":\"invalid_request_error\",\"param\":null,"
              "\"code\":null}}");
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
    for (const auto& [k, v] : headers)
        if (k == name) return v;
    return {};
}

const char* http_reason(int status) {
    switch (status) {
        case 100: return "Continue";
        case 200: return "OK";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 411: return "Length Required";
        case 413: return "Payload Too Large";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 501: return "Not Implemented";
        case 503: return "Service Unavailable";
        default: return "Unknown";
    }
}

bool HttpResponder::send_all(std::string_view data) {
    while (ok_ && !data.empty()) {
        // MSG_NOSIGNAL: a vanished client must not raise SIGPIPE.
        const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ok_ = false;
            break;
        }
        data.remove_prefix((size_t)n);
    }
    return ok_;
}

bool HttpResponder::respond(int status, const std::string& content_type, const std::string& body,
                            const std::vector<std::pair<std::string, std::string>>& extra_headers) {
    answered_ = true;
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + http_reason(status) + "\r\n";
    head += "Content-Type: " + content_type + "\r\n";
    head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    for (const auto& [k, v] : extra_headers) head += k + ": " + v + "\r\n";
    head += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    return send_all(head) && send_all(body);
}

bool HttpResponder::begin_stream(int status, const std::string& content_type) {
    answered_ = true;
    streaming_ = true;
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + http_reason(status) + "\r\n";
    head += "Content-Type: " + content_type + "\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n";
    head += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    return send_all(head);
}

bool HttpResponder::write_chunk(std::string_view data) {
    if (data.empty()) return ok_ && !peer_closed();
    char len[32];
    std::snprintf(len, sizeof len, "%zx\r\n", data.size());
    return send_all(len) && send_all(data) && send_all("\r\n");
}

bool HttpResponder::end_stream() { return send_all("0\r\n\r\n"); }

bool HttpResponder::peer_closed() const {
    if (!ok_) return true;
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    if (p.revents & POLLIN) {
        char c;
        // Pipelined bytes mean the client is still there; 0 means EOF.
        return ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
    }
    return false;
}

HttpServer::HttpServer(HttpServerOptions opts, HttpHandler handler)
    : opts_(std::move(opts)), handler_(std::move(handler)) {}

HttpServer::~HttpServer() {
    stop();
    // Connection threads use this object; give them time to notice the flag.
    for (int i = 0; i < 100 && connections_.load() > 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (listen_fd_ >= 0) ::close(listen_fd_);
}

void HttpServer::bind() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string port = std::to_string(opts_.port);
    const int gai = ::getaddrinfo(opts_.host.c_str(), port.c_str(), &hints, &res);
    SPECDEC_CHECK(gai == 0, "cannot resolve host '", opts_.host, "': ", gai_strerror(gai));
    std::string err = "no address";
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
        const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
            listen_fd_ = fd;
            sockaddr_storage ss{};
            socklen_t len = sizeof ss;
            ::getsockname(fd, (sockaddr*)&ss, &len);
            port_ = ss.ss_family == AF_INET6 ? ntohs(((sockaddr_in6*)&ss)->sin6_port)
                                             : ntohs(((sockaddr_in*)&ss)->sin_port);
            break;
        }
        err = std::strerror(errno);
        ::close(fd);
    }
    ::freeaddrinfo(res);
    SPECDEC_CHECK(listen_fd_ >= 0, "cannot listen on ", opts_.host, ":", opts_.port, ": ", err);
}

void HttpServer::stop() { stopping_.store(true); }

void HttpServer::run() {
    SPECDEC_CHECK(listen_fd_ >= 0, "HttpServer::run before bind");
    while (!stopping_.load()) {
        pollfd p{listen_fd_, POLLIN, 0};
        const int r = ::poll(&p, 1, kPollSliceMs);
        if (r <= 0) continue;
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // SSE tokens go out at once
        if (connections_.load() >= opts_.max_connections) {
            send_simple(fd, 503, "too many connections");
            ::close(fd);
            continue;
        }
        connections_.fetch_add(1);
        try {
            std::thread([this, fd] {
                try {
                    serve_connection(fd);
                } catch (...) {
                    // A handler bug must cost one connection, never the process.
                }
                ::close(fd);
                connections_.fetch_sub(1);
            }).detach();
        } catch (const std::system_error&) {
            connections_.fetch_sub(1);
            send_simple(fd, 503, "cannot start a connection thread");
            ::close(fd);
        }
    }
}

void HttpServer::serve_connection(int fd) {
    using clock = std::chrono::steady_clock;
    std::string buf;
    while (!stopping_.load()) {
        // --- headers: idle keep-alive wait, then the whole request in read_timeout.
        size_t end = std::string::npos;
        auto deadline = clock::now() + std::chrono::seconds(buf.empty() ? opts_.keep_alive_idle_s : opts_.read_timeout_s);
        bool got_first = !buf.empty();
        while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
            if (buf.size() > kMaxHeaderBytes) return send_simple(fd, 431, "request headers too large");
            const ReadStatus st = read_some(fd, buf, deadline, stopping_);
            if (st != ReadStatus::Ok) {
                if (st == ReadStatus::Timeout && got_first) send_simple(fd, 408, "request timeout");
                return;
            }
            if (!got_first) {
                got_first = true;
                deadline = clock::now() + std::chrono::seconds(opts_.read_timeout_s);
            }
        }
        HttpRequest req;
        std::string_view head(buf.data(), end);
        const size_t line_end = head.find("\r\n");
        std::string_view line = head.substr(0, line_end);
        const size_t s1 = line.find(' '), s2 = line.rfind(' ');
        if (s1 == std::string_view::npos || s2 == s1) return send_simple(fd, 400, "malformed request line");
        req.method = std::string(line.substr(0, s1));
        req.target = std::string(line.substr(s1 + 1, s2 - s1 - 1));
        req.version = std::string(line.substr(s2 + 1));
        if (req.version != "HTTP/1.1" && req.version != "HTTP/1.0") return send_simple(fd, 400, "unsupported version");
        req.path = req.target.substr(0, req.target.find('?'));
        if (line_end != std::string_view::npos) {
            std::string_view rest = head.substr(line_end + 2);
            while (!rest.empty()) {
                const size_t e = rest.find("\r\n");
                std::string_view h = rest.substr(0, e);
                rest = e == std::string_view::npos ? std::string_view{} : rest.substr(e + 2);
                const size_t colon = h.find(':');
                if (colon == std::string_view::npos) return send_simple(fd, 400, "malformed header");
                req.headers.emplace_back(lower(trim(h.substr(0, colon))), std::string(trim(h.substr(colon + 1))));
            }
        }
        buf.erase(0, end + 4);

        // --- body
        if (!req.header("transfer-encoding").empty()) return send_simple(fd, 501, "chunked request bodies are not supported");
        size_t length = 0;
        const std::string cl = req.header("content-length");
        if (!cl.empty()) {
            if (cl.find_first_not_of("0123456789") != std::string::npos || cl.size() > 12)
                return send_simple(fd, 400, "bad Content-Length");
            length = std::stoull(cl);
        }
        if (length > opts_.max_body_bytes) return send_simple(fd, 413, "request body too large");
        if (length > buf.size() && lower(req.header("expect")) == "100-continue") {
            const std::string cont = "HTTP/1.1 100 Continue\r\n\r\n";
            if (::send(fd, cont.data(), cont.size(), MSG_NOSIGNAL) < 0) return;
        }
        deadline = clock::now() + std::chrono::seconds(opts_.read_timeout_s);
        while (buf.size() < length) {
            const ReadStatus st = read_some(fd, buf, deadline, stopping_);
            if (st == ReadStatus::Timeout) return send_simple(fd, 408, "request body timeout");
            if (st != ReadStatus::Ok) return;
        }
        req.body = buf.substr(0, length);
        buf.erase(0, length);

        const std::string conn = lower(req.header("connection"));
        const bool keep = req.version == "HTTP/1.1" ? conn != "close" : conn == "keep-alive";
        HttpResponder res(fd, keep);
        handler_(req, res);
        if (!res.answered()) res.respond(500, "application/json", "{\"error\":{\"message\":\"no response\"}}");
        if (!res.keep_alive()) return;
    }
}

}  // namespace specdec::server
