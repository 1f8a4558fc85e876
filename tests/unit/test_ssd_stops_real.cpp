// SSD's end-of-generation rules on a real model (smollm2 drafting for
// itself, so rounds are long and every rule lands inside a round): EOS, a
// stop string, max_tokens, and cancellation from the streaming callback, one
// request at a time through generate_ssd and all at once through
// generate_ssd_batch. Each must end at exactly the token, text and finish
// reason of generate_ar. Small enough for the ThreadSanitizer step.
#include <gtest/gtest.h>

#include "runtime/engine.h"
#include "sched/ssd_scheduler.h"
#include "unit/model_paths.h"

using namespace specdec;

namespace {

std::unique_ptr<runtime::Engine> load(const std::string& path, int n_seq) {
    runtime::EngineOptions o;
    o.model_path = path;
    o.n_ctx = 256;
    o.n_seq = n_seq;
    o.n_threads = 1;  // the draft side has its own thread
    return runtime::Engine::load(o);
}

// The model answers this briefly and ends with its end-of-turn token.
runtime::GenerateRequest eos_request() {
    runtime::GenerateRequest r;
    r.messages = {{"user", "What is 2+2? Answer with a number only."}};
    r.max_tokens = 40;
    return r;
}

runtime::GenerateRequest text_request(int n) {
    runtime::GenerateRequest r;
    r.prompt = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n";
    r.max_tokens = n;
    r.ignore_eos = true;
    return r;
}

void expect_same(const runtime::GenerateResult& got, const runtime::GenerateResult& want, const std::string& what) {
    EXPECT_EQ(got.tokens, want.tokens) << what;
    EXPECT_EQ(got.text, want.text) << what;
    EXPECT_EQ(got.finish_reason, want.finish_reason) << what;
}

// A stop string taken from the model's own output: the piece of a token past
// the first round that does not occur earlier in the text.
std::string stop_string_from(const runtime::Engine& e, const std::vector<int32_t>& toks) {
    std::string text;
    for (size_t i = 0; i < toks.size(); ++i) {
        const std::string piece = e.tokenizer().token_to_piece(toks[i]);
        if (i >= 7 && piece.size() >= 2 && text.find(piece) == std::string::npos) return piece;
        text += piece;
    }
    return "";
}

struct Fixture {
    std::unique_ptr<runtime::Engine> target, draft;
    sched::SsdConfig cfg;
    explicit Fixture(const std::string& path) : target(load(path, 3)), draft(load(path, 3 * 5)) {
        cfg.k = 4;
        cfg.fanout_budget = 4;
        cfg.draft_threads = 2;
    }
};

}  // namespace

TEST(RealSsdStops, EosStopStringLengthAndCancellationMatchAr) {
    SPECDEC_REQUIRE_MODEL(path, test::kSmolLM);
    Fixture f(path);
    // EOS mid-generation.
    const auto eos_req = eos_request();
    const auto eos_ar = runtime::generate_ar(*f.target, eos_req);
    ASSERT_EQ(eos_ar.finish_reason, "stop");
    ASSERT_LT(eos_ar.n_generated, eos_req.max_tokens) << "the model no longer ends this answer with EOS";
    // A stop string inside the third round.
    auto stop_req = text_request(32);
    const auto plain = runtime::generate_ar(*f.target, stop_req);
    const std::string stop = stop_string_from(*f.target, plain.tokens);
    ASSERT_FALSE(stop.empty());
    stop_req.stop = {stop};
    const auto stop_ar = runtime::generate_ar(*f.target, stop_req);
    ASSERT_EQ(stop_ar.finish_reason, "stop");
    ASSERT_LT(stop_ar.n_generated, 32);
    // max_tokens inside a round (1 + 5 + 3).
    const auto len_req = text_request(9);
    const auto len_ar = runtime::generate_ar(*f.target, len_req);
    ASSERT_EQ(len_ar.finish_reason, "length");
    // Cancellation: the stream's consumer goes away after its third piece.
    const auto cancel_req = text_request(32);
    int pieces = 0;
    const runtime::TokenCallback cancel = [&](const std::string&) { return ++pieces < 3; };
    const auto cancel_ar = runtime::generate_ar(*f.target, cancel_req, cancel);
    ASSERT_EQ(cancel_ar.finish_reason, "cancelled");
    ASSERT_LT(cancel_ar.n_generated, 32);

    for (bool interrupt : {false, true}) {
        f.cfg.interrupt = interrupt;
        const std::string mode = interrupt ? " (interrupting builds)" : "";
        sched::SsdStats st;
        expect_same(sched::generate_ssd(*f.target, *f.draft, eos_req, f.cfg, &st), eos_ar, "eos" + mode);
        expect_same(sched::generate_ssd(*f.target, *f.draft, stop_req, f.cfg, &st), stop_ar, "stop string" + mode);
        expect_same(sched::generate_ssd(*f.target, *f.draft, len_req, f.cfg, &st), len_ar, "max_tokens" + mode);
        pieces = 0;
        expect_same(sched::generate_ssd(*f.target, *f.draft, cancel_req, f.cfg, &st, cancel), cancel_ar,
                    "cancelled" + mode);
        EXPECT_GT(st.spec.accepted, 0) << mode;
        // All three rules in one batch: each sequence ends on its own.
        const auto rs = sched::generate_ssd_batch(*f.target, *f.draft, {eos_req, stop_req, len_req}, f.cfg);
        ASSERT_EQ(rs.size(), 3u);
        expect_same(rs[0], eos_ar, "batched eos" + mode);
        expect_same(rs[1], stop_ar, "batched stop string" + mode);
        expect_same(rs[2], len_ar, "batched max_tokens" + mode);
    }
}
