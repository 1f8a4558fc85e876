#include "runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/clock.h"
#include "core/error.h"
#include "model/prefill.h"
#include "runtime/draft_vocab.h"
#include "runtime/model_locator.h"
#include "runtime/eagle3_draft.h"

namespace specdec::runtime {
std::unique_ptr<Engine> Engine::load(const EngineOptions& opts) {
    auto e = std::unique_ptr<Engine>(new Engine());
    e->opts_ = opts;
    SPECDEC_CHECK(!opts.model_path.empty(), "no model given (use -m MODEL.gguf)");
    e->file_ = io::GgufFile::open(opts.model_path);
    SPECDEC_CHECK(opts.keep_layers.empty() || opts.layer_limit == 0,
                  "give either a layer count or a list of layers to keep, not both");
    e->model_ = opts.keep_layers.empty() ? std::make_unique<model::Transformer>(*e->file_, opts.layer_limit)
                                         : std::make_unique<model::Transformer>(*e->file_, opts.keep_layers);
    e->tokenizer_ = io::Tokenizer::from_gguf(*e->file_);
    e->load_chat_template();
    // The config and tokenizer hold what they need; the parsed vocabulary
    // arrays (copies of the file's strings) would only add to peak RSS.
    e->file_->release_large_arrays(4096);
    const auto& c = e->model_->config();
    SPECDEC_CHECK(e->tokenizer_->n_vocab() <= c.n_vocab, "model '", opts.model_path, "': tokenizer has ",
                  e->tokenizer_->n_vocab(), " tokens but the output layer only ", c.n_vocab);
    int n_ctx = opts.n_ctx > 0 ? opts.n_ctx : std::min(c.n_ctx_train, 4096);
    SPECDEC_CHECK(n_ctx >= 8, "context size ", n_ctx, " is too small");
    SPECDEC_CHECK(opts.n_seq >= 1 && opts.n_seq <= 256, "sequence count must be in [1, 256]");
    e->cache_ = std::make_unique<kv::KvCache>(e->model_->kv_options(n_ctx, opts.n_seq));
    int n_threads = opts.n_threads > 0 ? opts.n_threads : (int)std::max(1u, std::thread::hardware_concurrency());
    e->pool_ = std::make_unique<ThreadPool>(n_threads);
    e->opts_.n_ctx = n_ctx;
    return e;
}

std::unique_ptr<Engine> Engine::load_draft(const Engine& target, const EngineOptions& opts) {
    auto draft = load(opts);
    // A draft model steps back to the verified prefix after every round; a
    // recurrent state cannot go back (the target's can: it keeps one state
    // per verified row).
    SPECDEC_CHECK(!draft->config().has_recurrent_layers(), "draft model '", opts.model_path, "' (", draft->config().arch_name,
                  ") has recurrent layers, which a draft model cannot roll back; use a draft without them, ",
                  "or --method ngram");
    if (opts.model_path != target.options().model_path)
        check_draft_vocabulary({target.options().model_path, target.tokenizer(), target.config().n_vocab},
                               {opts.model_path, draft->tokenizer(), draft->config().n_vocab});
    return draft;
}

Engine::~Engine() = default;

void Engine::load_eagle3(const std::string& head) {
    eagle3_ = Eagle3Draft::load(resolve_eagle3_head(head), *this);
}

const float* Engine::prefill(int seq, const std::vector<int32_t>& tokens) {
    return model::prefill_chunked(*model_, *cache_, *pool_, seq, tokens, opts_.prefill_chunk, batch_, result_);
}

void Engine::load_chat_template() {
    std::string text;
    std::string source = "the chat template of " + opts_.model_path;
    if (!opts_.chat_template_path.empty()) {
        std::ifstream in(opts_.chat_template_path, std::ios::binary);
        SPECDEC_CHECK(in, "cannot read chat template file '", opts_.chat_template_path, "'");
        std::stringstream ss;
        ss << in.rdbuf();
        text = ss.str();
        source = "chat template file " + opts_.chat_template_path;
    } else {
        text = io::model_chat_template(*file_);
    }
    try {
        chat_template_ = std::make_unique<io::ChatTemplate>(text);
    } catch (const Error& e) {
        chat_error_ = source + ": " + e.what();
        // A file the user named must work; the model's own template only
        // matters for chat requests.
        SPECDEC_CHECK(opts_.chat_template_path.empty(), chat_error_);
    }
}

std::string Engine::chat_prompt(const std::vector<io::ChatMessage>& messages) const {
    SPECDEC_CHECK(chat_template_, chat_error_);
    try {
        return io::apply_chat_template(*chat_template_, *tokenizer_, messages, true);
    } catch (const Error& e) {
        throw Error(std::string("chat template: ") + e.what());
    }
}

std::vector<int32_t> tokenize_request(const Engine& engine, const GenerateRequest& req) {
    const io::Tokenizer& tok = engine.tokenizer();
    if (!req.messages.empty()) {
        // Special tokens in the rendered text are parsed; BOS is added by the
        // tokenizer where the model asks for it (the render never starts with
        // it), as llama.cpp's server tokenizes a chat prompt.
        return tok.encode(engine.chat_prompt(req.messages), true, true);
    }
    return tok.encode(req.prompt, true, false);
}

StopChecker::StopChecker(const io::Tokenizer& tok, const GenerateRequest& req) : tok_(tok), req_(req) {
    for (const auto& s : req.stop) max_stop_len_ = std::max(max_stop_len_, s.size());
}

bool StopChecker::push(int32_t token) {
    if (!req_.ignore_eos && tok_.is_end_of_generation(token)) {
        reason_ = "stop";
        return true;
    }
    tokens_.push_back(token);
    const size_t before = text_.size();
    text_ += tok_.token_to_piece(token);
    for (const auto& s : req_.stop) {
        if (s.empty()) continue;
        // Only the new bytes (and the tail they complete) can hold a new match.
        const size_t from = before >= s.size() ? before - s.size() + 1 : 0;
        const size_t at = text_.find(s, from);
        if (at != std::string::npos) {
            text_.resize(at);
            reason_ = "stop";
            return true;
        }
    }
    if ((int)tokens_.size() >= req_.max_tokens) {
        reason_ = "length";
        return true;
    }
    return false;
}

std::string StopChecker::take_remaining() {
    std::string out = streamed_ < text_.size() ? text_.substr(streamed_) : std::string();
    streamed_ = text_.size();
    return out;
}

std::string StopChecker::take_stable_text() {
    size_t stable = text_.size() > max_stop_len_ ? text_.size() - max_stop_len_ : 0;
    // Never split a UTF-8 sequence: back up to a lead byte.
    while (stable > streamed_ && stable < text_.size() && ((unsigned char)text_[stable] & 0xC0) == 0x80) --stable;
    if (stable <= streamed_) return {};
    std::string out = text_.substr(streamed_, stable - streamed_);
    streamed_ = stable;
    return out;
}

GenerateResult generate_ar(Engine& engine, const GenerateRequest& req, const TokenCallback& on_text) {
    sample::validate(req.sampling);
    SPECDEC_CHECK(req.max_tokens >= 1, "max tokens must be >= 1, got ", req.max_tokens);
    const std::vector<int32_t> prompt = tokenize_request(engine, req);
    SPECDEC_CHECK(!prompt.empty(), "the prompt is empty after tokenization");
    engine.cache().clear(0);
    const double t0 = now_s();
    const float* logits = engine.prefill(0, prompt);
    const double prefill_s = now_s() - t0;
    GenerateResult res = generate_ar_prefilled(engine, req, prompt, logits, on_text);
    res.prefill_s = prefill_s;
    return res;
}

GenerateResult generate_ar_prefilled(Engine& engine, const GenerateRequest& req, const std::vector<int32_t>& prompt,
                                     const float* logits, const TokenCallback& on_text) {
    sample::validate(req.sampling);
    SPECDEC_CHECK(req.max_tokens >= 1, "max tokens must be >= 1, got ", req.max_tokens);
    SPECDEC_CHECK(!prompt.empty() && logits, "generate_ar_prefilled: no prompt or no logits");
    const int seq = 0;
    SPECDEC_CHECK(engine.cache().committed(seq) >= (int)prompt.size(), "generate_ar_prefilled: the cache holds ",
                  engine.cache().committed(seq), " tokens, the prompt has ", prompt.size());
    engine.cache().truncate(seq, (int)prompt.size());  // drops an earlier run's answer
    GenerateResult res;
    res.n_prompt = (int)prompt.size();

    Rng rng(req.sampling.seed);
    std::vector<float> scratch;
    std::vector<int32_t> history = prompt;
    StopChecker stop(engine.tokenizer(), req);
    const int n_vocab = engine.config().n_vocab;
    const double t1 = now_s();

    model::ForwardBatch batch;
    model::ForwardResult out;
    bool cancelled = false;
    while (true) {
        const int32_t tok = sample::sample_token(logits, n_vocab, history, req.sampling, rng, scratch);
        history.push_back(tok);
        const bool done = stop.push(tok);
        if (on_text) {
            std::string piece = done ? "" : stop.take_stable_text();
            if (!piece.empty() && !on_text(piece)) cancelled = true;
        }
        if (done || cancelled) break;
        if (engine.cache().committed(seq) + 1 > engine.n_ctx()) {
            res.finish_reason = "length";
            break;
        }
        batch.clear();
        batch.add(tok, engine.cache().committed(seq), seq, -1, true);
        engine.model().forward(batch, engine.cache(), engine.pool(), out);
        engine.cache().commit_length(seq, 1);
        logits = out.row_logits(0);
    }
    res.decode_s = now_s() - t1;
    res.text = stop.text();
    res.tokens = stop.tokens();
    res.n_generated = (int)res.tokens.size();
    if (res.finish_reason.empty()) res.finish_reason = cancelled ? "cancelled" : stop.finish_reason();
    if (on_text && !cancelled) {
        // Flush whatever the stop-string window held back.
        const std::string rest = stop.take_remaining();
        if (!rest.empty()) on_text(rest);
    }
    return res;
}

}  // namespace specdec::runtime
