// A small HTTP/1.1 server on POSIX sockets for `specdec serve`.
//
// Why not cpp-httplib: Debian's libcpp-httplib-dev 0.11.4 is the split build
// (httplib.h only declares; the code lives in libcpp-httplib.so), and the
// build does not link that library, so including it cannot link. This covers
// exactly what the OpenAI API needs: Content-Length request bodies (with
// Expect: 100-continue), keep-alive, fixed-length responses, chunked streaming
// whose writes report a gone client, and a cheap "has the peer hung up?" check
// that works for non-streaming requests too. One thread per connection, with a
// cap: a connection over the cap is answered 503 and closed.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specdec::server {

struct HttpRequest {
    std::string method, target, path, version;
    std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
    std::string body;
    // First value of a header (name lower-case), "" when absent.
    std::string header(std::string_view name) const;
};

// The response side of one request; the handler must answer exactly once
// (respond, or begin_stream ... end_stream).
class HttpResponder {
public:
    HttpResponder(int fd, bool keep_alive) : fd_(fd), keep_alive_(keep_alive) {}
    bool respond(int status, const std::string& content_type, const std::string& body,
                 const std::vector<std::pair<std::string, std::string>>& extra_headers = {});
    bool begin_stream(int status, const std::string& content_type);
    // False once the client is gone; the handler should stop generating.
    bool write_chunk(std::string_view data);
    bool end_stream();
    // Non-blocking: true when the peer closed its side or the socket broke.
    bool peer_closed() const;
    bool answered() const { return answered_; }
    bool keep_alive() const { return keep_alive_ && ok_; }

private:
    bool send_all(std::string_view data);
    int fd_;
    bool keep_alive_;
    bool answered_ = false, streaming_ = false, ok_ = true;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponder&)>;

struct HttpServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;
    int max_connections = 64;
    size_t max_body_bytes = 16u << 20;
    int read_timeout_s = 30;       // a request must arrive completely within this
    int keep_alive_idle_s = 5;     // idle keep-alive connections are closed after this
};

class HttpServer {
public:
    explicit HttpServer(HttpServerOptions opts, HttpHandler handler);
    ~HttpServer();
    // Binds and listens; throws specdec::Error when the address is unusable.
    void bind();
    int port() const { return port_; }
    // Accepts until stop() is called (from another thread or a signal handler).
    void run();
    void stop();

private:
    void serve_connection(int fd);

    HttpServerOptions opts_;
    HttpHandler handler_;
    int listen_fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stopping_{false};
    std::atomic<int> connections_{0};
};

// Reason phrase for a status code.
const char* http_reason(int status);

}  // namespace specdec::server
