// The httplib glue of `specdec serve` (src/server/http_support.h) against a
// real httplib::Server on a loopback port: the growing worker pool, finding a
// request's socket and noticing its client hang up, SSE that stays
// uncompressed, the body size limit (stated length and chunked), and the
// OpenAI shape of httplib's own errors. No model.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server/http_support.h"
#include "server/openai_protocol.h"

using namespace specdec::server;
using namespace std::chrono_literals;

namespace {

// httplib::Server listening on 127.0.0.1:<any port> in a thread.
struct LiveServer {
    httplib::Server http;
    std::thread thread;
    int port = -1;

    void start() {
        http.new_task_queue = [] { return new GrowingTaskQueue(8); };
        port = http.bind_to_any_port("127.0.0.1");
        ASSERT_GT(port, 0);
        thread = std::thread([this] { http.listen_after_bind(); });
        for (int i = 0; i < 200 && !http.is_running(); ++i) std::this_thread::sleep_for(5ms);
    }
    ~LiveServer() {
        http.stop();
        if (thread.joinable()) thread.join();
    }
};

int connect_to(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd);
        return -1;
    }
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

void send_str(int fd, const std::string& s) { ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), (ssize_t)s.size()); }

// Reads until `until` appears, EOF or the receive timeout.
std::string recv_until(int fd, const std::string& until) {
    std::string got;
    char buf[4096];
    while (got.find(until) == std::string::npos) {
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        got.append(buf, (size_t)n);
    }
    return got;
}

}  // namespace

TEST(ServerHttp, GrowingTaskQueueRunsConcurrentlyWithinItsBound) {
    GrowingTaskQueue q(3);
    EXPECT_EQ(q.threads(), 0u);  // nothing started up front
    std::atomic<int> running{0}, peak{0}, done{0};
    std::atomic<bool> release{false};
    for (int i = 0; i < 6; ++i)
        q.enqueue([&] {
            const int r = ++running;
            for (int p = peak.load(); r > p && !peak.compare_exchange_weak(p, r);) {
            }
            while (!release.load()) std::this_thread::sleep_for(1ms);
            --running;
            ++done;
        });
    for (int i = 0; i < 500 && peak.load() < 3; ++i) std::this_thread::sleep_for(2ms);
    EXPECT_EQ(peak.load(), 3);
    EXPECT_EQ(q.threads(), 3u);
    release.store(true);
    q.shutdown();  // runs what is queued, then joins
    EXPECT_EQ(done.load(), 6);
    EXPECT_EQ(peak.load(), 3);
}

TEST(ServerHttp, FindsTheRequestSocketAndSeesTheClientHangUp) {
    LiveServer s;
    std::atomic<int> found{-2};
    std::atomic<bool> open_while_connected{false}, saw_close{false};
    s.http.Post("/wait", [&](const httplib::Request& req, httplib::Response& res) {
        const int fd = request_socket(req);
        found.store(fd);
        open_while_connected.store(fd >= 0 && !peer_closed(fd));
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        while (std::chrono::steady_clock::now() < deadline && !peer_closed(fd)) std::this_thread::sleep_for(10ms);
        saw_close.store(peer_closed(fd));
        res.set_content("late", "text/plain");
    });
    s.start();
    const int c = connect_to(s.port);
    ASSERT_GE(c, 0);
    send_str(c, "POST /wait HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}");
    for (int i = 0; i < 500 && found.load() == -2; ++i) std::this_thread::sleep_for(2ms);
    EXPECT_GE(found.load(), 0);
    std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(open_while_connected.load());
    EXPECT_FALSE(saw_close.load());
    ::close(c);
    for (int i = 0; i < 500 && !saw_close.load(); ++i) std::this_thread::sleep_for(5ms);
    EXPECT_TRUE(saw_close.load());
    EXPECT_FALSE(peer_closed(-1));
}

TEST(ServerHttp, EventStreamIsChunkedAndNeverCompressed) {
    LiveServer s;
    s.http.Get("/sse", [&](const httplib::Request& req, httplib::Response& res) {
        disable_response_compression(req);
        auto n = std::make_shared<int>(0);
        res.set_chunked_content_provider("text/event-stream", [n](size_t, httplib::DataSink& sink) {
            const std::string ev = "data: {\"i\":" + std::to_string((*n)++) + "}\n\n";
            if (!sink.write(ev.data(), ev.size())) return false;
            if (*n == 3) sink.done();
            return true;
        });
    });
    s.start();
    const int c = connect_to(s.port);
    ASSERT_GE(c, 0);
    send_str(c, "GET /sse HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip, deflate, br\r\nConnection: close\r\n\r\n");
    const std::string got = recv_until(c, "0\r\n\r\n");
    ::close(c);
    EXPECT_NE(got.find("HTTP/1.1 200"), std::string::npos) << got;
    EXPECT_NE(got.find("Transfer-Encoding: chunked"), std::string::npos) << got;
    EXPECT_EQ(got.find("Content-Encoding"), std::string::npos) << got;
    EXPECT_NE(got.find("data: {\"i\":2}"), std::string::npos) << got;
}

TEST(ServerHttp, OpenAiShapeForHttplibErrors) {
    for (int status : {400, 404, 413, 500}) {
        const auto j = nlohmann::json::parse(http_error_json(status));
        ASSERT_TRUE(j.contains("error"));
        for (const char* k : {"message", "type", "param", "code"}) EXPECT_TRUE(j["error"].contains(k)) << status << k;
    }
    EXPECT_EQ(nlohmann::json::parse(http_error_json(413))["error"]["code"], "payload_too_large");
    EXPECT_EQ(nlohmann::json::parse(http_error_json(500))["error"]["type"], "server_error");
}

namespace {

// A body reader with a 1000-byte limit behind POST /body: "ok <size>", or the
// ApiError's status and code.
struct BodyServer : LiveServer {
    BodyServer() {
        http.set_payload_max_length(1000);  // as cmd_serve: the same limit for a stated Content-Length
        http.set_read_timeout(1);
        http.Post("/body", [](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& rd) {
            try {
                const std::string body = read_body(req, rd, res, 1000);
                res.set_content("ok " + std::to_string(body.size()), "text/plain");
            } catch (const ApiError& e) {
                res.status = e.status;
                res.set_content(e.code, "text/plain");
            }
        });
        start();
    }
    // Sends `raw`, returns what comes back until the answer's body ends (or 5 s).
    std::string exchange(const std::string& raw, const std::string& until) {
        const int c = connect_to(port);
        if (c < 0) return "no connection";
        ::send(c, raw.data(), raw.size(), MSG_NOSIGNAL);
        std::string got = recv_until(c, until);
        ::close(c);
        return got;
    }
};

std::string post(const std::string& headers, const std::string& body) {
    return "POST /body HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n" + body;
}

std::string chunked(const std::vector<size_t>& sizes) {
    std::string s;
    for (size_t n : sizes) {
        char len[16];
        std::snprintf(len, sizeof len, "%zx\r\n", n);
        s += len + std::string(n, 'a') + "\r\n";
    }
    return s + "0\r\n\r\n";
}

}  // namespace

TEST(ServerHttp, BodyLimitAppliesToStatedAndChunkedLengths) {
    BodyServer s;
    // Within the limit, stated or chunked.
    EXPECT_NE(s.exchange(post("Content-Length: 1000\r\n", std::string(1000, 'a')), "ok 1000").find("ok 1000"),
              std::string::npos);
    EXPECT_NE(s.exchange(post("Transfer-Encoding: chunked\r\n", chunked({400, 400})), "ok 800").find("ok 800"),
              std::string::npos);
    // Over it: 413, asking the client to close.
    for (const std::string& raw : {post("Content-Length: 1001\r\n", std::string(1001, 'a')),
                                   post("Transfer-Encoding: chunked\r\n", chunked({400, 400, 400}))}) {
        const std::string got = s.exchange(raw, "payload_too_large");
        EXPECT_NE(got.find("HTTP/1.1 413"), std::string::npos) << got;
        EXPECT_NE(got.find("payload_too_large"), std::string::npos) << got;
        EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
    }
}

TEST(ServerHttp, StalledBodyAndMultipartAreClearErrors) {
    BodyServer s;
    // 10 bytes of 100, then silence: 400 after the 1 s read timeout, not a held thread.
    const auto t0 = std::chrono::steady_clock::now();
    const std::string got = s.exchange(post("Content-Length: 100\r\n", std::string(10, 'a')), "incomplete_body");
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(got.find("HTTP/1.1 400"), std::string::npos) << got;
    EXPECT_NE(got.find("incomplete_body"), std::string::npos) << got;
    EXPECT_LT(took, 4.0);
    const std::string mp = s.exchange(
        post("Content-Type: multipart/form-data; boundary=xx\r\nContent-Length: 4\r\n", "--xx"), "unsupported");
    EXPECT_NE(mp.find("HTTP/1.1 415"), std::string::npos) << mp;
}
