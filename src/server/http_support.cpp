#include "server/http_support.h"

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>

#include "server/openai_protocol.h"

namespace specdec::server {

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

}  // namespace specdec::server
