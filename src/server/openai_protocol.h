// OpenAI-compatible request parsing and response building for `specdec serve`.
// Pure functions over JSON text: no engine, no sockets, so every validation
// rule is unit-tested without a model (tests/unit/test_server_protocol.cpp).
// Anything a client sends either parses into a ParsedRequest or throws an
// ApiError that the HTTP layer turns into OpenAI's error shape; nothing else
// escapes, which is what keeps a malformed request from affecting the server.
#pragma once

#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine.h"

namespace specdec::server {

// An error answered to the client: {"error":{"message","type","param","code"}}.
struct ApiError : std::exception {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;  // "" -> null
    std::string code;   // "" -> null
    ApiError(int status_, std::string message_, std::string param_ = {}, std::string code_ = {},
             std::string type_ = "invalid_request_error")
        : status(status_), message(std::move(message_)), type(std::move(type_)), param(std::move(param_)),
          code(std::move(code_)) {}
    const char* what() const noexcept override { return message.c_str(); }
};

enum class Endpoint { Chat, Completion };

// The `specdec` request extension: which speculative method decodes this
// request, and whether the response says where each token came from.
struct SpecOptions {
    std::string method = "ar";
    int draft_k = 0;          // 0: the server's default
    bool provenance = false;  // "provenance": true adds specdec.provenance to chunks/responses
};

// What the server tells the parser about itself.
struct ServerInfo {
    std::string model_id;                       // echoed in responses and listed by /v1/models
    std::vector<std::string> model_aliases;     // other names accepted in "model"
    std::vector<std::string> available_methods = {"ar"};
    std::string default_method = "ar";          // for requests that name none (greedy ones)
    // For sampled requests that name none: auto's choices follow measured
    // times, so a seed would not reproduce a text under it (ar does).
    std::string default_sampled_method = "ar";
    int n_ctx = 0;                              // context of each sequence (tokens)
    // --max-tokens: a request asking for more completion tokens is refused
    // (400); one naming none gets this as its limit (completions: OpenAI's 16
    // if that is less). 0: no cap (the context is the limit).
    int max_tokens = 0;
};

struct ParsedRequest {
    Endpoint endpoint = Endpoint::Chat;
    runtime::GenerateRequest gen;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    bool max_tokens_given = false;
    bool seed_given = false;
    SpecOptions spec;
};

// Parses and validates a request body. Throws ApiError (400) naming the
// offending field. Leaves max_tokens at 0 when the client gave none and the
// server has no cap (the scheduler fills in what the context allows).
ParsedRequest parse_request(Endpoint ep, std::string_view body, const ServerInfo& info);

// Checks an Authorization header value against the key ("" key: no check).
// Throws ApiError(401) when it does not match.
void check_api_key(std::string_view authorization_header, const std::string& key);

// --- responses ----------------------------------------------------------------
struct Usage {
    int prompt_tokens = 0;
    int completion_tokens = 0;
};

// Where a piece of streamed text came from (the `specdec.provenance`
// extension): the text split at token boundaries, each part marked as an
// accepted draft token's or the target's own (a round's bonus or corrected
// token, or the first token), plus how many completion tokens of each kind
// entered the text since the previous piece. The parts concatenate to the
// piece; a token whose text spans two pieces (held back as a possible stop
// string or as an unfinished UTF-8 character) has a part in each, and is
// counted once, where it was generated.
struct TokenSpan {
    std::string text;
    bool draft = false;
};
struct Provenance {
    std::vector<TokenSpan> spans;
    int draft_tokens = 0;
    int target_tokens = 0;
    bool empty() const { return spans.empty() && draft_tokens == 0 && target_tokens == 0; }
    void append(const Provenance& p);
};
// Adds {"specdec": {"provenance": [{"text","source": "draft"|"target"}...],
// "tokens": {"draft": n, "target": n}}} to a chunk or response.
void add_provenance(nlohmann::json& j, const Provenance& p);

nlohmann::json error_json(const ApiError& e);
nlohmann::json usage_json(const Usage& u);
nlohmann::json chat_response(const std::string& id, int64_t created, const std::string& model,
                             const std::string& text, const std::string& finish_reason, const Usage& u);
nlohmann::json completion_response(const std::string& id, int64_t created, const std::string& model,
                                   const std::string& text, const std::string& finish_reason, const Usage& u);
// One streaming chunk. For chat, `role_chunk` makes the first delta carry the
// role; an empty finish_reason is sent as null.
nlohmann::json chat_chunk(const std::string& id, int64_t created, const std::string& model,
                          const std::string& content, const std::string& finish_reason, bool role_chunk = false);
nlohmann::json completion_chunk(const std::string& id, int64_t created, const std::string& model,
                                const std::string& text, const std::string& finish_reason);
// The final usage-only chunk of stream_options.include_usage (choices: []).
nlohmann::json usage_chunk(Endpoint ep, const std::string& id, int64_t created, const std::string& model,
                           const Usage& u);
// /v1/models; the model entry carries a `specdec` extension with the methods
// a request may name and the defaults (the chat page offers those).
nlohmann::json models_json(const ServerInfo& info, int64_t created);

// JSON text that never throws on invalid UTF-8 (generated bytes may be partial).
std::string dump(const nlohmann::json& j);
// One server-sent event: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& j);

}  // namespace specdec::server
