// specdec's public entry point: a loaded target model (and optionally a draft)
// that generates text with any of the lossless decoding methods.
//
//   specdec::Engine engine({.model = "smollm2-135m-instruct-q4_1"});
//   specdec::Request req;
//   req.prompt = "The capital of France is";
//   specdec::Result r = engine.generate(req);   // r.text, r.mean_accept_len()
//
// One generation runs at a time per Engine (the KV cache has one sequence);
// generate() is not to be called from two threads at once. Errors are
// specdec::Error (specdec/errors.h) with the engine's message.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "specdec/errors.h"
#include "specdec/request.h"
#include "specdec/result.h"

namespace specdec {

namespace runtime {
class Engine;  // the internal engine (src/runtime/engine.h), for in-tree frontends
}

struct EngineOptions {
    // A .gguf path or a model name from models/manifest.json ($SPECDEC_MODELS_DIR,
    // ./models, or models/ next to the specdec build); "": the manifest's default.
    std::string model;
    // A draft model for chain, tree and auto (path or manifest name; its
    // tokenizer must be the target's). "": none.
    std::string draft;
    // Self-speculation instead of `draft`: the draft is the target's first L
    // layers ("L"), the layers listed ("0-7,10,12"), or "auto" (the choice
    // `specdec calibrate` saved next to the model; if it found no depth faster
    // than AR there is no draft, and chain/tree requests decode with ar).
    std::string draft_layers;
    // An EAGLE-3 draft head for chain and tree instead of a draft model: a
    // directory in the Hugging Face layout (config.json + model.safetensors)
    // or the vllm speculators layout, made for this model. "": none.
    std::string eagle3;
    int threads = 0;  // 0: all cores
    int ctx = 0;      // context size in tokens; 0: min(model's training context, 4096)
    // A Jinja chat template file for chat requests instead of the model's own
    // (tokenizer.chat_template). "": the model's.
    std::string chat_template;
    // Sequences the KV caches hold: generate() uses the first; a frontend
    // that batches (the HTTP server, specdec bench) decodes up to this many
    // together on target_engine() and draft_engine().
    int sequences = 1;
    // SSD (on the engines underneath): scratch draft sequences per sequence,
    // one per cached branch (its fan-out budget; KV pages never touched cost nothing).
    int draft_branch_slots = 0;
};

class Engine {
public:
    // Loads the model (and the draft); throws specdec::Error.
    explicit Engine(const EngineOptions& opts);
    ~Engine();
    Engine(Engine&&) noexcept;
    Engine& operator=(Engine&&) noexcept;

    // Decodes one request to its end (max_tokens, end of generation, a stop
    // string, the context's end, or on_text returning false).
    Result generate(const Request& req);

    // The method generate() would run for `req` (its default rule applied,
    // and ar where a self-speculation calibration found no draft faster);
    // throws for an unknown method or one that needs a draft the engine lacks.
    std::string resolve_method(const Request& req) const;

    // The prompt's tokens as generate() reads them (chat template or raw text).
    std::vector<int32_t> tokenize(const GenerateRequest& req) const;

    const std::string& model_path() const;  // the resolved .gguf path
    const std::string& draft_path() const;  // "" without a draft
    const std::string& eagle3_path() const;  // "" without an EAGLE-3 head
    bool has_draft() const;
    int n_ctx() const;
    int threads() const;

    // The engines underneath, for in-tree frontends that drive the scheduler
    // themselves (the HTTP server, specdec bench); draft_engine() may be null.
    runtime::Engine& target_engine();
    runtime::Engine* draft_engine();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace specdec
