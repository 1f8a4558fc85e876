// Tokenizer, pre-tokenizer and chat template tests on the real models, plus
// TokenizerParity.Dump: a data dumper driven by tests/python/test_tokenizer_parity.py
// (skipped unless SPECDEC_TOKENIZE_IN is set).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/chat_template.h"
#include "io/gguf.h"
#include "io/pretokenizer.h"
#include "io/tokenizer.h"
#include "io/unicode_tables.h"
#include "unit/model_paths.h"

using namespace specdec::io;

namespace {

// Models by their models/manifest.json name (tests/unit/model_paths.h).
constexpr const char* kQwen05 = "qwen2.5-coder-0.5b-instruct-q4_k_m";

struct Loaded {
    std::unique_ptr<GgufFile> file;
    std::unique_ptr<Tokenizer> tok;
};

Loaded load(const char* name) {
    Loaded l;
    const std::string p = specdec::test::model_path(name);
    if (p.empty()) return l;
    l.file = GgufFile::open(p);
    l.tok = Tokenizer::from_gguf(*l.file);
    return l;
}

#define LOAD_OR_FAIL(var, name)                                              \
    Loaded var = load(name);                                                 \
    ASSERT_TRUE(var.tok) << "model " << name << " missing from " << specdec::test::models_dir() \
                         << "/manifest.json (run: .venv/bin/python tools/fetch_models.py --all)"

std::vector<std::string> words(PreTokenizer t, const std::string& s) { return pretokenize(t, s); }

}  // namespace

TEST(Unicode, Categories) {
    namespace uc = specdec::io::unicode;
    EXPECT_TRUE(uc::flags('a') & uc::kLetter);
    EXPECT_TRUE(uc::flags('7') & uc::kNumber);
    EXPECT_TRUE(uc::flags(' ') & uc::kWhitespace);
    EXPECT_TRUE(uc::flags(0x4E2D) & uc::kLetter);       // 中
    EXPECT_TRUE(uc::flags(0x0301) & uc::kMark);         // combining acute
    EXPECT_TRUE(uc::flags(0x1F600) & uc::kSymbol);      // emoji
    EXPECT_TRUE(uc::flags(0x3000) & uc::kWhitespace);   // ideographic space
    EXPECT_TRUE(uc::flags(0x00B2) & uc::kNumber);       // superscript two
    EXPECT_EQ(uc::flags(0x110000), uc::kUndefined);
    const auto c = uc::decode_utf8("a\xC3\xA9\xFF");
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(c[1], 0xE9u);
    EXPECT_EQ(c[2], 0xFFFDu);  // invalid byte, like llama.cpp
}

TEST(PreTokenizer, Gpt2AndSmollm) {
    using V = std::vector<std::string>;
    EXPECT_EQ(words(PreTokenizer::Gpt2, "Hello world  don't 123"), (V{"Hello", " world", " ", " don", "'t", " 123"}));
    EXPECT_EQ(words(PreTokenizer::Gpt2, "a  \n"), (V{"a", "  \n"}));
    // smollm splits every digit first; the space before a number stays alone.
    EXPECT_EQ(words(PreTokenizer::Smollm, "x 123"), (V{"x", " ", "1", "2", "3"}));
}

TEST(PreTokenizer, Qwen2) {
    using V = std::vector<std::string>;
    EXPECT_EQ(words(PreTokenizer::Qwen2, "Hello world I'LL 42"), (V{"Hello", " world", " I", "'LL", " ", "4", "2"}));
    EXPECT_EQ(words(PreTokenizer::Qwen2, "a \n\n  b"), (V{"a", " \n\n", " ", " b"}));
    EXPECT_EQ(words(PreTokenizer::Qwen2, "x = (y);\n"), (V{"x", " =", " (", "y", ");\n"}));
    EXPECT_THROW(pretokenizer_from_name("no-such-pre"), specdec::Error);
}

TEST(Tokenizer, SmolLM) {
    LOAD_OR_FAIL(m, specdec::test::kSmolLM);
    const Tokenizer& t = *m.tok;
    EXPECT_EQ(t.n_vocab(), 49152);
    EXPECT_FALSE(t.add_bos());
    // Reference ids from llama.cpp (llama-cpp-python 0.3.36).
    const std::vector<int32_t> want = {19556, 905, 1326, 982, 339, 23, 16421, 216, 33, 34, 35, 36, 37, 216,
                                       1, 2067, 3738, 79, 1714, 79, 20589, 46};
    EXPECT_EQ(t.encode("Hello world don't I'LL 12345 <|im_start|> <start_of_turn>", true, true), want);
    EXPECT_NE(t.encode("<|im_start|>", false, false), std::vector<int32_t>{1});
    EXPECT_EQ(t.encode("<|im_start|>", false, true), std::vector<int32_t>{1});
    for (int32_t id : {0, 2, 4}) EXPECT_TRUE(t.is_end_of_generation(id)) << id;
    EXPECT_FALSE(t.is_end_of_generation(1));
    const std::string text = "def f(x):\n\treturn x ** 2  # ok\n\n";
    EXPECT_EQ(t.decode(t.encode(text, false, false)), text);
}

TEST(Tokenizer, Qwen2) {
    LOAD_OR_FAIL(m, kQwen05);
    const Tokenizer& t = *m.tok;
    EXPECT_EQ(t.n_vocab(), 151936);
    const std::vector<int32_t> want = {9707, 1879, 1513, 944, 358, 6, 4086, 220, 16, 17, 18, 19, 20,
                                       220, 151644, 366, 2468, 3575, 37274, 29};
    EXPECT_EQ(t.encode("Hello world don't I'LL 12345 <|im_start|> <start_of_turn>", true, true), want);
    for (int32_t id : {128247, 151643, 151645, 151662, 151663, 151664}) EXPECT_TRUE(t.is_end_of_generation(id)) << id;
    EXPECT_EQ(t.token_to_piece(151644), "<|im_start|>");
    EXPECT_EQ(t.eos_id(), 151645);
    const std::string text = "中文 émoji 😀 — ok";
    EXPECT_EQ(t.decode(t.encode(text, false, false)), text);
}

TEST(Tokenizer, Gemma) {
    LOAD_OR_FAIL(m, specdec::test::kGemma);
    const Tokenizer& t = *m.tok;
    EXPECT_EQ(t.n_vocab(), 262144);
    EXPECT_TRUE(t.add_bos());
    const std::vector<int32_t> want = {2, 9259, 1902, 1537, 236789, 236745, 564, 236789, 2182, 236743, 236770, 236778,
                                       236800, 236812, 236810, 655, 236909, 548, 236779, 3041, 111038, 236743, 105};
    EXPECT_EQ(t.encode("Hello world don't I'LL 12345 <|im_start|> <start_of_turn>", true, true), want);
    EXPECT_EQ(t.encode("", true, false), std::vector<int32_t>{2});
    EXPECT_TRUE(t.encode("", false, false).empty());
    for (int32_t id : {1, 106, 212}) EXPECT_TRUE(t.is_end_of_generation(id)) << id;
    EXPECT_EQ(t.token_to_piece(2), "<bos>");
    // Byte fallback: a private-use code point has no token of its own.
    const std::string odd = "\xEE\x80\x80";
    EXPECT_EQ(t.decode(t.encode(odd, false, false)), odd);
}

TEST(Tokenizer, BadMetadataThrows) {
    // Missing tokenizer metadata must throw, not crash.
    static const uint8_t tiny[] = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                   0, 0, 0, 0, 0, 0, 0, 0};
    // A valid GGUF with no metadata at all: the reader accepts it, the tokenizer must not.
    auto f = GgufFile::parse(tiny, sizeof(tiny), "tiny");
    EXPECT_THROW(Tokenizer::from_gguf(*f), specdec::Error);
}

TEST(ChatTemplate, Families) {
    const std::vector<ChatMessage> conv = {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
    ChatTemplate qwen = detect_chat_template(
        "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
        "<tool_response>",
        "qwen2");
    EXPECT_EQ(qwen.default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    EXPECT_EQ(render_chat(qwen, {{"user", "Hi"}}, true),
              "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
              "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    const ChatTemplate gemma = detect_chat_template("", "gemma3");
    EXPECT_EQ(gemma.family, ChatFamily::Gemma);
    EXPECT_EQ(render_chat(gemma, {{"system", "Be brief."}, {"user", " Hi \n"}}, true),
              "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
    EXPECT_THROW(render_chat(gemma, {{"assistant", "x"}}, false), specdec::Error);
    EXPECT_FALSE(detect_chat_template("{{ messages }}", "llama").known);
    EXPECT_EQ(render_chat(gemma, conv, false),
              "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
              "<start_of_turn>user\nBye<end_of_turn>\n");
}

TEST(ChatTemplate, RealModels) {
    LOAD_OR_FAIL(m, specdec::test::kSmolLM);
    EXPECT_EQ(apply_chat_template(*m.file, {{"user", "Hi"}}, true),
              "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
              "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

