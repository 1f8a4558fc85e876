// libFuzzer target: the OpenAI request parser of `specdec serve`
// (server::parse_request). A request body is the one input a remote client
// controls completely, so the parser must either return a request that obeys
// every validation rule or throw ApiError(400); any other exception, crash,
// leak or sanitizer report is a bug. The response builders are run on what
// was parsed (and on raw input bytes) because the server sends them back.
//
// Input layout: byte 0 selects the endpoint (bit 0: 0 chat, 1 completion) and
// one of four server configurations (bits 1-2); the rest is the body. Seeds
// start with an ASCII digit so that they stay readable ('0' chat, '1'
// completion, '4' chat on a server with draft methods, ...).
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_common.h"
#include "server/openai_protocol.h"

using namespace specdec::server;

namespace {

std::vector<ServerInfo> make_infos() {
    std::vector<ServerInfo> v;
    ServerInfo plain;  // the defaults: only "ar"
    plain.model_id = "smol";
    plain.model_aliases = {"smol.gguf"};
    plain.n_ctx = 512;
    v.push_back(plain);

    ServerInfo no_draft = plain;  // what cmd_serve offers without a draft model
    no_draft.model_id = "qwen2.5-coder-0.5b-instruct-q4_k_m";
    no_draft.model_aliases = {};
    no_draft.available_methods = {"ar", "auto", "ngram"};
    no_draft.default_method = "auto";
    no_draft.max_tokens = 4096;  // cmd_serve's --max-tokens default
    v.push_back(no_draft);

    ServerInfo draft = no_draft;  // ... and with one
    draft.available_methods.insert(draft.available_methods.end(), {"chain", "tree", "ssd"});
    draft.default_method = "ssd";
    draft.default_sampled_method = "chain";
    v.push_back(draft);

    ServerInfo odd = plain;  // an empty model id: any "model" but "" is unknown
    odd.model_id = "";
    odd.model_aliases = {"a", "b"};
    odd.max_tokens = 8;  // a cap below the completions default
    v.push_back(odd);
    return v;
}

const std::vector<ServerInfo>& infos() {
    static const std::vector<ServerInfo> v = make_infos();
    return v;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

void check_parsed(const ParsedRequest& r, Endpoint ep, const ServerInfo& info) {
    FUZZ_CHECK(r.endpoint == ep);
    if (ep == Endpoint::Chat) {
        FUZZ_CHECK(!r.gen.messages.empty());
        for (const auto& m : r.gen.messages) {
            FUZZ_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "tool",
                       "role " + m.role);
        }
    } else {
        FUZZ_CHECK(r.gen.messages.empty());
    }
    const int cap = info.max_tokens;  // --max-tokens: more is refused, none gets the cap
    if (r.max_tokens_given) {
        FUZZ_CHECK(r.gen.max_tokens >= 1 && r.gen.max_tokens <= (cap > 0 ? cap : (1 << 20)));
    } else {
        FUZZ_CHECK(r.gen.max_tokens == (ep == Endpoint::Completion ? (cap > 0 ? std::min(16, cap) : 16) : cap));
    }
    const auto& sp = r.gen.sampling;
    FUZZ_CHECK(sp.temperature >= 0.0f && sp.temperature <= 2.0f);
    FUZZ_CHECK(sp.top_p > 0.0f && sp.top_p <= 1.0f);
    FUZZ_CHECK(sp.min_p >= 0.0f && sp.min_p <= 1.0f);
    FUZZ_CHECK(sp.top_k >= 0 && sp.top_k <= (1 << 20));
    FUZZ_CHECK(r.gen.stop.size() <= 16);
    for (const auto& s : r.gen.stop) FUZZ_CHECK(!s.empty());
    // The method that decodes the request is always one the server has (the
    // configurations above only default to available methods).
    FUZZ_CHECK(contains(info.available_methods, r.spec.method), "method " + r.spec.method);
    FUZZ_CHECK(r.spec.draft_k == 0 || (r.spec.draft_k >= 1 && r.spec.draft_k <= 64));
}

void build_responses(const ParsedRequest& r, const ServerInfo& info, std::string_view raw) {
    const std::string text = r.endpoint == Endpoint::Chat ? r.gen.messages.back().content : r.gen.prompt;
    const Usage u{int(text.size()), r.gen.max_tokens};
    std::string out;
    out += dump(chat_response("chatcmpl-1", 1, info.model_id, text, "stop", u));
    out += dump(completion_response("cmpl-1", 1, info.model_id, text, "length", u));
    out += sse_event(chat_chunk("chatcmpl-1", 1, info.model_id, text, "", true));
    out += sse_event(usage_chunk(r.endpoint, "cmpl-1", 1, info.model_id, u));
    // Generated text may be any bytes (a token can end mid UTF-8 sequence):
    // dump() promises not to throw on those.
    const std::string bytes(raw.substr(0, 64));
    out += sse_event(completion_chunk("cmpl-1", 1, info.model_id, bytes, ""));
    out += sse_event(chat_chunk("chatcmpl-1", 1, info.model_id, bytes, "stop", false));
    FUZZ_CHECK(!out.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const Endpoint ep = (data[0] & 1) ? Endpoint::Completion : Endpoint::Chat;
    const ServerInfo& info = infos()[(data[0] >> 1) & 3];
    const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
    try {
        const ParsedRequest r = parse_request(ep, body, info);
        check_parsed(r, ep, info);
        build_responses(r, info, body);
    } catch (const ApiError& e) {
        FUZZ_CHECK(e.status == 400, "status " + std::to_string(e.status));
        FUZZ_CHECK(!e.message.empty());
        FUZZ_CHECK(e.type == "invalid_request_error");
        FUZZ_CHECK(!dump(error_json(e)).empty());
    } catch (const std::exception& e) {
        specdec::fuzz::unexpected_exception(e, "parse_request");
    }
    // The Authorization header is client input too: the body doubles as one.
    try {
        check_api_key(body, "sk-specdec-test");
        // Accepted only as "Bearer <key>" (the scheme's case does not matter).
        FUZZ_CHECK(body.size() == 22 && body.substr(7) == "sk-specdec-test", std::string(body));
    } catch (const ApiError& e) {
        FUZZ_CHECK(e.status == 401);
    }
    return 0;
}
