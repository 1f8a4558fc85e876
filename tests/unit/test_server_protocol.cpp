// OpenAI protocol parsing, validation and response shapes for `specdec serve`
// (no network, no model).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "server/metrics.h"
#include "server/openai_protocol.h"

using namespace specdec::server;
using nlohmann::json;

namespace {

ServerInfo info() {
    ServerInfo i;
    i.model_id = "smol";
    i.model_aliases = {"smol.gguf"};
    i.n_ctx = 512;
    return i;
}

ParsedRequest chat(const std::string& body) { return parse_request(Endpoint::Chat, body, info()); }
ParsedRequest comp(const std::string& body) { return parse_request(Endpoint::Completion, body, info()); }

// Expects an ApiError with the given status whose param is `param`.
void expect_error(Endpoint ep, const std::string& body, int status, const std::string& param = "*") {
    try {
        parse_request(ep, body, info());
        FAIL() << "accepted: " << body;
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, status) << body << " -> " << e.message;
        if (param != "*") {
            EXPECT_EQ(e.param, param) << body << " -> " << e.message;
        }
        EXPECT_FALSE(e.message.empty());
    }
}

}  // namespace

TEST(ServerProtocol, ParsesChatRequest) {
    const auto r = chat(R"({"model":"smol","messages":[{"role":"system","content":"be brief"},
        {"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]}],
        "max_tokens":7,"temperature":0,"top_p":0.5,"seed":42,"stop":["\n","END"],"stream":true,
        "stream_options":{"include_usage":true}})");
    ASSERT_EQ(r.gen.messages.size(), 2u);
    EXPECT_EQ(r.gen.messages[0].role, "system");
    EXPECT_EQ(r.gen.messages[1].content, "hi there");
    EXPECT_EQ(r.gen.max_tokens, 7);
    EXPECT_TRUE(r.max_tokens_given);
    EXPECT_EQ(r.gen.sampling.temperature, 0.0f);
    EXPECT_FLOAT_EQ(r.gen.sampling.top_p, 0.5f);
    EXPECT_EQ(r.gen.sampling.seed, 42u);
    EXPECT_TRUE(r.seed_given);
    EXPECT_EQ(r.gen.stop, (std::vector<std::string>{"\n", "END"}));
    EXPECT_TRUE(r.stream);
    EXPECT_TRUE(r.include_usage);
    EXPECT_EQ(r.spec.method, "ar");
}

TEST(ServerProtocol, Defaults) {
    const auto c = chat(R"({"messages":[{"role":"user","content":"x"}]})");
    EXPECT_EQ(c.gen.max_tokens, 0);  // chat: to the context (filled in by the server)
    EXPECT_FALSE(c.max_tokens_given);
    EXPECT_EQ(c.gen.sampling.temperature, 1.0f);  // OpenAI's default
    EXPECT_FALSE(c.seed_given);
    EXPECT_FALSE(c.stream);
    const auto p = comp(R"({"model":"smol.gguf","prompt":"x","stop":"\n","max_tokens":null})");
    EXPECT_EQ(p.gen.max_tokens, 16);  // OpenAI completions default
    EXPECT_EQ(p.gen.prompt, "x");
    EXPECT_EQ(p.gen.stop, (std::vector<std::string>{"\n"}));
    EXPECT_EQ(comp(R"({"prompt":["only one"]})").gen.prompt, "only one");
}

TEST(ServerProtocol, MaxCompletionTokensWins) {
    EXPECT_EQ(chat(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":5,"max_completion_tokens":9})")
                  .gen.max_tokens,
              9);
    EXPECT_EQ(chat(R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":3})").gen.max_tokens, 3);
    EXPECT_EQ(chat(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":4.0})").gen.max_tokens, 4);
}

TEST(ServerProtocol, MaxTokensCap) {
    ServerInfo capped = info();
    capped.max_tokens = 100;
    const auto parse = [&](Endpoint ep, const std::string& b) { return parse_request(ep, b, capped); };
    const std::string m = R"("messages":[{"role":"user","content":"x"}])";
    // At the cap: accepted as asked.
    EXPECT_EQ(parse(Endpoint::Chat, "{" + m + R"(,"max_tokens":100})").gen.max_tokens, 100);
    // None given: chat gets the cap, completions OpenAI's 16.
    EXPECT_EQ(parse(Endpoint::Chat, "{" + m + "}").gen.max_tokens, 100);
    EXPECT_FALSE(parse(Endpoint::Chat, "{" + m + "}").max_tokens_given);
    EXPECT_EQ(parse(Endpoint::Completion, R"({"prompt":"x"})").gen.max_tokens, 16);
    capped.max_tokens = 8;  // a cap below 16 bounds the completions default too
    EXPECT_EQ(parse(Endpoint::Completion, R"({"prompt":"x"})").gen.max_tokens, 8);
    capped.max_tokens = 100;
    // Over the cap: 400 naming the field that asked (the newer name wins when both are sent).
    for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
             {"{" + m + R"(,"max_tokens":101})", "max_tokens"},
             {"{" + m + R"(,"max_completion_tokens":5000})", "max_completion_tokens"},
             {"{" + m + R"(,"max_tokens":5,"max_completion_tokens":101})", "max_completion_tokens"}}) {
        try {
            parse(Endpoint::Chat, body);
            ADD_FAILURE() << "accepted: " << body;
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status, 400) << body;
            EXPECT_EQ(e.param, param) << body;
            EXPECT_EQ(e.code, "invalid_value") << body;
            EXPECT_NE(e.message.find("--max-tokens"), std::string::npos) << e.message;
        }
    }
    EXPECT_EQ(parse(Endpoint::Chat, "{" + m + R"(,"max_tokens":5000,"max_completion_tokens":50})").gen.max_tokens,
              50);
    try {
        parse(Endpoint::Completion, R"({"prompt":"x","max_tokens":101})");
        ADD_FAILURE() << "completion over the cap accepted";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
    }
}

TEST(ServerProtocol, RejectsMalformedJson) {
    for (const char* b : {"", "{", "not json", "[1,2]", "42", "\"str\"", "{\"messages\": [}", "null"})
        expect_error(Endpoint::Chat, b, 400);
}

TEST(ServerProtocol, RejectsWrongTypes) {
    const std::string m = R"("messages":[{"role":"user","content":"x"}])";
    expect_error(Endpoint::Chat, "{\"messages\":\"hi\"}", 400, "messages");
    expect_error(Endpoint::Chat, "{\"messages\":[]}", 400, "messages");
    expect_error(Endpoint::Chat, "{\"messages\":[1]}", 400, "messages[0]");
    expect_error(Endpoint::Chat, "{\"messages\":[{\"content\":\"x\"}]}", 400, "messages[0].role");
    expect_error(Endpoint::Chat, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", 400, "messages[0].role");
    expect_error(Endpoint::Chat, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400, "messages[0].content");
    expect_error(Endpoint::Chat, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", 400,
                 "messages[0].content");
    expect_error(Endpoint::Chat, "{}", 400, "messages");
    expect_error(Endpoint::Chat, "{" + m + ",\"max_tokens\":\"10\"}", 400, "max_tokens");
    expect_error(Endpoint::Chat, "{" + m + ",\"max_tokens\":0}", 400, "max_tokens");
    expect_error(Endpoint::Chat, "{" + m + ",\"max_tokens\":-3}", 400, "max_tokens");
    expect_error(Endpoint::Chat, "{" + m + ",\"max_tokens\":2.5}", 400, "max_tokens");
    expect_error(Endpoint::Chat, "{" + m + ",\"max_tokens\":1e300}", 400, "max_tokens");
    expect_error(Endpoint::Chat, "{" + m + ",\"max_tokens\":18446744073709551615}", 400, "max_tokens");
    expect_error(Endpoint::Chat, "{" + m + ",\"temperature\":\"hot\"}", 400, "temperature");
    expect_error(Endpoint::Chat, "{" + m + ",\"temperature\":-1}", 400, "temperature");
    expect_error(Endpoint::Chat, "{" + m + ",\"temperature\":3}", 400, "temperature");
    expect_error(Endpoint::Chat, "{" + m + ",\"top_p\":0}", 400, "top_p");
    expect_error(Endpoint::Chat, "{" + m + ",\"top_p\":1.5}", 400, "top_p");
    expect_error(Endpoint::Chat, "{" + m + ",\"seed\":\"1\"}", 400, "seed");
    expect_error(Endpoint::Chat, "{" + m + ",\"seed\":1.5}", 400, "seed");
    expect_error(Endpoint::Chat, "{" + m + ",\"stop\":5}", 400, "stop");
    expect_error(Endpoint::Chat, "{" + m + ",\"stop\":[\"a\",3]}", 400, "stop");
    expect_error(Endpoint::Chat, "{" + m + ",\"stop\":\"\"}", 400, "stop");
    expect_error(Endpoint::Chat, "{" + m + ",\"stream\":\"yes\"}", 400, "stream");
    expect_error(Endpoint::Chat, "{" + m + ",\"stream_options\":true}", 400, "stream_options");
    expect_error(Endpoint::Chat, "{" + m + ",\"model\":7}", 400, "model");
    expect_error(Endpoint::Completion, "{\"prompt\":5}", 400, "prompt");
    expect_error(Endpoint::Completion, "{\"prompt\":[1,2,3]}", 400, "prompt");
    expect_error(Endpoint::Completion, "{\"prompt\":[\"a\",\"b\"]}", 400, "prompt");
    expect_error(Endpoint::Completion, "{}", 400, "prompt");
}

TEST(ServerProtocol, RejectsUnknownModelAndUnsupported) {
    const std::string m = R"("messages":[{"role":"user","content":"x"}])";
    expect_error(Endpoint::Chat, "{" + m + ",\"model\":\"gpt-4\"}", 400, "model");
    expect_error(Endpoint::Chat, "{" + m + ",\"n\":2}", 400, "n");
    expect_error(Endpoint::Chat, "{" + m + ",\"logprobs\":true}", 400, "logprobs");
    expect_error(Endpoint::Chat, "{" + m + ",\"frequency_penalty\":0.5}", 400, "frequency_penalty");
    expect_error(Endpoint::Completion, "{\"prompt\":\"x\",\"echo\":true}", 400, "echo");
    // Neutral values of unsupported parameters are fine.
    EXPECT_NO_THROW(chat("{" + m + ",\"n\":1,\"logprobs\":false,\"presence_penalty\":0,\"user\":\"u\"}"));
}

TEST(ServerProtocol, SpecdecExtension) {
    const std::string m = R"("messages":[{"role":"user","content":"x"}])";
    EXPECT_EQ(chat("{" + m + ",\"specdec\":{\"method\":\"ar\"}}").spec.method, "ar");
    EXPECT_EQ(chat("{" + m + ",\"specdec\":{\"draft_k\":4}}").spec.draft_k, 4);
    try {
        chat("{" + m + ",\"specdec\":{\"method\":\"chain\",\"draft_k\":4}}");
        FAIL();
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_NE(e.message.find("method chain not available"), std::string::npos) << e.message;
    }
    expect_error(Endpoint::Chat, "{" + m + ",\"specdec\":\"chain\"}", 400, "specdec");
    expect_error(Endpoint::Chat, "{" + m + ",\"specdec\":{\"method\":1}}", 400, "specdec.method");
    expect_error(Endpoint::Chat, "{" + m + ",\"specdec\":{\"draft_k\":0}}", 400, "specdec.draft_k");
    expect_error(Endpoint::Chat, "{" + m + ",\"specdec\":{\"draftk\":2}}", 400, "specdec.draftk");
    // Without a draft model, chain, tree and ssd are refused with the reason.
    for (const char* method : {"chain", "tree", "ssd"}) {
        try {
            chat("{" + m + ",\"specdec\":{\"method\":\"" + method + "\"}}");
            FAIL() << method;
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status, 400);
            EXPECT_EQ(e.code, "draft_model_required");
            EXPECT_EQ(e.param, "specdec.method");
            EXPECT_NE(e.message.find("needs a draft model"), std::string::npos) << e.message;
        }
    }
    try {
        chat("{" + m + ",\"specdec\":{\"method\":\"medusa\"}}");
        FAIL();
    } catch (const ApiError& e) {
        EXPECT_EQ(e.code, "method_not_available");
    }
    ServerInfo i = info();
    i.available_methods = {"ar", "chain"};
    EXPECT_EQ(parse_request(Endpoint::Chat, "{" + m + ",\"specdec\":{\"method\":\"chain\"}}", i).spec.method, "chain");
    // Provenance: off unless asked; a boolean.
    EXPECT_FALSE(chat("{" + m + "}").spec.provenance);
    EXPECT_TRUE(chat("{" + m + ",\"specdec\":{\"provenance\":true}}").spec.provenance);
    expect_error(Endpoint::Chat, "{" + m + ",\"specdec\":{\"provenance\":1}}", 400, "specdec.provenance");
}

TEST(ServerProtocol, ProvenanceExtensionShape) {
    // Asked for: the chunk gains specdec.provenance and specdec.tokens; the
    // OpenAI fields are the same as without it.
    Provenance p;
    p.spans = {{"Hel", false}, {"lo", true}};
    p.draft_tokens = 1;
    p.target_tokens = 1;
    const json plain = chat_chunk("id", 1, "smol", "Hello", "");
    json j = plain;
    add_provenance(j, p);
    EXPECT_EQ(j["specdec"]["provenance"],
              json::parse(R"([{"text":"Hel","source":"target"},{"text":"lo","source":"draft"}])"));
    EXPECT_EQ(j["specdec"]["tokens"], json::parse(R"({"draft":1,"target":1})"));
    j.erase("specdec");
    EXPECT_EQ(j, plain);
    EXPECT_FALSE(plain.contains("specdec"));
    // /v1/models tells the page which methods it may offer.
    ServerInfo i = info();
    i.available_methods = {"ar", "auto", "ngram"};
    i.default_method = "auto";
    const json models = models_json(i, 1);
    EXPECT_EQ(models["data"][0]["specdec"]["methods"], json::parse(R"(["ar","auto","ngram"])"));
    EXPECT_EQ(models["data"][0]["specdec"]["default_method"], "auto");
}

TEST(ServerProtocol, ApiKey) {
    EXPECT_NO_THROW(check_api_key("", ""));
    EXPECT_NO_THROW(check_api_key("Bearer k1", "k1"));
    EXPECT_NO_THROW(check_api_key("bearer k1", "k1"));
    for (const char* h : {"", "Bearer", "Bearer ", "Bearer k2", "Bearer k1x", "Basic k1", "k1"}) {
        try {
            check_api_key(h, "k1");
            FAIL() << h;
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status, 401);
            EXPECT_EQ(e.type, "authentication_error");
        }
    }
}

TEST(ServerProtocol, ResponseShapes) {
    const json c = chat_response("id1", 5, "smol", "hello", "stop", Usage{3, 2});
    EXPECT_EQ(c["object"], "chat.completion");
    EXPECT_EQ(c["choices"][0]["message"]["role"], "assistant");
    EXPECT_EQ(c["choices"][0]["message"]["content"], "hello");
    EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(c["usage"]["total_tokens"], 5);
    const json t = completion_response("id2", 5, "smol", "hi", "length", Usage{1, 1});
    EXPECT_EQ(t["object"], "text_completion");
    EXPECT_EQ(t["choices"][0]["text"], "hi");
    const json first = chat_chunk("id", 1, "smol", "", "", true);
    EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
    EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
    const json last = chat_chunk("id", 1, "smol", "", "stop");
    EXPECT_TRUE(last["choices"][0]["delta"].empty());
    EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
    EXPECT_TRUE(usage_chunk(Endpoint::Chat, "id", 1, "smol", Usage{1, 2})["choices"].empty());
    EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
    const json e = error_json(ApiError(429, "busy", "", "queue_full", "rate_limit_error"));
    EXPECT_EQ(e["error"]["message"], "busy");
    EXPECT_TRUE(e["error"]["param"].is_null());
    EXPECT_EQ(e["error"]["code"], "queue_full");
    EXPECT_EQ(models_json(info(), 1)["data"][0]["id"], "smol");
    // Partial UTF-8 from generated bytes must not throw.
    EXPECT_NO_THROW(dump(json{{"t", std::string("\xE2\x82")}}));
}

TEST(ServerMetrics, PrometheusText) {
    Metrics m;
    m.record_request("/v1/chat/completions", 200);
    m.record_request("/v1/chat/completions", 429);
    m.record_decode_step(4, 4, 0.02);
    m.record_generation(1.5, 0.1, 10, 5);
    m.set_queue_depth(3, 2);
    m.set_kv_tokens(120, 0);
    m.set_kv_resident_bytes(8192, 0);
    // Per method: a first token, then two rounds of 3 and 5 tokens (tau 4).
    m.record_method_tokens("chain", 0, 1, 0, 0);
    m.record_method_tokens("chain", 1, 3, 4, 2);
    m.record_method_tokens("chain", 1, 5, 4, 4);
    m.record_lookup_rounds("chain", 1, 4);  // the second round was a lookup chain
    m.record_method_tokens("ar", 1, 1, 0, 0);
    m.record_spec_times(0.25, 0.5);
    const std::string s = m.render();
    EXPECT_NE(s.find("specdec_method_tokens_total{method=\"chain\"} 9"), std::string::npos) << s;
    EXPECT_NE(s.find("specdec_method_mean_accept_length{method=\"chain\"} 4"), std::string::npos);
    EXPECT_NE(s.find("specdec_method_mean_accept_length{method=\"ar\"} 1"), std::string::npos);
    EXPECT_NE(s.find("specdec_method_accepted_total{method=\"chain\"} 6"), std::string::npos);
    EXPECT_NE(s.find("specdec_method_lookup_rounds_total{method=\"chain\"} 1"), std::string::npos);
    EXPECT_NE(s.find("specdec_method_lookup_accepted_total{method=\"chain\"} 4"), std::string::npos);
    EXPECT_NE(s.find("specdec_method_lookup_rounds_total{method=\"ar\"} 0"), std::string::npos);
    EXPECT_NE(s.find("specdec_draft_seconds_total 0.25"), std::string::npos);
    EXPECT_NE(s.find("specdec_verify_seconds_total 0.5"), std::string::npos);
    EXPECT_NE(s.find("specdec_requests_total{endpoint=\"/v1/chat/completions\",status=\"429\"} 1"),
              std::string::npos);
    EXPECT_NE(s.find("specdec_tokens_generated_total 4"), std::string::npos);
    EXPECT_NE(s.find("specdec_mean_accept_length 1"), std::string::npos);
    EXPECT_NE(s.find("specdec_ssd_hit_rate 0"), std::string::npos);
    EXPECT_NE(s.find("specdec_queue_depth 3"), std::string::npos);
    EXPECT_NE(s.find("specdec_kv_tokens{cache=\"target\"} 120\n"), std::string::npos);
    EXPECT_NE(s.find("specdec_kv_tokens{cache=\"draft\"} 0\n"), std::string::npos);
    EXPECT_NE(s.find("specdec_kv_resident_bytes{cache=\"target\"} 8192\n"), std::string::npos);
    EXPECT_NE(s.find("specdec_request_latency_seconds_bucket{le=\"2.5\"} 1"), std::string::npos);
    EXPECT_NE(s.find("specdec_request_latency_seconds_bucket{le=\"1\"} 0"), std::string::npos);
    EXPECT_NE(s.find("specdec_request_latency_seconds_count 1"), std::string::npos);
}

TEST(ServerMetrics, SsdFigures) {
    Metrics m;
    // Two reports: 8 lookups with 6 hits, then 2 with 1; stall times add up.
    m.record_ssd(8, 6, 0.25);
    m.record_ssd(2, 1, 0.5);
    m.record_method_tokens("ssd", 5, 15, 16, 10);
    const std::string s = m.render();
    EXPECT_NE(s.find("specdec_ssd_hit_rate 0.7\n"), std::string::npos) << s;
    EXPECT_NE(s.find("specdec_ssd_cache_lookups_total 10"), std::string::npos);
    EXPECT_NE(s.find("specdec_ssd_cache_hits_total 7"), std::string::npos);
    EXPECT_NE(s.find("specdec_ssd_stall_seconds_total 0.75"), std::string::npos);
    EXPECT_NE(s.find("specdec_method_mean_accept_length{method=\"ssd\"} 3"), std::string::npos);
}
