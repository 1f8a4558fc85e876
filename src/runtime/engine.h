// The engine: the one place that wires a model file, its tokenizer, the
// transformer, a KV cache and a thread pool together, and the plain
// autoregressive generation loop every speculative method is measured against.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/chat_template.h"
#include "io/gguf.h"
#include "io/tokenizer.h"
#include "kv/kv_cache.h"
#include "model/transformer.h"
#include "sample/sampler.h"
#include "specdec/request.h"
#include "specdec/result.h"

namespace specdec::runtime {

struct Eagle3Draft;

struct EngineOptions {
    std::string model_path;
    int n_ctx = 0;        // 0: min(model's training context, 4096)
    int n_seq = 1;        // sequences the KV cache holds
    int n_threads = 0;    // 0: all cores
    int prefill_chunk = 256;  // rows per forward while reading the prompt
    int layer_limit = 0;      // > 0: run only the first layers (a self-speculation draft)
    // Non-empty: run only these model layers, ascending (a layer-skipping
    // self-speculation draft; see model/layer_list.h). Excludes layer_limit.
    std::vector<int> keep_layers;
    // Non-empty: a Jinja chat template file used instead of the model's
    // tokenizer.chat_template (--chat-template FILE).
    std::string chat_template_path;
};

// A loaded model ready to run.
class Engine {
public:
    static std::unique_ptr<Engine> load(const EngineOptions& opts);
    // A draft for `target`: another model file, refused when its vocabulary
    // differs from the target's (runtime/draft_vocab.h), or the target's own
    // file with fewer layers (self-speculation).
    static std::unique_ptr<Engine> load_draft(const Engine& target, const EngineOptions& opts);

    const io::GgufFile& file() const { return *file_; }
    const io::Tokenizer& tokenizer() const { return *tokenizer_; }
    model::Transformer& model() { return *model_; }
    const model::ModelConfig& config() const { return model_->config(); }
    kv::KvCache& cache() { return *cache_; }
    ThreadPool& pool() { return *pool_; }
    const EngineOptions& options() const { return opts_; }
    int n_ctx() const { return cache_->n_ctx(); }

    // An EAGLE-3 head for this target (runtime/eagle3_draft.h): chain and tree
    // draft with it when there is no draft model. Throws for a head that does
    // not fit this model.
    // head: a directory or GGUF file, or the name of a head in the model
    // manifest (runtime/model_locator.h).
    void load_eagle3(const std::string& head);
    Eagle3Draft* eagle3() { return eagle3_.get(); }

    ~Engine();

    // Reads `tokens` into sequence `seq` after what it has committed, in chunks,
    // commits them, and returns the logits of the last token (n_vocab floats).
    const float* prefill(int seq, const std::vector<int32_t>& tokens);

    // The chat prompt for `messages` (io/chat_template.h: the model's
    // template or the --chat-template file, add_generation_prompt, no
    // leading BOS text). Throws specdec::Error when the template could not
    // be parsed or raises for these messages.
    std::string chat_prompt(const std::vector<io::ChatMessage>& messages) const;

private:
    void load_chat_template();

    EngineOptions opts_;
    std::unique_ptr<io::GgufFile> file_;
    std::unique_ptr<io::Tokenizer> tokenizer_;
    std::unique_ptr<model::Transformer> model_;
    std::unique_ptr<kv::KvCache> cache_;
    std::unique_ptr<ThreadPool> pool_;
    // Parsed once at load; a template that does not parse only fails chat
    // requests (chat_error_ says why), never plain-prompt ones.
    std::unique_ptr<io::ChatTemplate> chat_template_;
    std::string chat_error_;
    std::unique_ptr<Eagle3Draft> eagle3_;
    model::ForwardBatch batch_;
    model::ForwardResult result_;
};

// The public request and result types (specdec/request.h, specdec/result.h)
// are the decoding loops' own: a specdec::Request is a GenerateRequest.
using GenerateRequest = specdec::GenerateRequest;
using GenerateResult = specdec::GenerateResult;
using TokenCallback = specdec::TokenCallback;

// Turns a request into prompt tokens (chat template or raw, BOS per metadata).
std::vector<int32_t> tokenize_request(const Engine& engine, const GenerateRequest& req);

// Tracks generated text, end-of-generation and stop strings; shared by every
// decoding method so they stop at exactly the same token.
class StopChecker {
public:
    StopChecker(const io::Tokenizer& tok, const GenerateRequest& req);
    // Adds one generated token; returns true when generation must end after it.
    bool push(int32_t token);
    const std::string& text() const { return text_; }
    const std::vector<int32_t>& tokens() const { return tokens_; }
    const std::string& finish_reason() const { return reason_; }
    // Text that can no longer be cut by a stop string (for streaming).
    std::string take_stable_text();
    // Everything not yet streamed (call once generation has ended).
    std::string take_remaining();

private:
    const io::Tokenizer& tok_;
    const GenerateRequest& req_;
    std::string text_;
    std::vector<int32_t> tokens_;
    std::string reason_ = "length";
    size_t streamed_ = 0;
    size_t max_stop_len_ = 0;
};

// Target-only autoregressive decoding in sequence 0 of the engine's cache.
GenerateResult generate_ar(Engine& engine, const GenerateRequest& req, const TokenCallback& on_text = {});

// The decode half of generate_ar: `prompt` (tokenize_request's) is already
// committed in sequence 0 (anything after it is dropped) and `logits` are its
// last token's logits from that prefill. Lets several runs share one prefill
// (specdec bench decodes every configuration of a turn from one); the tokens
// are generate_ar's. prefill_s is left 0.
GenerateResult generate_ar_prefilled(Engine& engine, const GenerateRequest& req, const std::vector<int32_t>& prompt,
                                     const float* logits, const TokenCallback& on_text = {});

}  // namespace specdec::runtime
