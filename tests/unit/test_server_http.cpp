// The httplib glue of `specdec serve` (src/server/http_support.h) against a
// real httplib::Server on a loopback port: the growing worker pool, finding a
// request's socket and noticing its client hang up, SSE that stays
// uncompressed, the body size limit (stated length and chunked), and the
// OpenAI shape of httplib's own errors. No model.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
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

// A server listening on 127.0.0.1:<any port> in a thread: specdec's
// HttpServer (what `specdec serve` runs), or httplib's own to compare.
template <class Http>
struct BasicLiveServer {
    Http http;
    std::thread thread;
    int port = -1;

    void start() {
        http.new_task_queue = [] { return new GrowingTaskQueue(8); };
        port = http.bind_to_any_port("127.0.0.1");
        ASSERT_GT(port, 0);
        thread = std::thread([this] { http.listen_after_bind(); });
        for (int i = 0; i < 200 && !http.is_running(); ++i) std::this_thread::sleep_for(5ms);
    }
    ~BasicLiveServer() { stop(); }
    void stop() {
        if (http.is_running()) http.stop();
        if (thread.joinable()) thread.join();
    }
};
using LiveServer = BasicLiveServer<HttpServer>;

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
template <class Http = HttpServer>
struct BodyServer : BasicLiveServer<Http> {
    using BasicLiveServer<Http>::http;
    using BasicLiveServer<Http>::port;
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
        this->start();
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
    BodyServer<> s;
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
    BodyServer<> s;
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

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A client that sends a request line and then one header byte every 200 ms,
// never ending its headers, until the server closes the connection or
// `give_up` passes. Returns the seconds until the close (or -1 when it was
// still open at give_up) and in `answer` whatever the server sent.
double trickle(int port, double give_up, std::string& answer) {
    const int c = connect_to(port);
    if (c < 0) return -2;
    const auto t0 = Clock::now();
    const std::string start = "GET /ok HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    ::send(c, start.data(), start.size(), MSG_NOSIGNAL);
    while (since(t0) < give_up) {
        if (::send(c, "a", 1, MSG_NOSIGNAL) != 1) break;  // reset: closed
        pollfd p{c, POLLIN, 0};
        if (::poll(&p, 1, 200) > 0) {
            char buf[512];
            const ssize_t n = ::recv(c, buf, sizeof buf, 0);
            if (n <= 0) break;  // closed
            answer.append(buf, (size_t)n);
        }
    }
    const double t = since(t0);
    ::close(c);
    return t < give_up ? t : -1;
}

// Sends one request on `c`, returns the answer up to its body "ok"/"slow".
std::string ask(int c, const std::string& path, const std::string& until) {
    send_str(c, "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
    return recv_until(c, until);
}

template <class Http>
void serve_ok_and_slow(BasicLiveServer<Http>& s) {
    s.http.set_read_timeout(5);  // longer than the deadline: only the deadline can end a trickle
    s.http.set_keep_alive_timeout(5);
    s.http.Get("/ok", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok", "text/plain"); });
    s.http.Get("/slow", [](const httplib::Request&, httplib::Response& res) {
        std::this_thread::sleep_for(2500ms);  // past the header deadline: the handler is not cut short
        res.set_content("slow", "text/plain");
    });
    s.start();
}

}  // namespace

TEST(ServerHttp, HeaderDeadlineClosesATricklingClientAndSparesOthers) {
    LiveServer s;
    s.http.set_header_timeout(1500ms);
    serve_ok_and_slow(s);
    std::vector<std::thread> tricklers;
    std::vector<double> closed_after(3, -3);
    std::vector<std::string> answers(3);
    for (int i = 0; i < 3; ++i)
        tricklers.emplace_back([&, i] { closed_after[i] = trickle(s.port, 8.0, answers[i]); });
    // Meanwhile normal clients are answered at once, and a request whose
    // handler runs past the deadline, then a second on the same kept-alive
    // connection 1 s later, are answered too: the deadline covers a
    // request's headers only, counted from its own first byte.
    std::this_thread::sleep_for(300ms);
    for (int i = 0; i < 5; ++i) {
        const int c = connect_to(s.port);
        ASSERT_GE(c, 0);
        const auto t0 = Clock::now();
        const std::string got = ask(c, "/ok", "ok");
        EXPECT_LT(since(t0), 1.0);
        EXPECT_NE(got.find("HTTP/1.1 200"), std::string::npos) << got;
        ::close(c);
    }
    const int c = connect_to(s.port);
    ASSERT_GE(c, 0);
    EXPECT_NE(ask(c, "/slow", "slow").find("HTTP/1.1 200"), std::string::npos);
    std::this_thread::sleep_for(1000ms);
    EXPECT_NE(ask(c, "/ok", "ok").find("HTTP/1.1 200"), std::string::npos);
    ::close(c);
    for (auto& t : tricklers) t.join();
    for (int i = 0; i < 3; ++i) {
        EXPECT_GE(closed_after[i], 1.4) << i;  // not before the deadline
        EXPECT_LT(closed_after[i], 3.0) << i;  // 1.5 s deadline + slack, well under the 5 s read timeout
        EXPECT_EQ(answers[i], "") << i;        // closed unanswered
    }
}

TEST(ServerHttp, WithoutTheDeadlineATricklerStaysConnected) {
    // The same client against httplib's own server (per-read timeout only)
    // is still connected when the deadline above would have closed it twice over.
    BasicLiveServer<httplib::Server> s;
    serve_ok_and_slow(s);
    std::string answer;
    EXPECT_EQ(trickle(s.port, 3.5, answer), -1);
}

TEST(ServerHttp, StopDoesNotWaitForClientsThatHaveNotAsked) {
    // A client mid-headers (deadline 30 s) and one idle on a kept-alive
    // connection (idle timeout 5 s) do not hold a stop up.
    LiveServer s;
    s.http.set_header_timeout(30s);
    serve_ok_and_slow(s);
    std::string answer;
    double closed_after = 0;
    std::thread trickler([&] { closed_after = trickle(s.port, 20.0, answer); });
    const int idle = connect_to(s.port);
    ASSERT_GE(idle, 0);
    EXPECT_NE(ask(idle, "/ok", "ok").find("HTTP/1.1 200"), std::string::npos);
    std::this_thread::sleep_for(500ms);
    const auto t0 = Clock::now();
    s.stop();
    EXPECT_LT(since(t0), 1.5);
    trickler.join();
    EXPECT_GT(closed_after, 0);
    EXPECT_LT(closed_after, 3.0);
    EXPECT_EQ(answer, "");  // closed unanswered, not a misleading 400
    char b;
    EXPECT_EQ(::recv(idle, &b, 1, 0), 0);  // the idle connection was closed
    ::close(idle);
}

namespace {

// A client that sends a 4 MiB chunked body (over the 1000-byte limit) in
// full, as most clients do before they read, then reads the answer. `sent`:
// whether every byte went out (no reset from the server on the way).
template <class Http>
std::string send_all_then_read(BodyServer<Http>& s, bool* sent = nullptr) {
    const int c = connect_to(s.port);
    if (c < 0) return "no connection";
    const std::string raw = post("Transfer-Encoding: chunked\r\n", chunked(std::vector<size_t>(64, 65536)));
    size_t off = 0;
    while (off < raw.size()) {
        const ssize_t n = ::send(c, raw.data() + off, std::min<size_t>(raw.size() - off, 65536), MSG_NOSIGNAL);
        if (n <= 0) break;  // reset by the server
        // After the first piece, time for the server to answer and close, as
        // a slower client (or a loaded machine) gives it: the rest arrives
        // at a socket the server has closed.
        if (off == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        off += (size_t)n;
    }
    if (sent) *sent = off == raw.size();
    std::string got = recv_until(c, "payload_too_large");
    ::close(c);
    return got;
}

}  // namespace

TEST(ServerHttp, AnAnswerBeforeTheBodyEndsReachesTheClient) {
    // The body reader answers 413 once the limit is passed, with most of the
    // body unread, and the server closes lingering: a client still sending
    // has its whole body taken (and discarded), no reset, and then reads its
    // 413. (A reset made tools/serve_load.py's asyncio client, and HTTP
    // libraries that send before they read, lose the answer.)
    BodyServer<> s;
    for (int i = 0; i < 5; ++i) {
        bool sent = false;
        const std::string got = send_all_then_read(s, &sent);
        EXPECT_TRUE(sent) << i;
        EXPECT_NE(got.find("HTTP/1.1 413"), std::string::npos) << i << ": " << got.substr(0, 200);
    }
}
