// The public API (include/specdec/engine.h) on the CI model: every method's
// greedy tokens are AR's, the result says which method ran and how the
// speculation went, the callback streams the text and can stop decoding, the
// default-method rule, bad input as specdec::Error with the engine's message,
// and the statistics JSON every frontend reports (sched/generation_stats.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sched/generation_stats.h"
#include "specdec/engine.h"
#include "unit/model_paths.h"

using namespace specdec;

namespace {

const char* kPrompt = "def add(a, b):\n    return a + b\n\ndef add3(a, b, c):\n    return";

Request greedy(const std::string& method, int n = 16) {
    Request r;
    r.prompt = kPrompt;
    r.max_tokens = n;
    r.ignore_eos = true;  // full length: more tokens compared
    r.method = method;
    return r;
}

Engine load(const std::string& model, const std::string& draft = "", const std::string& draft_layers = "") {
    EngineOptions o;
    o.model = model;
    o.draft = draft;
    o.draft_layers = draft_layers;
    o.threads = 2;
    o.ctx = 256;
    return Engine(o);
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST(RealApiEngine, EveryMethodIsArTokenForTokenAndReportsItsSpeculation) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    Engine e = load(path, path);  // the model drafts for itself: every draft token is accepted
    ASSERT_TRUE(e.has_draft());
    EXPECT_EQ(e.model_path(), path);
    EXPECT_EQ(e.draft_path(), path);
    EXPECT_EQ(e.threads(), 2);
    EXPECT_EQ(e.n_ctx(), 256);
    const Result ar = e.generate(greedy("ar"));
    ASSERT_EQ(ar.n_generated, 16);
    EXPECT_EQ(ar.method, "ar");
    EXPECT_FALSE(ar.speculative);
    EXPECT_EQ(ar.rounds(), 15);  // the first token comes from the prefill
    EXPECT_EQ(ar.mean_accept_len(), 1.0);
    EXPECT_TRUE(ar.draft_model.empty());
    EXPECT_EQ(ar.finish_reason, "length");
    EXPECT_EQ(e.tokenize(greedy("ar")).size(), (size_t)ar.n_prompt);
    for (const char* name : {"chain", "tree", "ngram", "auto", "ssd"}) {
        const std::string m = name;
        const Result r = e.generate(greedy(m));
        EXPECT_EQ(r.tokens, ar.tokens) << m;
        EXPECT_EQ(r.text, ar.text) << m;
        EXPECT_EQ(r.method, m);
        EXPECT_TRUE(r.speculative) << m;
        EXPECT_EQ(r.rounds(), r.spec.rounds) << m;
        EXPECT_GT(r.spec.verify_s, 0.0) << m;
        if (m == "chain" || m == "tree" || m == "ssd") {
            // A self-draft agrees with the target: several tokens per verification.
            EXPECT_GT(r.mean_accept_len(), 2.0) << m;
            EXPECT_GT(r.spec.accepted, 0) << m;
            EXPECT_GT(r.spec.draft_s, 0.0) << m;
            EXPECT_EQ(r.draft_model, path) << m;
            EXPECT_LT(r.rounds(), ar.rounds()) << m;
        }
        if (m == "ngram") {
            EXPECT_TRUE(r.draft_model.empty());  // the draft model is not used
        }
    }
}

TEST(RealApiEngine, SelfSpeculationLayersAreReported) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    Engine e = load(path, "", "0-9,12-25");
    const Result ar = e.generate(greedy("ar"));
    const Result r = e.generate(greedy("chain"));
    EXPECT_EQ(r.tokens, ar.tokens);
    EXPECT_EQ(r.draft_layers, "0-9,12-25");
    EXPECT_EQ(r.draft_model, path);
}

TEST(RealApiEngine, CallbackStreamsTheTextAndStopsDecoding) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    Engine e = load(path);
    for (const char* name : {"ar", "ngram"}) {
        const std::string m = name;
        Request req = greedy(m, 24);
        std::string streamed;
        int pieces = 0;
        req.on_text = [&](const std::string& p) {
            streamed += p;
            ++pieces;
            return true;
        };
        const Result full = e.generate(req);
        EXPECT_EQ(streamed, full.text) << m;
        EXPECT_GT(pieces, 1) << m;
        req.on_text = [&](const std::string&) { return false; };  // stop at the first piece
        const Result cut = e.generate(req);
        EXPECT_EQ(cut.finish_reason, "cancelled") << m;
        EXPECT_LT(cut.n_generated, full.n_generated) << m;
        EXPECT_EQ(std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + cut.n_generated), cut.tokens) << m;
    }
}

TEST(RealApiEngine, DefaultMethodAndSeededSampling) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    Engine e = load(path);
    Request req = greedy("");
    EXPECT_EQ(e.resolve_method(req), "auto");
    req.sampling.temperature = 0.9f;
    req.sampling.seed = 7;
    EXPECT_EQ(e.resolve_method(req), "ar");  // a seed reproduces the text only under a fixed method
    const Result a = e.generate(req), b = e.generate(req);
    EXPECT_EQ(a.method, "ar");
    EXPECT_EQ(a.tokens, b.tokens);
    req.sampling.seed = 8;
    EXPECT_NE(e.generate(req).tokens, a.tokens);
}

TEST(RealApiEngine, BadInputIsAnErrorWithTheEnginesMessage) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    EXPECT_NE(error_of([] { load("/nonexistent/model.gguf"); }).find("/nonexistent/model.gguf"), std::string::npos);
    EXPECT_NE(error_of([&] { load(path, path, "4"); }).find("not both"), std::string::npos);
    Engine e = load(path);
    EXPECT_NE(error_of([&] { e.generate(greedy("bogus")); }).find("unknown method 'bogus'"), std::string::npos);
    EXPECT_NE(error_of([&] { e.generate(greedy("chain")); }).find("needs a draft model"), std::string::npos);
    EXPECT_NE(error_of([&] { e.generate(greedy("ssd")); }).find("needs a draft model"), std::string::npos);
    Request long_prompt = greedy("ar");
    long_prompt.prompt.clear();
    for (int i = 0; i < 300; ++i) long_prompt.prompt += "word ";
    EXPECT_NE(error_of([&] { e.generate(long_prompt); }).find("context"), std::string::npos);
    Request bad_temp = greedy("ar");
    bad_temp.sampling.temperature = -1;
    EXPECT_NE(error_of([&] { e.generate(bad_temp); }).find("temp"), std::string::npos);
    EXPECT_EQ(e.generate(greedy("ar", 3)).n_generated, 3);  // still usable
}

TEST(RealApiEngine, GenerationStatsHoldTheResultsFigures) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    Engine e = load(path, path);
    const Result ar = e.generate(greedy("ar"));
    const nlohmann::json ja = sched::generation_stats(ar);
    EXPECT_EQ(ja["method"], "ar");
    EXPECT_EQ(ja["n_generated"], ar.n_generated);
    EXPECT_EQ(ja["rounds"], ar.n_generated - 1);
    EXPECT_EQ(ja["mean_accept_len"], 1.0);
    EXPECT_EQ(ja["decode_tok_s"], ar.decode_tok_s());
    EXPECT_FALSE(ja.contains("drafted"));
    EXPECT_FALSE(ja.contains("auto"));
    const Result ch = e.generate(greedy("chain"));
    const nlohmann::json jc = sched::generation_stats(ch);
    EXPECT_EQ(jc["rounds"], ch.spec.rounds);
    EXPECT_EQ(jc["drafted"], ch.spec.drafted);
    EXPECT_EQ(jc["accepted"], ch.spec.accepted);
    EXPECT_EQ(jc["mean_accept_len"], ch.mean_accept_len());
    EXPECT_EQ(jc["draft_model"], path);
    EXPECT_FALSE(jc.contains("draft_layers"));
    const nlohmann::json jauto = sched::generation_stats(e.generate(greedy("auto")));
    ASSERT_TRUE(jauto.contains("auto"));
    EXPECT_TRUE(jauto["auto"].contains("rounds_draft"));
}
