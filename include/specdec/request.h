// What to generate: a prompt (raw text, or chat messages rendered with the
// model's template), how many tokens, how to sample, where to stop, and with
// which decoding method.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "specdec/chat.h"
#include "specdec/decoding.h"
#include "specdec/sampling.h"

namespace specdec {

// Called with each new piece of text as it becomes final (a piece may end
// inside a UTF-8 sequence; stop strings are never in it); return false to stop
// generating after the current token (the result then ends there, finish
// reason "cancelled").
using TokenCallback = std::function<bool(const std::string& piece)>;

// The text half of a request, the same for every decoding method.
struct GenerateRequest {
    std::string prompt;                        // raw text (used when messages is empty), BOS per the model
    std::vector<ChatMessage> messages;         // chat: rendered with the model's template
    int max_tokens = 128;
    SamplingParams sampling;
    std::vector<std::string> stop;             // stop strings (not included in the text)
    bool ignore_eos = false;                   // keep going past end-of-generation tokens
};

struct Request : GenerateRequest {
    // "ar", "chain", "tree", "ngram", "auto" or "ssd"; empty: auto when greedy,
    // ar when sampling (auto's choices follow measured times, so only a fixed
    // method reproduces a seeded text). chain and tree need the engine's draft
    // (or head), ssd its draft (with SSD's default options; `specdec generate
    // --method ssd` exposes them all).
    std::string method;
    // The drafts' shape; spec.method is set from `method`.
    SpecConfig spec;
    TokenCallback on_text;  // streaming (optional)
};

// The method an empty Request::method means: "auto" when greedy, "ar" when sampling.
std::string default_method(const SamplingParams& sampling);

}  // namespace specdec
