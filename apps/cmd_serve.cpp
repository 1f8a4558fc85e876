// specdec serve: an OpenAI-compatible HTTP server over one engine (plus an
// optional draft engine), with continuous batching and speculative decoding
// per request (src/server/batch_scheduler.h). HTTP is Debian's
// cpp-httplib: its worker threads (a pool that grows on demand up to a bound,
// src/server/http_support.h) parse, validate and tokenize (the tokenizer is
// immutable, so that is safe in parallel and a bad request is refused before
// it queues); the scheduler thread alone touches the model and the KV cache.
#include <CLI/CLI.hpp>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string_view>
#include <thread>

#include "cli_commands.h"
#include "lookup_cli_options.h"
#include "residency_cli_option.h"
#include "ssd_cli_options.h"
#include "core/error.h"
#include "runtime/draft_source.h"
#include "runtime/engine.h"
#include "runtime/model_locator.h"
#include "sample/sampler.h"
#include "sched/spec_config.h"
#include "sched/ssd_config.h"
#include "specdec/engine.h"
#include "server/batch_scheduler.h"
#include "server/chat_page.h"
#include "server/http_support.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"

namespace specdec::cli {

namespace {

using server::ApiError;
using server::Endpoint;
using server::JobEvent;
using Request = httplib::Request;
using Response = httplib::Response;

// Counted by SIGINT/SIGTERM (the first begins a graceful shutdown, a second
// cuts its grace short); a watcher thread does the actual shutting down.
std::atomic<int> g_signals{0};
std::atomic<int> g_last_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_signal(int sig) {
    g_last_signal.store(sig);
    g_signals.fetch_add(1);
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

// A handler's answer; kDeferred: a streaming response records its own status
// in the metrics when the stream ends.
constexpr int kDeferred = -1;

// State of one SSE response, shared by httplib's content provider (called on
// the connection's thread after the handler returned) and its releaser.
struct StreamState {
    Endpoint ep;
    std::string endpoint, id, model;
    int64_t created = 0;
    bool include_usage = false;
    bool provenance = false;  // chunks carry specdec.provenance
    std::shared_ptr<server::JobChannel> channel;
    int fd = -1;             // the request's socket, for the hang-up check
    bool role_sent = false;  // chat: the first chunk carries the role
    bool finished = false;
    int status = 499;        // nginx's "client closed request" until finished
};

class Server {
public:
    Server(runtime::Engine& engine, server::BatchScheduler& sched, server::Metrics& metrics, server::ServerInfo info,
           std::string api_key, size_t max_body)
        : engine_(engine), sched_(sched), metrics_(metrics), info_(std::move(info)), api_key_(std::move(api_key)),
          max_body_(max_body), created_(std::time(nullptr)) {}

    void install(httplib::Server& http) {
        // The chat page: static HTML that holds no data, so it is served
        // without the API key (the page asks for the key and sends it with
        // its API requests, which check it like any client's).
        const auto page = [](const Request&, const std::string&, Response& res) {
            const std::string_view html = server::chat_page_html();
            res.set_content(html.data(), html.size(), "text/html; charset=utf-8");
            res.set_header("Cache-Control", "no-cache");
            return 200;
        };
        http.Get("/", wrap("/", page, /*public_route=*/true));
        http.Get("/health", wrap("/health", [this](const Request&, const std::string&, Response& res) {
            // A load balancer stops sending here while running requests finish.
            if (sched_.shutting_down())
                throw ApiError(503, "the server is shutting down", "", "shutting_down", "server_error");
            nlohmann::json j{{"status", "ok"}, {"model", info_.model_id}, {"queue_depth", sched_.queue_depth()}};
            res.set_content(server::dump(j), "application/json");
            return 200;
        }));
        http.Get("/v1/models", wrap("/v1/models", [this](const Request&, const std::string&, Response& res) {
            res.set_content(server::dump(server::models_json(info_, created_)), "application/json");
            return 200;
        }));
        http.Get("/metrics", wrap("/metrics", [this](const Request&, const std::string&, Response& res) {
            res.set_content(metrics_.render(), "text/plain; version=0.0.4; charset=utf-8");
            return 200;
        }));
        http.Post("/v1/chat/completions",
                  wrap_reading("/v1/chat/completions", [this](const Request& req, const std::string& body,
                                                              Response& res) {
                      return generate(Endpoint::Chat, req, body, res);
                  }));
        http.Post("/v1/completions",
                  wrap_reading("/v1/completions", [this](const Request& req, const std::string& body, Response& res) {
                      return generate(Endpoint::Completion, req, body, res);
                  }));
        // Everything else: a known path with the wrong method is 405, an
        // unknown one 404; both after the API key check, like every route.
        // Methods that carry a body read it here too, under the same limit.
        const auto other = [](const Request& req, const std::string&, Response& res) { return unrouted(req, res); };
        http.Get(".*", wrap("", other));
        http.Post(".*", wrap_reading("", other));
        http.Put(".*", wrap_reading("", other));
        http.Patch(".*", wrap_reading("", other));
        http.Delete(".*", wrap_reading("", other));
        http.Options(".*", wrap("", other));
        // Errors httplib answers itself (a malformed request line or header, a URI too long)
        // get the OpenAI error shape too.
        http.set_error_handler(httplib::Server::HandlerWithResponse([](const Request&, Response& res) {
            if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
            res.set_content(server::http_error_json(res.status), "application/json");
            return httplib::Server::HandlerResponse::Handled;
        }));
    }

private:
    // A route: the request, its body, the response; returns the status (or kDeferred).
    using Body = std::function<int(const Request&, const std::string&, Response&)>;

    // Methods without a body (GET, OPTIONS): httplib reads nothing. A public
    // route is answered without the API key.
    httplib::Server::Handler wrap(std::string endpoint, Body body, bool public_route = false) {
        return [this, endpoint = std::move(endpoint), body = std::move(body), public_route](const Request& req,
                                                                                            Response& res) {
            answer(endpoint, req, res, [&] { return body(req, req.body, res); }, public_route);
        };
    }

    // Methods with a body: read here, after the API key check, under
    // --max-body-mb (server::read_body says why not by httplib).
    httplib::Server::HandlerWithContentReader wrap_reading(std::string endpoint, Body body) {
        return [this, endpoint = std::move(endpoint), body = std::move(body)](
                   const Request& req, Response& res, const httplib::ContentReader& reader) {
            answer(endpoint, req, res, [&] { return body(req, server::read_body(req, reader, res, max_body_), res); });
        };
    }

    // API key check, OpenAI errors and metrics around one route. Unknown
    // paths are counted as "other" so a client cannot grow the label set.
    void answer(const std::string& endpoint, const Request& req, Response& res, const std::function<int()>& run,
                bool public_route = false) {
        const std::string name = endpoint.empty() ? route_name(req.path) : endpoint;
        int status = 500;
        try {
            if (!public_route) server::check_api_key(req.get_header_value("Authorization"), api_key_);
            status = run();
        } catch (const ApiError& e) {
            status = e.status;
            send_error(res, e);
        } catch (const std::exception& e) {
            status = 500;
            send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "", "", "server_error"));
        }
        if (status != kDeferred) metrics_.record_request(name, status);
    }

    static std::string route_name(const std::string& path) {
        for (const char* p : {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics", "/"})
            if (path == p) return p;
        return "other";
    }

    static void send_error(Response& res, const ApiError& e) {
        res.status = e.status;
        // Queue full (429) or shutting down (503): worth retrying, elsewhere or soon.
        if (e.status == 429 || e.status == 503) res.set_header("Retry-After", "1");
        res.set_content(server::dump(server::error_json(e)), "application/json");
    }

    static int unrouted(const Request& req, Response&) {
        const std::string& p = req.path;
        for (const char* get : {"/health", "/v1/models", "/metrics", "/"})
            if (p == get) throw ApiError(405, "use GET for " + p, "", "method_not_allowed");
        for (const char* post : {"/v1/chat/completions", "/v1/completions"})
            if (p == post) throw ApiError(405, "use POST for " + p, "", "method_not_allowed");
        throw ApiError(404, "no route for " + req.method + " " + p, "", "not_found");
    }

    // Validates, tokenizes and queues one request; answers it (JSON or SSE).
    int generate(Endpoint ep, const Request& req, const std::string& body, Response& res) {
        // parse_request admits only the methods this server can run (chain
        // and tree only with a draft model).
        server::ParsedRequest pr = server::parse_request(ep, body, info_);
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
        // Without max_tokens (and no --max-tokens cap), run to the context:
        // after the prompt is committed, each token but the last needs one more slot.
        if (pr.gen.max_tokens <= 0) pr.gen.max_tokens = engine_.n_ctx() - n_prompt + 1;
        const std::string id = (ep == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + random_hex(24);
        job->id = id;
        job->req = std::move(pr.gen);
        job->method = sched::parse_method(pr.spec.method);
        job->draft_k = pr.spec.draft_k;
        job->provenance = pr.spec.provenance;
        auto channel = std::make_shared<server::JobChannel>();
        job->channel = channel;

        switch (sched_.submit(std::move(job))) {
            case server::BatchScheduler::Submit::QueueFull:
                throw ApiError(429, "the server is busy (request queue full); retry later", "", "queue_full",
                               "rate_limit_error");
            case server::BatchScheduler::Submit::Stopped:
                throw ApiError(503, "the server is shutting down", "", "shutting_down", "server_error");
            case server::BatchScheduler::Submit::Ok: break;
        }
        const int64_t created = std::time(nullptr);
        if (pr.stream) return stream(ep, pr, id, created, std::move(channel), req, res);
        return collect(ep, id, created, pr.spec.provenance, *channel, req, res);
    }

    int collect(Endpoint ep, const std::string& id, int64_t created, bool provenance, server::JobChannel& ch,
                const Request& req, Response& res) {
        const int fd = server::request_socket(req);
        std::string text;
        server::Provenance prov;
        while (true) {
            auto ev = ch.pop(std::chrono::milliseconds(100));
            // Checked on every event too: text keeps arriving, so a timeout
            // alone would never notice a client that gave up.
            if ((!ev || ev->kind == JobEvent::Text) && server::peer_closed(fd)) {
                ch.cancel();
                res.status = 499;  // nginx's "client closed request"; nobody reads it
                res.set_header("Connection", "close");
                return 499;
            }
            if (!ev) continue;
            if (ev->kind == JobEvent::Text) {
                text += ev->text;
                prov.append(ev->provenance);
                continue;
            }
            if (ev->kind == JobEvent::Failed) throw ApiError(ev->status, ev->message, "", ev->code, "server_error");
            text += ev->text;
            prov.append(ev->provenance);
            const server::Usage u{ev->n_prompt, ev->n_generated};
            auto j = ep == Endpoint::Chat
                         ? server::chat_response(id, created, info_.model_id, text, ev->finish_reason, u)
                         : server::completion_response(id, created, info_.model_id, text, ev->finish_reason, u);
            if (provenance) server::add_provenance(j, prov);
            res.status = 200;
            res.set_content(server::dump(j), "application/json");
            return 200;
        }
    }

    // `prov`: the text's provenance, sent when the request asked for it.
    static std::string chunk(const StreamState& st, const std::string& text, const std::string& finish,
                             bool role = false, const server::Provenance* prov = nullptr) {
        auto j = st.ep == Endpoint::Chat ? server::chat_chunk(st.id, st.created, st.model, text, finish, role)
                                         : server::completion_chunk(st.id, st.created, st.model, text, finish);
        if (st.provenance && prov) server::add_provenance(j, *prov);
        return server::sse_event(j);
    }

    // Answers with an SSE stream that httplib pulls from the job's channel
    // after this returns. A write that fails, or a hang-up seen while waiting,
    // ends the stream (the provider returns false and httplib drops the
    // connection); the releaser then cancels the job and records the status.
    int stream(Endpoint ep, const server::ParsedRequest& pr, const std::string& id, int64_t created,
               std::shared_ptr<server::JobChannel> channel, const Request& req, Response& res) {
        auto st = std::make_shared<StreamState>();
        st->ep = ep;
        st->endpoint = ep == Endpoint::Chat ? "/v1/chat/completions" : "/v1/completions";
        st->id = id;
        st->model = info_.model_id;
        st->created = created;
        st->include_usage = pr.include_usage;
        st->provenance = pr.spec.provenance;
        st->channel = std::move(channel);
        st->fd = server::request_socket(req);
        server::disable_response_compression(req);
        res.status = 200;
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream",
            [st](size_t, httplib::DataSink& sink) {
                auto& ch = *st->channel;
                if (st->ep == Endpoint::Chat && !st->role_sent) {
                    st->role_sent = true;
                    const std::string c = chunk(*st, "", "", true);
                    return sink.write(c.data(), c.size());
                }
                auto ev = ch.pop(std::chrono::milliseconds(100));
                if (!ev) return !server::peer_closed(st->fd);
                std::string out;
                if (ev->kind == JobEvent::Text) {
                    out = chunk(*st, ev->text, "", false, &ev->provenance);
                    return sink.write(out.data(), out.size());
                }
                if (ev->kind == JobEvent::Failed) {
                    // The status line is gone already: report in the stream, as OpenAI does.
                    out = server::sse_event(
                        server::error_json(ApiError(ev->status, ev->message, "", ev->code, "server_error")));
                    st->status = ev->status;
                } else {
                    // The rest of the text (and of the token counts) before the finish chunk.
                    if (!ev->text.empty() || !ev->provenance.empty())
                        out = chunk(*st, ev->text, "", false, &ev->provenance);
                    out += chunk(*st, "", ev->finish_reason);
                    if (st->include_usage)
                        out += server::sse_event(server::usage_chunk(st->ep, st->id, st->created, st->model,
                                                                     server::Usage{ev->n_prompt, ev->n_generated}));
                    st->status = 200;
                }
                out += "data: [DONE]\n\n";
                if (!sink.write(out.data(), out.size())) {
                    st->status = 499;
                    return false;
                }
                st->finished = true;
                sink.done();
                return true;
            },
            [st, this](bool) {
                if (!st->finished) {
                    st->channel->cancel();
                    st->status = 499;
                }
                metrics_.record_request(st->endpoint, st->status);
            });
        return kDeferred;
    }

    runtime::Engine& engine_;
    server::BatchScheduler& sched_;
    server::Metrics& metrics_;
    server::ServerInfo info_;
    std::string api_key_;
    size_t max_body_;
    int64_t created_;
};

// " (a, b, c)" for a non-empty list of request ids.
std::string id_list(const std::vector<std::string>& ids) {
    std::string s;
    for (const auto& id : ids) s += (s.empty() ? " (" : ", ") + id;
    return s.empty() ? s : s + ")";
}

}  // namespace

int cmd_serve(int argc, char** argv) {
    CLI::App app{"OpenAI-compatible HTTP server with continuous batching", "specdec serve"};
    add_mmap_option(app);
    std::string model, draft, method = "auto", api_key, draft_layers;
    std::string host = "127.0.0.1";
    int port = 8080;
    server::SchedulerOptions sopts;
    int threads = 0, ctx = 0;
    app.add_option("-m,--model", model, "target GGUF file or model name (default: the manifest's default)");
    app.add_option("-d,--draft", draft, "draft GGUF file or model name (speculative methods)");
    app.add_option("--draft-layers", draft_layers,
                   "self-speculation (no -d needed): the draft is the target's first L layers (L), the layers "
                   "listed (0-7,10,12: kept in order, then the final norm and LM head), or auto (the choice "
                   "`specdec calibrate` saved next to the model)");
    std::string eagle3;
    app.add_option("--eagle3", eagle3,
                   "EAGLE-3 draft head for auto, chain and tree (a directory with config.json and "
                   "model.safetensors, Hugging Face or vllm speculators layout, or llama.cpp's eagle3 GGUF file), "
                   "instead of -d");
    app.add_option("--method", method,
                   "default speculation method of greedy requests: auto (the cost model picks each round's "
                   "draft chain, lookup chain or none; the default), ar, chain, tree (these two need a draft "
                   "model or an EAGLE-3 head), ssd (needs a draft model) or ngram; sampled requests default to "
                   "ar (a seed then reproduces the text); a request may pick another with "
                   "{\"specdec\": {\"method\": ...}}")
        ->check(CLI::IsMember({"auto", "ar", "chain", "tree", "ngram", "ssd"}));
    sched::SpecConfig& spec = sopts.spec;
    app.add_option("--draft-k", spec.draft_k, "draft chain length (chain, ngram)")->check(CLI::Range(1, 64));
    app.add_option("--tree-topk", spec.tree_topk, "tree: children per expanded node")->check(CLI::Range(1, 64));
    app.add_option("--tree-depth", spec.tree_depth, "tree: max draft depth")->check(CLI::Range(1, 64));
    app.add_option("--tree-budget", spec.tree_budget, "tree: max nodes incl. the root")->check(CLI::Range(1, 1024));
    add_lookup_options(app, spec);
    add_auto_options(app, spec);
    // SSD (Saguaro): a proposer of the continuous batch like the others (batch_scheduler.h).
    sched::SsdConfig& ssd = sopts.ssd;
    SsdCliOptions ssd_cli;
    ssd_cli.add_to(app, ssd, "ssd: speculation length K (a request's draft_k overrides it)");
    std::string ssd_draft;
    bool allow_remote = false;
    add_remote_draft_options(app, ssd_draft, allow_remote, &ssd.link_timeout_ms,
                             "ssd: the draft side is `specdec draft-serve` at this address (tcp://127.0.0.1:PORT or "
                             "ipc://PATH) instead of a thread over -d's model; -d may still draft chain and tree");
    app.add_option("--host", host, "address to bind (default loopback)");
    app.add_option("--port", port, "port (0: pick a free one and print it)")->check(CLI::Range(0, 65535));
    app.add_option("--api-key", api_key, "require 'Authorization: Bearer KEY' (default: $SPECDEC_API_KEY)");
    app.add_option("--max-batch", sopts.max_batch, "sequences decoded together")->check(CLI::Range(1, 256));
    app.add_option("--max-queue", sopts.max_queue, "requests waiting beyond the batch before 429")
        ->check(CLI::Range(0, 100000));
    app.add_option("-c,--ctx", ctx, "context per sequence in tokens (0 = min(model, 4096))")
        ->check(CLI::NonNegativeNumber);
    app.add_option("-t,--threads", threads, "threads (0 = all cores)")->check(CLI::NonNegativeNumber);
    std::string chat_template;
    app.add_option("--chat-template", chat_template, "Jinja chat template file used instead of the model's")
        ->check(CLI::ExistingFile);
    // Limits for a server facing clients nobody controls.
    int max_body_mb = 16, read_timeout = 10, header_timeout = 10, idle_timeout = 5, shutdown_grace = 5;
    int max_tokens = 4096;
    sopts.request_timeout_s = 600;
    app.add_option("--max-body-mb", max_body_mb, "largest request body in MiB; a larger one gets 413 (default 16)")
        ->check(CLI::Range(1, 4096));
    app.add_option("--max-tokens", max_tokens,
                   "cap on max_tokens: a request asking for more gets 400, one naming none gets the cap "
                   "(completions: 16, OpenAI's default, if less); the context still ends any request "
                   "(default 4096; 0: no cap)")
        ->check(CLI::Range(0, 1 << 20));
    app.add_option("--request-timeout", sopts.request_timeout_s,
                   "seconds a request may wait and run; then it ends with 504 (streaming: an error event) "
                   "(default 600; 0: no limit)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--read-timeout", read_timeout,
                   "seconds a client may send nothing while its request's headers or body are read, or read "
                   "nothing of its response, before it is dropped (default 10)")
        ->check(CLI::Range(1, 3600));
    app.add_option("--header-timeout", header_timeout,
                   "seconds a client has, from the first byte of a request, to send its request line and "
                   "headers, however steadily it trickles them; then the connection is closed unanswered "
                   "(default 10)")
        ->check(CLI::Range(1, 3600));
    app.add_option("--idle-timeout", idle_timeout,
                   "seconds an open connection may wait without a request before it is closed (default 5)")
        ->check(CLI::Range(1, 3600));
    app.add_option("--shutdown-grace", shutdown_grace,
                   "on SIGTERM/SIGINT: seconds running requests get to finish (waiting ones are cancelled at "
                   "once) before the rest are cancelled, and the exit status is 0; a second signal cancels "
                   "them at once, and the exit status is 128 + its number (130 SIGINT, 143 SIGTERM); either "
                   "way stderr names the requests finished and cancelled (default 5)")
        ->check(CLI::Range(0, 3600));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    if (api_key.empty()) {
        if (const char* k = std::getenv("SPECDEC_API_KEY")) api_key = k;
    }
    ssd_cli.apply(ssd);
    ssd.ngram_min = spec.ngram_min;
    ssd.ngram_max = spec.ngram_max;
    ssd.validate();
    const bool self_spec = !draft_layers.empty();
    SPECDEC_CHECK(!self_spec || draft.empty(), "give either -d DRAFT or --draft-layers L, not both");
    const bool head = !eagle3.empty();
    SPECDEC_CHECK(!head || (draft.empty() && !self_spec),
                  "give either --eagle3 HEAD or -d DRAFT / --draft-layers L, not both");
    SPECDEC_CHECK(!head || method != "ssd" || !ssd_draft.empty(),
                  "--method ssd drafts with a draft model (-d DRAFT or --ssd-draft ADDR), not an EAGLE-3 head");
    const auto needs_draft = [](const std::string& m) { return method_needs_draft(sched::parse_method(m)); };
    const bool remote_ssd = !ssd_draft.empty();
    if (remote_ssd) {
        ssd.remote_draft = ssd_draft;
        sopts.ssd_remote = remote_draft_link(ssd_draft, allow_remote);
    }
    SPECDEC_CHECK(!needs_draft(method) || !draft.empty() || self_spec || head || (remote_ssd && method == "ssd"),
                  "--method ", method,
                  " needs a draft model (-d DRAFT), a self-speculation depth (--draft-layers L)",
                  method == "ssd" ? "" : " or an EAGLE-3 head (--eagle3 HEAD)");

    // Fixed malloc thresholds (setting one turns glibc's dynamic ones off):
    // otherwise, once a freed block above 128 KiB (a large request body)
    // raises the mmap threshold, each HTTP worker's arena keeps up to a few
    // MiB of freed memory at its top, and after a load the heap stays near
    // its peak (tools/serve_load.py, 16 clients for 90 s: anonymous RSS less
    // KV about 20 -> 70 MiB; with these: 14 -> 16 MiB).
    ::mallopt(M_MMAP_THRESHOLD, 256 << 10);
    ::mallopt(M_TRIM_THRESHOLD, 128 << 10);

    EngineOptions eopts;  // the public API's (specdec/engine.h)
    eopts.model = runtime::resolve_model(model);
    eopts.threads = threads;
    eopts.ctx = ctx;
    eopts.chat_template = chat_template;
    // Resolved here too (the engine resolves it again when it loads): the
    // default method, and with it the thread split below, depend on it.
    runtime::DraftLayers layers;
    if (self_spec) layers = runtime::resolve_draft_layers(draft_layers, eopts.model);
    if (layers.use_ar && needs_draft(method)) {
        // Output is identical either way (lossless); AR is what calibration measured fastest.
        std::fprintf(stderr, "note: calibration found no draft depth faster than AR; serving with ar by default\n");
        method = "ar";
    }
    spec.method = sched::parse_method(method);
    // The SSD draft side has threads of its own: by default the target takes the rest.
    if (method == "ssd" && !remote_ssd && eopts.threads == 0)
        eopts.threads = std::max(1, (int)std::thread::hardware_concurrency() - ssd.draft_threads);
    eopts.draft = draft;
    eopts.draft_layers = draft_layers;
    eopts.eagle3 = eagle3;  // its cache gets one sequence per target sequence (batch slot)
    // One KV sequence per batch slot (SSD's draft side makes a cache of its
    // own, with its branch slots, at the first ssd request).
    eopts.sequences = sopts.max_batch;
    Engine api_engine(eopts);
    // The batch scheduler drives the engines underneath itself (continuous
    // batching is not in the public API).
    runtime::Engine* engine = &api_engine.target_engine();
    runtime::Engine* draft_engine = api_engine.draft_engine();

    server::ServerInfo info;
    const std::filesystem::path mp(eopts.model);
    info.model_id = mp.stem().string();
    info.model_aliases = {mp.filename().string(), eopts.model};
    if (!model.empty() && model != info.model_id) info.model_aliases.push_back(model);
    info.n_ctx = engine->n_ctx();
    info.available_methods = {"ar", "auto", "ngram"};
    if (draft_engine) info.available_methods.insert(info.available_methods.end(), {"chain", "tree"});
    if (draft_engine || remote_ssd) info.available_methods.push_back("ssd");
    // A head drafts chains and trees (and auto's chains) inside the batch;
    // SSD's draft side runs a draft model only.
    if (head) info.available_methods.insert(info.available_methods.end(), {"chain", "tree"});
    info.default_method = method;
    info.max_tokens = max_tokens;

    server::Metrics metrics;
    server::BatchScheduler sched(*engine, draft_engine, sopts, metrics);
    const size_t max_body = (size_t)max_body_mb << 20;
    Server srv(*engine, sched, metrics, info, api_key, max_body);
    server::HttpServer http;
    srv.install(http);
    // Every waiting or running request holds a worker thread; leave room for
    // /health, /metrics and the 429 answers themselves.
    const size_t max_threads = (size_t)sopts.max_batch + (size_t)sopts.max_queue + 32;
    http.new_task_queue = [max_threads] { return new server::GrowingTaskQueue(max_threads); };
    // A stated Content-Length over the limit: httplib answers 413 (the body
    // reader, server::read_body, applies the same limit to chunked bodies).
    http.set_payload_max_length(max_body);
    // Per read: a stalled client frees its thread. One that trickles header
    // bytes meets the header deadline (server::HttpServer); a body or a
    // response has only the per-read and per-write limits.
    http.set_read_timeout(read_timeout);
    http.set_header_timeout(std::chrono::seconds(header_timeout));
    http.set_write_timeout(read_timeout);  // a client that stops reading its stream is dropped
    http.set_keep_alive_timeout(idle_timeout);
    http.set_keep_alive_max_count(1000);
    http.set_tcp_nodelay(true);  // SSE tokens go out at once
    const int bound = port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, port) ? port : -1);
    SPECDEC_CHECK(bound > 0, "cannot listen on ", host, ":", port, " (address unavailable or in use)");

    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    // On a signal: new and waiting requests get 503 at once, running ones get
    // --shutdown-grace seconds to finish (a second signal: none), then the
    // rest fail with 503 (their handlers answer and return); then stop
    // accepting: listen_after_bind returns once every connection's thread has
    // finished. Started after the scheduler, whose done() it waits for.
    sched.start();
    std::atomic<bool> serving_done{false};
    std::thread watcher([&] {
        using Clock = server::BatchScheduler::Clock;
        while (g_signals.load() == 0 && !serving_done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (serving_done.load()) return;
        std::fprintf(stderr, "specdec serve: %s: shutting down (running requests get %d s to finish)\n",
                     g_last_signal.load() == SIGINT ? "SIGINT" : "SIGTERM", shutdown_grace);
        std::fflush(stderr);
        sched.begin_shutdown(Clock::now() + std::chrono::seconds(shutdown_grace));
        bool forced = false;
        while (!sched.done()) {
            if (!forced && g_signals.load() > 1) {
                forced = true;
                std::fprintf(stderr, "specdec serve: %s again: cancelling running requests now\n",
                             g_last_signal.load() == SIGINT ? "SIGINT" : "SIGTERM");
                std::fflush(stderr);
                sched.begin_shutdown(Clock::now());
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        const server::ShutdownReport r = sched.stop();
        std::fprintf(stderr,
                     "specdec serve: shutdown: %zu running finished%s, %zu running cancelled%s, %zu waiting "
                     "cancelled%s\n",
                     r.finished.size(), id_list(r.finished).c_str(), r.cancelled.size(), id_list(r.cancelled).c_str(),
                     r.refused.size(), id_list(r.refused).c_str());
        std::fflush(stderr);
        // stop() before the accept loop runs would be lost.
        while (!http.is_running() && !serving_done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        http.stop();
    });

    std::fprintf(stderr,
                 "specdec serve: listening on http://%s:%d (model %s, ctx %d, max batch %d, queue %d, %d threads, "
                 "max tokens %d, request timeout %g s, method %s%s%s)\n",
                 host.c_str(), bound, info.model_id.c_str(), engine->n_ctx(), sopts.max_batch, sopts.max_queue,
                 (int)engine->pool().size(), max_tokens, sopts.request_timeout_s, method.c_str(),
                 draft_engine ? (", draft " + std::filesystem::path(draft_engine->options().model_path).stem().string())
                                    .c_str()
                 : head       ? (", EAGLE-3 head " + eagle3).c_str()
                              : "",
                 api_key.empty() ? "" : ", API key required");
    std::fflush(stderr);
    const bool ok = http.listen_after_bind();
    serving_done.store(true);
    watcher.join();
    sched.stop();  // idempotent; fails whatever is left
    // A second signal: the shell's status for "ended by that signal", so that
    // a supervisor can tell a forced stop from a graceful one.
    if (g_signals.load() > 1) return 128 + g_last_signal.load();
    return ok || g_signals.load() > 0 ? 0 : 1;
}

}  // namespace specdec::cli
