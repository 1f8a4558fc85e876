#include "server/openai_protocol.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "core/error.h"
#include "sched/spec_config.h"

namespace specdec::server {

using nlohmann::json;

namespace {

ApiError bad(const std::string& msg, const std::string& param = {}, const std::string& code = {}) {
    return ApiError(400, msg, param, code);
}

const char* type_name(const json& v) {
    switch (v.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return "boolean";
        case json::value_t::string: return "string";
        case json::value_t::array: return "array";
        case json::value_t::object: return "object";
        case json::value_t::number_float: return "number";
        default: return "integer";
    }
}

ApiError wrong_type(const std::string& key, const char* want, const json& got) {
    return bad("'" + key + "' must be " + want + ", got " + type_name(got), key, "invalid_type");
}

// Present and not null: OpenAI clients send null for "not set".
const json* field(const json& obj, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
}

double get_number(const json& obj, const char* key, double lo, double hi, double dflt) {
    const json* v = field(obj, key);
    if (!v) return dflt;
    if (!v->is_number()) throw wrong_type(key, "a number", *v);
    const double d = v->get<double>();
    if (!(d >= lo && d <= hi))  // also rejects NaN
        throw bad("'" + std::string(key) + "' must be between " + json(lo).dump() + " and " + json(hi).dump(), key,
                  "invalid_value");
    return d;
}

int64_t get_int(const json& obj, const char* key, int64_t lo, int64_t hi, int64_t dflt, bool* given = nullptr) {
    const json* v = field(obj, key);
    if (!v) return dflt;
    // 4.0 is accepted as 4 (JavaScript clients have no integer type); 4.5 is not.
    int64_t x = 0;
    if (v->is_number_integer()) {
        if (v->is_number_unsigned() && v->get<uint64_t>() > (uint64_t)std::numeric_limits<int64_t>::max())
            throw bad("'" + std::string(key) + "' is out of range", key, "invalid_value");
        x = v->get<int64_t>();
    } else if (v->is_number_float()) {
        const double d = v->get<double>();
        // Range first: converting a double outside int64's range (1e300) is
        // undefined behaviour, so the cast may only run on values that fit
        // (found by tests/fuzz/fuzz_parse_request).
        if (!(d >= -9e18 && d <= 9e18) || d != (double)(int64_t)d) throw wrong_type(key, "an integer", *v);
        x = (int64_t)d;
    } else {
        throw wrong_type(key, "an integer", *v);
    }
    if (x < lo || x > hi)
        throw bad("'" + std::string(key) + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi),
                  key, "invalid_value");
    if (given) *given = true;
    return x;
}

bool get_bool(const json& obj, const char* key, bool dflt) {
    const json* v = field(obj, key);
    if (!v) return dflt;
    if (!v->is_boolean()) throw wrong_type(key, "a boolean", *v);
    return v->get<bool>();
}

// Message content: a string, or OpenAI's list of {"type":"text","text":...} parts.
std::string content_text(const json& msg, size_t index) {
    const std::string param = "messages[" + std::to_string(index) + "].content";
    const json* c = field(msg, "content");
    if (!c) return "";
    if (c->is_string()) return c->get<std::string>();
    if (!c->is_array()) throw wrong_type(param, "a string or an array of text parts", *c);
    std::string out;
    for (const json& part : *c) {
        if (!part.is_object()) throw wrong_type(param, "an array of text parts", part);
        const json* t = field(part, "type");
        if (!t || !t->is_string() || t->get<std::string>() != "text")
            throw bad("only content parts of type 'text' are supported", param, "unsupported_content");
        const json* text = field(part, "text");
        if (!text || !text->is_string()) throw bad("a text part needs a string 'text'", param, "invalid_type");
        out += text->get<std::string>();
    }
    return out;
}

void parse_messages(const json& body, runtime::GenerateRequest& gen) {
    const json* m = field(body, "messages");
    if (!m) throw bad("'messages' is required", "messages", "missing_field");
    if (!m->is_array()) throw wrong_type("messages", "an array", *m);
    if (m->empty()) throw bad("'messages' must not be empty", "messages", "invalid_value");
    for (size_t i = 0; i < m->size(); ++i) {
        const json& msg = (*m)[i];
        const std::string param = "messages[" + std::to_string(i) + "]";
        if (!msg.is_object()) throw wrong_type(param, "an object", msg);
        const json* role = field(msg, "role");
        if (!role) throw bad("'" + param + ".role' is required", param + ".role", "missing_field");
        if (!role->is_string()) throw wrong_type(param + ".role", "a string", *role);
        std::string r = role->get<std::string>();
        if (r == "developer") r = "system";  // OpenAI's newer name for the system role
        if (r != "system" && r != "user" && r != "assistant" && r != "tool")
            throw bad("unknown role '" + r + "'", param + ".role", "invalid_value");
        gen.messages.push_back({r, content_text(msg, i)});
    }
}

void parse_prompt(const json& body, runtime::GenerateRequest& gen) {
    const json* p = field(body, "prompt");
    if (!p) throw bad("'prompt' is required", "prompt", "missing_field");
    if (p->is_string()) {
        gen.prompt = p->get<std::string>();
    } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
        gen.prompt = (*p)[0].get<std::string>();
    } else if (p->is_array()) {
        throw bad("'prompt' must be a string or a list of exactly one string (batched and token prompts are not "
                  "supported)",
                  "prompt", "unsupported_value");
    } else {
        throw wrong_type("prompt", "a string", *p);
    }
}

void parse_stop(const json& body, runtime::GenerateRequest& gen) {
    const json* s = field(body, "stop");
    if (!s) return;
    auto add = [&](const json& v) {
        if (!v.is_string()) throw wrong_type("stop", "a string or an array of strings", v);
        std::string str = v.get<std::string>();
        if (str.empty()) throw bad("stop strings must not be empty", "stop", "invalid_value");
        gen.stop.push_back(std::move(str));
    };
    if (s->is_array()) {
        if (s->size() > 16) throw bad("at most 16 stop strings are supported", "stop", "invalid_value");
        for (const json& v : *s) add(v);
    } else {
        add(*s);
    }
}

void parse_spec(const json& body, const ServerInfo& info, bool greedy, SpecOptions& spec) {
    spec.method = greedy ? info.default_method : info.default_sampled_method;
    const json* s = field(body, "specdec");
    if (!s) return;
    if (!s->is_object()) throw wrong_type("specdec", "an object", *s);
    for (auto it = s->begin(); it != s->end(); ++it) {
        if (it.key() != "method" && it.key() != "draft_k" && it.key() != "provenance")
            throw bad("unknown field 'specdec." + it.key() + "'", "specdec." + it.key(), "unknown_field");
    }
    if (const json* m = field(*s, "method")) {
        if (!m->is_string()) throw wrong_type("specdec.method", "a string", *m);
        spec.method = m->get<std::string>();
        const auto& av = info.available_methods;
        if (std::find(av.begin(), av.end(), spec.method) == av.end()) {
            std::string list;
            for (const auto& a : av) list += (list.empty() ? "" : ", ") + a;
            // Chain and tree draft with a draft model or an EAGLE-3 head, ssd
            // with a draft model only: say why they are missing.
            bool needs_draft = false;
            try {
                needs_draft = method_needs_draft(sched::parse_method(spec.method));
            } catch (const Error&) {  // not a method at all
            }
            const char* why = spec.method == "ssd"
                                  ? ": it needs a draft model and this server was started without one "
                                    "(-d DRAFT or --draft-layers L)"
                                  : ": it needs a draft model or an EAGLE-3 head and this server was started "
                                    "without either (-d DRAFT, --draft-layers L or --eagle3 HEAD)";
            throw bad("method " + spec.method + " not available" + (needs_draft ? why : "") +
                          " (available: " + list + ")",
                      "specdec.method", needs_draft ? "draft_model_required" : "method_not_available");
        }
    }
    try {
        spec.draft_k = (int)get_int(*s, "draft_k", 1, 64, 0);
    } catch (ApiError& e) {
        e.param = "specdec.draft_k";  // name the field by its full path
        throw;
    }
    try {
        spec.provenance = get_bool(*s, "provenance", false);
    } catch (ApiError& e) {
        e.param = "specdec.provenance";
        e.message = "'specdec.provenance' must be a boolean";
        throw;
    }
}

// Parameters OpenAI defines that this server cannot honour: accepted only at
// their neutral value so that a client never silently gets something else.
void reject_unsupported(const json& body, Endpoint ep) {
    if (get_int(body, "n", 1, 1, 1) != 1) throw bad("only n=1 is supported", "n");
    if (ep == Endpoint::Completion && get_int(body, "best_of", 1, 1, 1) != 1)
        throw bad("only best_of=1 is supported", "best_of");
    for (const char* k : {"frequency_penalty", "presence_penalty"}) {
        if (get_number(body, k, -2.0, 2.0, 0.0) != 0.0)
            throw bad(std::string("'") + k + "' is not supported (use 0)", k, "unsupported_value");
    }
    if (const json* lp = field(body, "logprobs")) {
        if (!(lp->is_boolean() && !lp->get<bool>()))
            throw bad("'logprobs' is not supported", "logprobs", "unsupported_value");
    }
    if (ep == Endpoint::Completion && get_bool(body, "echo", false))
        throw bad("'echo' is not supported", "echo", "unsupported_value");
    if (const json* lb = field(body, "logit_bias")) {
        if (!lb->is_object()) throw wrong_type("logit_bias", "an object", *lb);
        if (!lb->empty()) throw bad("'logit_bias' is not supported", "logit_bias", "unsupported_value");
    }
    if (const json* t = field(body, "tools")) {
        if (!t->is_array()) throw wrong_type("tools", "an array", *t);
        if (!t->empty()) throw bad("'tools' is not supported", "tools", "unsupported_value");
    }
    if (const json* rf = field(body, "response_format")) {
        if (!rf->is_object()) throw wrong_type("response_format", "an object", *rf);
        const json* t = field(*rf, "type");
        if (!t || !t->is_string() || t->get<std::string>() != "text")
            throw bad("only response_format {\"type\": \"text\"} is supported", "response_format",
                      "unsupported_value");
    }
    if (const json* u = field(body, "user")) {
        if (!u->is_string()) throw wrong_type("user", "a string", *u);
    }
}

}  // namespace

ParsedRequest parse_request(Endpoint ep, std::string_view body_text, const ServerInfo& info) {
    json body;
    try {
        body = json::parse(body_text.begin(), body_text.end());
    } catch (const json::exception& e) {
        throw ApiError(400, std::string("request body is not valid JSON: ") + e.what(), "", "invalid_json");
    }
    if (!body.is_object()) throw bad("request body must be a JSON object", "", "invalid_json");

    ParsedRequest r;
    r.endpoint = ep;
    if (const json* m = field(body, "model")) {
        if (!m->is_string()) throw wrong_type("model", "a string", *m);
        const std::string name = m->get<std::string>();
        const auto& al = info.model_aliases;
        if (name != info.model_id && std::find(al.begin(), al.end(), name) == al.end())
            throw ApiError(400, "The model '" + name + "' does not exist (this server serves '" + info.model_id + "')",
                           "model", "model_not_found");
    }
    if (ep == Endpoint::Chat)
        parse_messages(body, r.gen);
    else
        parse_prompt(body, r.gen);

    // max_completion_tokens is the newer name; it wins when both are sent.
    bool given = false, newer = false;
    int64_t mt = get_int(body, "max_tokens", 1, 1 << 20, 0, &given);
    mt = get_int(body, "max_completion_tokens", 1, 1 << 20, mt, &newer);
    r.max_tokens_given = given || newer;
    const int cap = info.max_tokens;
    if (r.max_tokens_given && cap > 0 && mt > cap) {
        const char* key = newer ? "max_completion_tokens" : "max_tokens";
        throw bad("'" + std::string(key) + "' is " + std::to_string(mt) + ", more than this server's limit of " +
                      std::to_string(cap) + " (--max-tokens)",
                  key, "invalid_value");
    }
    // OpenAI's defaults: completions stop at 16 tokens, chat runs to the
    // context; the server's cap, if any, bounds both.
    const int dflt = ep == Endpoint::Completion ? (cap > 0 ? std::min(16, cap) : 16) : cap;
    r.gen.max_tokens = r.max_tokens_given ? (int)mt : dflt;

    auto& sp = r.gen.sampling;
    sp.temperature = (float)get_number(body, "temperature", 0.0, 2.0, 1.0);
    sp.top_p = (float)get_number(body, "top_p", 0.0, 1.0, 1.0);
    if (sp.top_p <= 0.0f) throw bad("'top_p' must be greater than 0", "top_p", "invalid_value");
    // Extensions many OpenAI-compatible servers accept (llama.cpp, vLLM).
    sp.top_k = (int)get_int(body, "top_k", 0, 1 << 20, 0);
    sp.min_p = (float)get_number(body, "min_p", 0.0, 1.0, 0.0);
    bool seed_given = false;
    const int64_t seed = get_int(body, "seed", std::numeric_limits<int64_t>::min(),
                                 std::numeric_limits<int64_t>::max(), 0, &seed_given);
    sp.seed = (uint64_t)seed;
    r.seed_given = seed_given;

    parse_stop(body, r.gen);
    // Extension (llama.cpp's server and vLLM): generate past end-of-generation
    // tokens, to exactly max_tokens (load tests, benchmarks).
    r.gen.ignore_eos = get_bool(body, "ignore_eos", false);
    r.stream = get_bool(body, "stream", false);
    if (const json* so = field(body, "stream_options")) {
        if (!so->is_object()) throw wrong_type("stream_options", "an object", *so);
        r.include_usage = get_bool(*so, "include_usage", false);
    }
    reject_unsupported(body, ep);
    parse_spec(body, info, sp.greedy(), r.spec);
    return r;
}

void check_api_key(std::string_view auth, const std::string& key) {
    if (key.empty()) return;
    const std::string_view prefix = "bearer ";
    bool ok = auth.size() > prefix.size();
    if (ok) {
        for (size_t i = 0; i < prefix.size(); ++i) ok &= std::tolower((unsigned char)auth[i]) == prefix[i];
    }
    std::string_view given = ok ? auth.substr(prefix.size()) : std::string_view{};
    // Compare in time independent of where the first difference is.
    unsigned diff = given.size() != key.size();
    for (size_t i = 0; i < key.size(); ++i) diff |= (unsigned)(i < given.size() ? given[i] : 0) ^ (unsigned)key[i];
    if (!ok || diff != 0)
        throw ApiError(401, ok ? "Incorrect API key provided" : "Missing API key (use 'Authorization: Bearer KEY')",
                       "", "invalid_api_key", "authentication_error");
}

json error_json(const ApiError& e) {
    json err;
    err["message"] = e.message;
    err["type"] = e.type;
    err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
    err["code"] = e.code.empty() ? json(nullptr) : json(e.code);
    return json{{"error", err}};
}

json usage_json(const Usage& u) {
    return json{{"prompt_tokens", u.prompt_tokens},
                {"completion_tokens", u.completion_tokens},
                {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

namespace {
json finish(const std::string& reason) { return reason.empty() ? json(nullptr) : json(reason); }
json envelope(const char* object, const std::string& id, int64_t created, const std::string& model) {
    return json{{"id", id}, {"object", object}, {"created", created}, {"model", model}};
}
}  // namespace

json chat_response(const std::string& id, int64_t created, const std::string& model, const std::string& text,
                   const std::string& finish_reason, const Usage& u) {
    json j = envelope("chat.completion", id, created, model);
    j["choices"] = json::array({json{{"index", 0},
                                     {"message", {{"role", "assistant"}, {"content", text}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", finish(finish_reason)}}});
    j["usage"] = usage_json(u);
    return j;
}

json completion_response(const std::string& id, int64_t created, const std::string& model, const std::string& text,
                         const std::string& finish_reason, const Usage& u) {
    json j = envelope("text_completion", id, created, model);
    j["choices"] = json::array(
        {json{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish(finish_reason)}}});
    j["usage"] = usage_json(u);
    return j;
}

json chat_chunk(const std::string& id, int64_t created, const std::string& model, const std::string& content,
                const std::string& finish_reason, bool role_chunk) {
    json j = envelope("chat.completion.chunk", id, created, model);
    json delta = json::object();
    if (role_chunk) delta["role"] = "assistant";
    if (!content.empty() || role_chunk) delta["content"] = content;
    j["choices"] = json::array(
        {json{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish(finish_reason)}}});
    return j;
}

json completion_chunk(const std::string& id, int64_t created, const std::string& model, const std::string& text,
                      const std::string& finish_reason) {
    json j = envelope("text_completion", id, created, model);
    j["choices"] = json::array(
        {json{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish(finish_reason)}}});
    return j;
}

json usage_chunk(Endpoint ep, const std::string& id, int64_t created, const std::string& model, const Usage& u) {
    json j = envelope(ep == Endpoint::Chat ? "chat.completion.chunk" : "text_completion", id, created, model);
    j["choices"] = json::array();
    j["usage"] = usage_json(u);
    return j;
}

void Provenance::append(const Provenance& p) {
    spans.insert(spans.end(), p.spans.begin(), p.spans.end());
    draft_tokens += p.draft_tokens;
    target_tokens += p.target_tokens;
}

void add_provenance(json& j, const Provenance& p) {
    json spans = json::array();
    for (const TokenSpan& s : p.spans)
        spans.push_back(json{{"text", s.text}, {"source", s.draft ? "draft" : "target"}});
    j["specdec"] = json{{"provenance", std::move(spans)},
                        {"tokens", json{{"draft", p.draft_tokens}, {"target", p.target_tokens}}}};
}

json models_json(const ServerInfo& info, int64_t created) {
    json m{{"id", info.model_id}, {"object", "model"}, {"created", created}, {"owned_by", "specdec"}};
    m["context_length"] = info.n_ctx;
    m["specdec"] = json{{"methods", info.available_methods},
                        {"default_method", info.default_method},
                        {"default_sampled_method", info.default_sampled_method},
                        {"max_tokens", info.max_tokens}};
    return json{{"object", "list"}, {"data", json::array({m})}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace specdec::server
