// Regression tests for the bugs the libFuzzer targets found (tests/fuzz,
// docs/fuzzing.md). Each feeds the input the fuzzer reported (minimised, or
// rebuilt with the test GGUF writer where the raw bytes would be unreadable)
// and expects a clean error or the right result.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/chat_template.h"
#include "io/gguf.h"
#include "io/tokenizer.h"
#include "server/openai_protocol.h"
#include "unit/gguf_writer.h"

using specdec::Error;

namespace {

specdec::server::ServerInfo server_info() {
    specdec::server::ServerInfo i;
    i.model_id = "smol";
    i.n_ctx = 512;
    return i;
}

}  // namespace

// fuzz_parse_request: an integer field given as a float outside int64's range
// was converted to int64 before the range check (undefined behaviour, UBSan
// float-cast-overflow). It must be a clean 400 naming the field.
TEST(FuzzRegression, HugeFloatForIntegerFieldIsCleanError) {
    using namespace specdec::server;
    for (const char* v : {"1e300", "-1e300", "9.3e18", "1.8446744073709552e19"}) {
        for (const char* key : {"max_tokens", "seed", "top_k", "n"}) {
            const std::string body =
                std::string(R"({"messages":[{"role":"user","content":"hi"}],")") + key + "\":" + v + "}";
            try {
                parse_request(Endpoint::Chat, body, server_info());
                FAIL() << "accepted " << body;
            } catch (const ApiError& e) {
                EXPECT_EQ(e.status, 400) << body;
                EXPECT_EQ(e.param, key) << body;
                EXPECT_NE(e.message.find("integer"), std::string::npos) << e.message;
            }
        }
    }
    // The body the fuzzer found: an integer literal past uint64 (9.2e19)
    // reaches the parser as a double.
    specdec::server::ServerInfo draft = server_info();
    draft.available_methods = {"ar", "ssd"};
    try {
        parse_request(Endpoint::Completion,
                      R"({"prompt":["def quicksort(&rr):\n"],"temperature":0,"specdec":{"method":"ssd","draft_k":4},)"
                      R"("seed":92233720306854775807,"strgam":true,"streccccccccccccccccccam_options":)"
                      R"({"include_usage":false}})",
                      draft);
        FAIL() << "accepted seed 9.2e19";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.param, "seed");
    }
    // Integral floats in range still read as integers.
    const auto r = parse_request(Endpoint::Completion, R"({"prompt":"x","max_tokens":4.0,"seed":-2e18})", server_info());
    EXPECT_EQ(r.gen.max_tokens, 4);
    EXPECT_EQ(r.gen.sampling.seed, uint64_t(int64_t(-2000000000000000000)));
}

// fuzz_gguf: a tensor of 2^40 x 2^40 F32 elements passed both per-dimension
// bounds; its byte size wrapped to 0, so it "fit" in a tiny file and
// n_elements() overflowed. It must be rejected as too large.
TEST(FuzzRegression, GgufTensorWhoseSizeWrapsIsRejected) {
    specdec::test::GgufWriter w;
    w.kv_str("general.architecture", "llama");
    w.tensor("huge", 0, {int64_t(1) << 40, int64_t(1) << 40}, {});
    const auto bytes = w.bytes();
    try {
        specdec::io::GgufFile::parse(bytes.data(), bytes.size(), "wrap.gguf");
        FAIL() << "accepted a tensor of 2^80 elements";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("too large"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("huge"), std::string::npos) << e.what();
    }
    // Large but sane shapes still load (only their size is checked here).
    specdec::test::GgufWriter ok;
    ok.tensor("t", 0, {4, 2}, std::vector<uint8_t>(32, 0));
    const auto ob = ok.bytes();
    EXPECT_EQ(specdec::io::GgufFile::parse(ob.data(), ob.size(), "ok.gguf")->tensor("t").n_elements(), 8);
}

// fuzz_tokenizer (vocabulary mode): a SentencePiece byte token (type 6) whose
// text is shorter than "<0x" made substr throw std::out_of_range out of
// Tokenizer::from_gguf instead of specdec::Error.
TEST(FuzzRegression, ShortSpmByteTokenIsCleanError) {
    specdec::test::GgufWriter w;
    w.kv_str("tokenizer.ggml.model", "llama");
    w.kv_str_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
    w.kv_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 6});
    const auto bytes = w.bytes();
    const auto f = specdec::io::GgufFile::parse(bytes.data(), bytes.size(), "spm.gguf");
    try {
        specdec::io::Tokenizer::from_gguf(*f);
        FAIL() << "accepted byte token 'a'";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("byte token 'a'"), std::string::npos) << e.what();
    }
}

// fuzz_chat_template: gemma's trim decoded and re-encoded the whole content
// whenever there was whitespace to strip, so invalid UTF-8 inside it became
// U+FFFD (the content changed, and grew up to 3x). Only the ends may change;
// the interpreter's trim filter (Python's str.strip) keeps this.
TEST(FuzzRegression, GemmaTrimKeepsInnerBytes) {
    using namespace specdec::io;
    const ChatTemplate gemma(
        "{% for m in messages %}{{ '<start_of_turn>' + m['role'] + '\\n' + m['content'] | trim + '<end_of_turn>\\n' }}"
        "{% endfor %}");
    auto render = [&](const std::string& content) {
        ChatRenderInputs in;
        in.messages = messages_value({{"user", content}});
        return gemma.render(in);
    };
    const std::string inner = "a\xFF\xC3(b\xE2\x82 \xC0\x80z";
    EXPECT_EQ(render(" \t" + inner + "\xE3\x80\x80\n"), "<start_of_turn>user\n" + inner + "<end_of_turn>\n");
    const std::string user = "Hi t<args-json-objehere " + std::string(86, '\xFF') + "can I he  What is 2+2?\n  ";
    EXPECT_EQ(render(user), "<start_of_turn>user\n" + user.substr(0, user.size() - 3) + "<end_of_turn>\n");
    // Unicode whitespace at the ends is stripped, as Python's str.strip.
    EXPECT_EQ(render("\xC2\xA0Hi\xE2\x80\xA8"), "<start_of_turn>user\nHi<end_of_turn>\n");
    EXPECT_EQ(render(" \xE3\x80\x80 "), "<start_of_turn>user\n<end_of_turn>\n");
}
