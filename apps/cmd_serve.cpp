// specdec serve: an OpenAI-compatible HTTP server over one engine, with
// continuous batching (src/server/batch_scheduler.h). HTTP threads parse,
// validate and tokenize (the tokenizer is immutable, so that is safe in
// parallel and a bad request is refused before it queues); the scheduler
// thread alone touches the model and the KV cache.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "cli_commands.h"
#include "core/error.h"
#include "runtime/engine.h"
#include "runtime/model_locator.h"
#include "sample/sampler.h"
#include "server/batch_scheduler.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"

namespace specdec::cli {

namespace {

using server::ApiError;
using server::Endpoint;
using server::HttpRequest;
using server::HttpResponder;
using server::JobEvent;

std::atomic<server::HttpServer*> g_server{nullptr};

extern "C" void on_signal(int) {
    if (auto* s = g_server.load()) s->stop();
}

std::string random_hex(size_t n) {
    thread_local std::mt19937_64 gen{std::random_device{}()};
    static const char* digits = "0123456789abcdef";
    std::string s(n, '0');
    for (auto& c : s) c = digits[gen() & 15];
    return s;
}

uint64_t random_seed() {
    thread_local std::mt19937_64 gen{std::random_device{}()};
    return gen();
}

class Server {
public:
    Server(runtime::Engine& engine, server::BatchScheduler& sched, server::Metrics& metrics, server::ServerInfo info,
           std::string api_key)
        : engine_(engine), sched_(sched), metrics_(metrics), info_(std::move(info)), api_key_(std::move(api_key)),
          created_(std::time(nullptr)) {}

    void handle(const HttpRequest& req, HttpResponder& res) {
        const std::string endpoint = route_name(req.path);
        int status = 500;
        try {
            server::check_api_key(req.header("authorization"), api_key_);
            status = dispatch(req, res);
        } catch (const ApiError& e) {
            status = e.status;
            send_error(res, e);
        } catch (const std::exception& e) {
            status = 500;
            send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "", "", "server_error"));
        }
        metrics_.record_request(endpoint, status);
    }

private:
    // Known paths keep their name in the metrics; anything else is "other" so a
    // client cannot grow the label set without bound.
    static std::string route_name(const std::string& path) {
        for (const char* p : {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"})
            if (path == p) return p;
        return "other";
    }

    static void send_error(HttpResponder& res, const ApiError& e) {
        if (res.answered()) return;
        res.respond(e.status, "application/json", server::dump(server::error_json(e)));
    }

    void need_method(const HttpRequest& req, const char* method) {
        if (req.method != method)
            throw ApiError(405, "use " + std::string(method) + " for " + req.path, "", "method_not_allowed");
    }

    int dispatch(const HttpRequest& req, HttpResponder& res) {
        const std::string& p = req.path;
        if (p == "/health") {
            need_method(req, "GET");
            nlohmann::json j{{"status", "ok"}, {"model", info_.model_id}, {"queue_depth", sched_.queue_depth()}};
            res.respond(200, "application/json", server::dump(j));
            return 200;
        }
        if (p == "/v1/models") {
            need_method(req, "GET");
            res.respond(200, "application/json", server::dump(server::models_json(info_, created_)));
            return 200;
        }
        if (p == "/metrics") {
            need_method(req, "GET");
            res.respond(200, "text/plain; version=0.0.4; charset=utf-8", metrics_.render());
            return 200;
        }
        if (p == "/v1/chat/completions") {
            need_method(req, "POST");
            return generate(Endpoint::Chat, req, res);
        }
        if (p == "/v1/completions") {
            need_method(req, "POST");
            return generate(Endpoint::Completion, req, res);
        }
        throw ApiError(404, "no route for " + req.method + " " + p, "", "not_found");
    }

    // Validates, tokenizes and queues one request; answers it (JSON or SSE).
    int generate(Endpoint ep, const HttpRequest& req, HttpResponder& res) {
        server::ParsedRequest pr = server::parse_request(ep, req.body, info_);
        if (pr.spec.method != "ar")  // parse_request admits only available methods
            throw ApiError(400, "method " + pr.spec.method + " not available", "specdec.method",
                           "method_not_available");
        if (!pr.seed_given) pr.gen.sampling.seed = random_seed();
        try {
            sample::validate(pr.gen.sampling);
        } catch (const Error& e) {
            throw ApiError(400, e.what(), "", "invalid_value");
        }
        auto job = std::make_unique<server::Job>();
        try {
            job->prompt = runtime::tokenize_request(engine_, pr.gen);
        } catch (const Error& e) {
            throw ApiError(400, e.what(), ep == Endpoint::Chat ? "messages" : "prompt", "invalid_value");
        }
        const int n_prompt = (int)job->prompt.size();
        if (n_prompt == 0)
            throw ApiError(400, "the prompt is empty after tokenization", ep == Endpoint::Chat ? "messages" : "prompt",
                           "invalid_value");
        if (n_prompt > engine_.n_ctx())
            throw ApiError(400,
                           "This model's maximum context length is " + std::to_string(engine_.n_ctx()) +
                               " tokens, but the prompt has " + std::to_string(n_prompt) + " tokens",
                           ep == Endpoint::Chat ? "messages" : "prompt", "context_length_exceeded");
        // Without max_tokens, run to the context: after the prompt is committed,
        // each token but the last needs one more slot.
        if (pr.gen.max_tokens <= 0) pr.gen.max_tokens = engine_.n_ctx() - n_prompt + 1;
        job->req = std::move(pr.gen);
        auto channel = std::make_shared<server::JobChannel>();
        job->channel = channel;

        switch (sched_.submit(std::move(job))) {
            case server::BatchScheduler::Submit::QueueFull:
                throw ApiError(429, "the server is busy (request queue full); retry later", "", "queue_full",
                               "rate_limit_error");
            case server::BatchScheduler::Submit::Stopped:
                throw ApiError(503, "the server is shutting down", "", "unavailable", "server_error");
            case server::BatchScheduler::Submit::Ok: break;
        }
        const std::string id = (ep == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + random_hex(24);
        const int64_t created = std::time(nullptr);
        return pr.stream ? stream(ep, pr, id, created, *channel, res) : collect(ep, id, created, *channel, res);
    }

    int collect(Endpoint ep, const std::string& id, int64_t created, server::JobChannel& ch, HttpResponder& res) {
        std::string text;
        while (true) {
            auto ev = ch.pop(std::chrono::milliseconds(100));
            // Checked on every event too: text keeps arriving, so a timeout
            // alone would never notice a client that gave up.
            if ((!ev || ev->kind == JobEvent::Text) && res.peer_closed()) {
                ch.cancel();
                return 499;  // nginx's "client closed request"
            }
            if (!ev) continue;
            if (ev->kind == JobEvent::Text) {
                text += ev->text;
                continue;
            }
            if (ev->kind == JobEvent::Failed) throw ApiError(ev->status, ev->message, "", "", "server_error");
            text += ev->text;
            const server::Usage u{ev->n_prompt, ev->n_generated};
            const auto j = ep == Endpoint::Chat
                               ? server::chat_response(id, created, info_.model_id, text, ev->finish_reason, u)
                               : server::completion_response(id, created, info_.model_id, text, ev->finish_reason, u);
            res.respond(200, "application/json", server::dump(j));
            return 200;
        }
    }

    int stream(Endpoint ep, const server::ParsedRequest& pr, const std::string& id, int64_t created,
               server::JobChannel& ch, HttpResponder& res) {
        const std::string& model = info_.model_id;
        auto chunk = [&](const std::string& text, const std::string& finish, bool role = false) {
            return server::sse_event(ep == Endpoint::Chat ? server::chat_chunk(id, created, model, text, finish, role)
                                                          : server::completion_chunk(id, created, model, text, finish));
        };
        auto gone = [&] {
            ch.cancel();
            return 499;
        };
        if (!res.begin_stream(200, "text/event-stream")) return gone();
        if (ep == Endpoint::Chat && !res.write_chunk(chunk("", "", true))) return gone();
        while (true) {
            auto ev = ch.pop(std::chrono::milliseconds(100));
            if (!ev) {
                if (res.peer_closed()) return gone();
                continue;
            }
            if (ev->kind == JobEvent::Text) {
                if (!res.write_chunk(chunk(ev->text, ""))) return gone();
                continue;
            }
            if (ev->kind == JobEvent::Failed) {
                // The status line is gone already: report in the stream, as OpenAI does.
                res.write_chunk(server::sse_event(
                    server::error_json(ApiError(ev->status, ev->message, "", "", "server_error"))));
                res.write_chunk("data: [DONE]\n\n");
                res.end_stream();
                return ev->status;
            }
            if (!ev->text.empty() && !res.write_chunk(chunk(ev->text, ""))) return gone();
            std::string tail = chunk("", ev->finish_reason);
            if (pr.include_usage)
                tail += server::sse_event(
                    server::usage_chunk(ep, id, created, model, server::Usage{ev->n_prompt, ev->n_generated}));
            tail += "data: [DONE]\n\n";
            if (!res.write_chunk(tail)) return gone();
            res.end_stream();
            return 200;
        }
    }

    runtime::Engine& engine_;
    server::BatchScheduler& sched_;
    server::Metrics& metrics_;
    server::ServerInfo info_;
    std::string api_key_;
    int64_t created_;
};

}  // namespace

int cmd_serve(int argc, char** argv) {
    CLI::App app{"OpenAI-compatible HTTP server with continuous batching", "specdec serve"};
    std::string model, draft, method = "ar", api_key;
    server::HttpServerOptions hopts;
    server::SchedulerOptions sopts;
    runtime::EngineOptions eopts;
    app.add_option("-m,--model", model, "target GGUF file or model name (default: the manifest's default)");
    app.add_option("-d,--draft", draft, "draft GGUF file or model name (speculative methods)");
    app.add_option("--method", method, "default speculation method (available now: ar)");
    app.add_option("--host", hopts.host, "address to bind (default loopback)");
    app.add_option("--port", hopts.port, "port (0: pick a free one and print it)")->check(CLI::Range(0, 65535));
    app.add_option("--api-key", api_key, "require 'Authorization: Bearer KEY' (default: $SPECDEC_API_KEY)");
    app.add_option("--max-batch", sopts.max_batch, "sequences decoded together")->check(CLI::Range(1, 256));
    app.add_option("--max-queue", sopts.max_queue, "requests waiting beyond the batch before 429")
        ->check(CLI::Range(0, 100000));
    app.add_option("-c,--ctx", eopts.n_ctx, "context per sequence in tokens (0 = min(model, 4096))")
        ->check(CLI::NonNegativeNumber);
    app.add_option("-t,--threads", eopts.n_threads, "threads (0 = all cores)")->check(CLI::NonNegativeNumber);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    if (api_key.empty()) {
        if (const char* k = std::getenv("SPECDEC_API_KEY")) api_key = k;
    }
    SPECDEC_CHECK(method == "ar", "method ", method,
                  " not available in this build yet (the speculative scheduler has not landed); use --method ar");
    if (!draft.empty()) {
        runtime::resolve_model(draft);  // fail early on a bad name, even if unused yet
        std::fprintf(stderr, "specdec serve: note: the draft model is unused with method ar\n");
    }

    eopts.model_path = runtime::resolve_model(model);
    eopts.n_seq = sopts.max_batch;
    auto engine = runtime::Engine::load(eopts);

    server::ServerInfo info;
    const std::filesystem::path mp(eopts.model_path);
    info.model_id = mp.stem().string();
    info.model_aliases = {mp.filename().string(), eopts.model_path};
    if (!model.empty() && model != info.model_id) info.model_aliases.push_back(model);
    info.n_ctx = engine->n_ctx();

    server::Metrics metrics;
    server::BatchScheduler sched(*engine, sopts, metrics);
    Server srv(*engine, sched, metrics, info, api_key);
    // Every waiting or running request holds a connection; leave room for
    // /health, /metrics and the 429 answers themselves.
    hopts.max_connections = sopts.max_batch + sopts.max_queue + 32;
    server::HttpServer http(hopts, [&srv](const HttpRequest& rq, HttpResponder& rs) { srv.handle(rq, rs); });
    http.bind();

    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
    g_server.store(&http);

    sched.start();
    std::fprintf(stderr, "specdec serve: listening on http://%s:%d (model %s, ctx %d, max batch %d, queue %d, %d threads%s)\n",
                 hopts.host.c_str(), http.port(), info.model_id.c_str(), engine->n_ctx(), sopts.max_batch,
                 sopts.max_queue, (int)engine->pool().size(), api_key.empty() ? "" : ", API key required");
    std::fflush(stderr);
    http.run();
    g_server.store(nullptr);
    std::fprintf(stderr, "specdec serve: shutting down\n");
    sched.stop();  // fails waiting and running requests so their handlers return
    return 0;
}

}  // namespace specdec::cli
