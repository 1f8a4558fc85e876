// specdec._core: the engine behind the Python package (python/specdec/__init__.py).
//
// Nothing here decodes or renders a chat on its own: an Engine is the public
// specdec::Engine (include/specdec/engine.h), which `specdec generate` uses
// too; a run calls its generate() on a worker thread, the statistics are the
// CLI's (sched/generation_stats.h), OpenAI requests are parsed by the server's
// parser and answered with the server's response builders
// (server/openai_protocol.h). The Python thread waits for text pieces with the
// GIL released and checks for signals every few milliseconds, so Ctrl-C
// cancels the run between tokens (the text callback returns false) and raises
// KeyboardInterrupt once the worker has stopped.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "sample/sampler.h"
#include "sched/generation_stats.h"
#include "sched/spec_config.h"
#include "server/openai_protocol.h"
#include "specdec/engine.h"

namespace py = pybind11;
using nlohmann::json;

namespace specdec::python {
namespace {

std::string random_hex(int n) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char* digits = "0123456789abcdef";
    std::string s(n, '0');
    for (auto& c : s) c = digits[rng() & 15];
    return s;
}

// The loaded models, shared by an Engine and the runs it started.
struct Models {
    std::unique_ptr<Engine> engine;
    std::string model_id;
    std::atomic<bool> busy{false};  // one run at a time: both use sequence 0 of the caches
};

// What a run decodes: a request and the method, as the CLI or the server resolved them.
struct RunSpec {
    Request req;  // req.method: resolved (the CLI's default rule applied)
    std::optional<server::Endpoint> endpoint;  // set for the OpenAI-shaped calls
};

class Run {
public:
    Run(std::shared_ptr<Models> models, RunSpec spec) : models_(std::move(models)), spec_(std::move(spec)) {
        if (models_->busy.exchange(true))
            throw Error("the engine is busy with another generation (finish or close the previous stream first)");
        id_ = (spec_.endpoint == server::Endpoint::Completion ? "cmpl-" : "chatcmpl-") + random_hex(24);
        created_ = (int64_t)std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
        worker_ = std::thread([this] { work(); });
    }
    ~Run() {
        cancel_ = true;
        if (worker_.joinable()) {
            // The worker never takes the GIL; release it so other Python threads run meanwhile.
            if (PyGILState_Check()) {
                py::gil_scoped_release nogil;
                worker_.join();
            } else {
                worker_.join();
            }
        }
    }

    // The next piece of text (bytes: a piece may end inside a UTF-8
    // sequence), or None once the run has ended (then the engine's error, if
    // any, is raised).
    py::object next() {
        for (;;) {
            std::optional<std::string> piece;
            bool finished = false;
            {
                py::gil_scoped_release nogil;
                std::unique_lock lk(m_);
                cv_.wait_for(lk, std::chrono::milliseconds(20), [&] { return !queue_.empty() || done_; });
                if (!queue_.empty()) {
                    piece = std::move(queue_.front());
                    queue_.pop_front();
                } else if (done_) {
                    finished = true;
                }
            }
            // At every pull, not only when the queue ran dry: a fast model
            // keeps the queue full, and Ctrl-C would then wait for the whole
            // generation (smollm2 at 2 threads decoded 4000 tokens, 171 s,
            // before the KeyboardInterrupt of tests/python/test_python_api.py was seen).
            if (PyErr_CheckSignals() != 0) {  // KeyboardInterrupt: stop between tokens
                cancel();
                throw py::error_already_set();
            }
            if (piece) return py::bytes(*piece);
            if (finished) {
                join();
                if (error_) std::rethrow_exception(error_);
                return py::none();
            }
        }
    }

    // Stops decoding after the current token and waits for the worker.
    void cancel() {
        cancel_ = true;
        join();
    }

    bool finished() const {
        std::lock_guard lk(m_);
        return done_ && queue_.empty();
    }
    const Result& result() const {
        require_done();
        return result_;
    }

    // The statistics the CLI's --json prints, under the same names (and
    // draft_model whenever the engine has a draft).
    py::object stats() const {
        require_done();
        json j = sched::generation_stats(result_);
        if (models_->engine->has_draft()) j["draft_model"] = models_->engine->draft_path();
        return py::module_::import("json").attr("loads")(j.dump());
    }

    // OpenAI shapes, built by the server's own functions (JSON text; the
    // Python side parses it). `final` adds usage to a chunk.
    std::string response_json() const {
        require_done();
        const server::Usage u{result_.n_prompt, result_.n_generated};
        const json j = spec_.endpoint == server::Endpoint::Completion
                           ? server::completion_response(id_, created_, models_->model_id, result_.text,
                                                         result_.finish_reason, u)
                           : server::chat_response(id_, created_, models_->model_id, result_.text,
                                                   result_.finish_reason, u);
        return server::dump(j);
    }
    std::string chunk_json(const std::string& text, const std::string& finish_reason, bool role_chunk) const {
        json j = spec_.endpoint == server::Endpoint::Completion
                     ? server::completion_chunk(id_, created_, models_->model_id, text, finish_reason)
                     : server::chat_chunk(id_, created_, models_->model_id, text, finish_reason, role_chunk);
        if (!finish_reason.empty()) j["usage"] = server::usage_json({result_.n_prompt, result_.n_generated});
        return server::dump(j);
    }

private:
    void require_done() const {
        std::lock_guard lk(m_);
        if (!done_ || worker_.joinable()) throw Error("the generation has not finished yet");
    }

    void join() {
        if (!worker_.joinable()) return;
        py::gil_scoped_release nogil;
        worker_.join();
    }

    void work() {
        spec_.req.on_text = [this](const std::string& piece) {
            if (!piece.empty()) {
                std::lock_guard lk(m_);
                queue_.push_back(piece);
            }
            cv_.notify_one();
            return !cancel_.load();
        };
        try {
            result_ = models_->engine->generate(spec_.req);
        } catch (...) {
            error_ = std::current_exception();
        }
        models_->busy = false;
        {
            std::lock_guard lk(m_);
            done_ = true;
        }
        cv_.notify_one();
    }

    std::shared_ptr<Models> models_;
    RunSpec spec_;
    std::string id_;
    int64_t created_ = 0;
    mutable std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::string> queue_;
    bool done_ = false;
    std::atomic<bool> cancel_{false};
    std::exception_ptr error_;
    Result result_;
    std::thread worker_;
};

// The CLI's rule (no method given: auto when greedy, ar when sampling) and
// its checks, applied before the run starts so that bad input raises here.
void set_method(RunSpec& s, const std::string& method, const Models& m, int draft_k) {
    s.req.method = method;
    if (draft_k > 0) s.req.spec.draft_k = draft_k;
    SPECDEC_CHECK(s.req.spec.draft_k >= 1 && s.req.spec.draft_k <= 64, "draft_k must be in 1..64, got ",
                  s.req.spec.draft_k);
    s.req.method = m.engine->resolve_method(s.req);
}

class PyEngine {
public:
    PyEngine(const std::string& model, const std::optional<std::string>& draft, int threads, int ctx) {
        m_ = std::make_shared<Models>();
        EngineOptions opts;
        opts.model = model;
        opts.draft = draft.value_or("");
        opts.threads = threads;
        opts.ctx = ctx;
        py::gil_scoped_release nogil;
        m_->engine = std::make_unique<Engine>(opts);
        m_->model_id = m_->engine->model_path();  // llama-cpp-python's "model" is the model's path too
    }

    // Raw text (or one user turn with chat=true), the CLI's request.
    std::unique_ptr<Run> start(const std::string& prompt, const std::string& method, int max_tokens,
                               float temperature, int top_k, float top_p, float min_p, float repeat_penalty,
                               int repeat_last_n, uint64_t seed, const std::vector<std::string>& stop,
                               bool ignore_eos, bool chat, const std::string& system, int draft_k) {
        SPECDEC_CHECK(!prompt.empty(), "the prompt is empty");
        SPECDEC_CHECK(max_tokens >= 1, "max_tokens must be >= 1, got ", max_tokens);
        RunSpec s;
        if (chat) {
            if (!system.empty()) s.req.messages.push_back({"system", system});
            s.req.messages.push_back({"user", prompt});
        } else {
            s.req.prompt = prompt;
        }
        s.req.max_tokens = max_tokens;
        s.req.stop = stop;
        s.req.ignore_eos = ignore_eos;
        auto& sp = s.req.sampling;
        sp.temperature = temperature;
        sp.top_k = top_k;
        sp.top_p = top_p;
        sp.min_p = min_p;
        sp.repeat_penalty = repeat_penalty;
        sp.repeat_last_n = repeat_last_n;
        sp.seed = seed;
        sample::validate(sp);
        set_method(s, method, *m_, draft_k);
        return std::make_unique<Run>(m_, std::move(s));
    }

    // An OpenAI request body (JSON text), parsed by the server's parser.
    std::unique_ptr<Run> start_openai(const std::string& endpoint, const std::string& body, int draft_k) {
        const server::Endpoint ep = endpoint == "chat" ? server::Endpoint::Chat : server::Endpoint::Completion;
        server::ServerInfo info;
        info.model_id = m_->model_id;
        info.available_methods = {"ar", "auto", "ngram"};
        if (m_->engine->has_draft()) info.available_methods.insert(info.available_methods.end(), {"chain", "tree"});
        info.default_method = "auto";
        info.default_sampled_method = "ar";
        info.n_ctx = m_->engine->n_ctx();
        server::ParsedRequest pr;
        try {
            pr = server::parse_request(ep, body, info);
        } catch (const server::ApiError& e) {
            throw py::value_error(e.param.empty() ? e.message : e.message + " (parameter '" + e.param + "')");
        }
        RunSpec s;
        static_cast<GenerateRequest&>(s.req) = std::move(pr.gen);
        s.endpoint = ep;
        // No max_tokens: run to the end of the context, as the server does.
        if (s.req.max_tokens <= 0) s.req.max_tokens = m_->engine->n_ctx();
        set_method(s, pr.spec.method, *m_, pr.spec.draft_k > 0 ? pr.spec.draft_k : draft_k);
        return std::make_unique<Run>(m_, std::move(s));
    }

    std::string model_path() const { return m_->engine->model_path(); }
    std::optional<std::string> draft_path() const {
        return m_->engine->has_draft() ? std::optional<std::string>(m_->engine->draft_path()) : std::nullopt;
    }
    std::string model_id() const { return m_->model_id; }
    int n_ctx() const { return m_->engine->n_ctx(); }
    int threads() const { return m_->engine->threads(); }

    std::vector<int32_t> tokenize(const std::string& text) const {
        GenerateRequest r;
        r.prompt = text;
        return m_->engine->tokenize(r);
    }

private:
    std::shared_ptr<Models> m_;
};

}  // namespace
}  // namespace specdec::python

PYBIND11_MODULE(_core, m) {
    using namespace specdec::python;
    m.doc() = "specdec engine bindings (use the specdec package, not this module)";
    py::register_exception<specdec::Error>(m, "SpecdecError", PyExc_RuntimeError);

    py::class_<Run>(m, "Run")
        .def("next", &Run::next)
        .def("cancel", &Run::cancel)
        .def_property_readonly("finished", &Run::finished)
        .def_property_readonly("text", [](const Run& r) { return py::bytes(r.result().text); })
        .def_property_readonly("tokens", [](const Run& r) { return r.result().tokens; })
        .def_property_readonly("finish_reason", [](const Run& r) { return r.result().finish_reason; })
        .def("stats", &Run::stats)
        .def("response_json", &Run::response_json)
        .def("chunk_json", &Run::chunk_json, py::arg("text"), py::arg("finish_reason"), py::arg("role_chunk") = false);

    py::class_<PyEngine>(m, "Engine")
        .def(py::init<const std::string&, const std::optional<std::string>&, int, int>(), py::arg("model"),
             py::arg("draft") = py::none(), py::arg("threads") = 0, py::arg("ctx") = 0)
        .def("start", &PyEngine::start, py::arg("prompt"), py::arg("method"), py::arg("max_tokens"),
             py::arg("temperature"), py::arg("top_k"), py::arg("top_p"), py::arg("min_p"), py::arg("repeat_penalty"),
             py::arg("repeat_last_n"), py::arg("seed"), py::arg("stop"), py::arg("ignore_eos"), py::arg("chat"),
             py::arg("system"), py::arg("draft_k"))
        .def("start_openai", &PyEngine::start_openai, py::arg("endpoint"), py::arg("body"), py::arg("draft_k"))
        .def_property_readonly("model_path", &PyEngine::model_path)
        .def_property_readonly("draft_path", &PyEngine::draft_path)
        .def_property_readonly("model_id", &PyEngine::model_id)
        .def_property_readonly("n_ctx", &PyEngine::n_ctx)
        .def_property_readonly("threads", &PyEngine::threads)
        .def("tokenize", &PyEngine::tokenize, py::arg("text"));
}
