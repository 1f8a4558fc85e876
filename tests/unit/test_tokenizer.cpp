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
#include "unit/gguf_writer.h"
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

// Expected splits below follow llama.cpp's unicode_regex_split for each
// vocabulary's regex list (src/llama-vocab.cpp), including how it runs them:
// the Qwen/Llama 3 family through hand-written matchers on category flags,
// regexes with \p{..} through std::regex on category-collapsed text, the
// others through std::wregex with non-ASCII whitespace turned into U+000B.

TEST(PreTokenizer, Names) {
    EXPECT_EQ(pretokenizer_from_name("llama-bpe"), PreTokenizer::Llama3);
    EXPECT_EQ(pretokenizer_from_name("llama3"), PreTokenizer::Llama3);
    EXPECT_EQ(pretokenizer_from_name("dbrx"), PreTokenizer::Llama3);
    EXPECT_EQ(pretokenizer_from_name("gpt-2"), PreTokenizer::Gpt2);
    EXPECT_EQ(pretokenizer_from_name("qwen35"), PreTokenizer::Qwen35);
    EXPECT_EQ(pretokenizer_from_name("falcon"), PreTokenizer::Falcon);
    EXPECT_EQ(pretokenizer_from_name("deepseek-llm"), PreTokenizer::DeepseekLlm);
    EXPECT_EQ(pretokenizer_from_name("deepseek-coder"), PreTokenizer::DeepseekCoder);
    // Llama 3's names skip the merges for words that are tokens; dbrx and
    // smaug-bpe share the split but not that.
    EXPECT_TRUE(pretokenizer_ignores_merges("llama-bpe"));
    EXPECT_FALSE(pretokenizer_ignores_merges("dbrx"));
    EXPECT_FALSE(pretokenizer_ignores_merges("qwen2"));
    try {
        pretokenizer_from_name("glm4");  // same regex as Llama 3, but more settings: refused
        ADD_FAILURE() << "glm4 accepted";
    } catch (const specdec::Error& e) {
        EXPECT_NE(std::string(e.what()).find("'glm4'"), std::string::npos) << e.what();
    }
}

TEST(PreTokenizer, Llama3) {
    using V = std::vector<std::string>;
    // \p{N}{1,3}: digits in groups of three from the left; the space before a
    // number is a word of its own.
    EXPECT_EQ(words(PreTokenizer::Llama3, "Hello world I'LL 12345"),
              (V{"Hello", " world", " I", "'LL", " ", "123", "45"}));
    EXPECT_EQ(words(PreTokenizer::Llama3, "1234567"), (V{"123", "456", "7"}));
    // Any \p{N}, not only ASCII: Arabic-Indic 3456.
    EXPECT_EQ(words(PreTokenizer::Llama3, "\xD9\xA3\xD9\xA4\xD9\xA5\xD9\xA6"),
              (V{"\xD9\xA3\xD9\xA4\xD9\xA5", "\xD9\xA6"}));
    EXPECT_EQ(words(PreTokenizer::Llama3, "a \n\n  b"), (V{"a", " \n\n", " ", " b"}));
    EXPECT_EQ(words(PreTokenizer::Llama3, "x = (y);\n"), (V{"x", " =", " (", "y", ");\n"}));
}

TEST(PreTokenizer, Qwen35) {
    using V = std::vector<std::string>;
    // e + U+0301, space, a + U+0308: Qwen3.5 keeps combining marks in the
    // word, Qwen2 makes them "other" pieces.
    const std::string s = "e\xCC\x81 a\xCC\x88";
    EXPECT_EQ(words(PreTokenizer::Qwen35, s), (V{"e\xCC\x81", " a\xCC\x88"}));
    EXPECT_EQ(words(PreTokenizer::Qwen2, s), (V{"e", "\xCC\x81", " a", "\xCC\x88"}));
    EXPECT_EQ(words(PreTokenizer::Qwen35, "I'm 42"), (V{"I", "'m", " ", "4", "2"}));
}

TEST(PreTokenizer, Falcon) {
    using V = std::vector<std::string>;
    // The first class has the backtick (default's does not), and there is no
    // \p{N}+ step, so a space stays with a short number.
    EXPECT_EQ(words(PreTokenizer::Falcon, "a+`b"), (V{"a", "+`", "b"}));
    EXPECT_EQ(words(PreTokenizer::Default, "a+`b"), (V{"a", "+", "`", "b"}));
    EXPECT_EQ(words(PreTokenizer::Falcon, "x 12"), (V{"x", " 12"}));
    EXPECT_EQ(words(PreTokenizer::Default, "x 12"), (V{"x", " ", "12"}));
    EXPECT_EQ(words(PreTokenizer::Falcon, "x 1234"), (V{"x", " ", "123", "4"}));
}

TEST(PreTokenizer, DeepseekLlm) {
    using V = std::vector<std::string>;
    EXPECT_EQ(words(PreTokenizer::DeepseekLlm, "a, b  c  "), (V{"a", ",", " b", " ", " c", "  "}));
    // \s?[!-/:-~...]+ spans the ASCII letters but not é: the third regex
    // cuts the letter run of the second.
    EXPECT_EQ(words(PreTokenizer::DeepseekLlm, " caf\xC3\xA9"), (V{" caf", "\xC3\xA9"}));
    // 中文 123\n: newline alone, CJK run, the space left before \p{N}+.
    EXPECT_EQ(words(PreTokenizer::DeepseekLlm, "\xE4\xB8\xAD\xE6\x96\x87 123\n"),
              (V{"\xE4\xB8\xAD\xE6\x96\x87", " ", "123", "\n"}));
    // Each regex splits the pieces of the one before: !、 is one punctuation
    // run, but U+3001 is also in the later CJK class, which cuts it out.
    EXPECT_EQ(words(PreTokenizer::DeepseekLlm, "!\xE3\x80\x81"), (V{"!", "\xE3\x80\x81"}));
    // 中 U+3000 文: the CJK class spans U+3000 too, but wregex sees every
    // non-ASCII space as U+000B, so the ideographic space breaks the run.
    EXPECT_EQ(words(PreTokenizer::DeepseekLlm, "\xE4\xB8\xAD\xE3\x80\x80\xE6\x96\x87"),
              (V{"\xE4\xB8\xAD", "\xE3\x80\x80", "\xE6\x96\x87"}));
    // \s+$: whitespace ending a piece is split off (an emoji is in no class).
    EXPECT_EQ(words(PreTokenizer::DeepseekLlm, "\xF0\x9F\x98\x80 "), (V{"\xF0\x9F\x98\x80", " "}));
}

TEST(PreTokenizer, DeepseekCoder) {
    using V = std::vector<std::string>;
    EXPECT_EQ(words(PreTokenizer::DeepseekCoder, "Hello, world!\n"), (V{"Hello", ",", " world", "!", "\n"}));
    // = is \p{S}, not \p{P}: it stays in the gap, which \p{N} then cuts.
    EXPECT_EQ(words(PreTokenizer::DeepseekCoder, "x = 12;"), (V{"x", " = ", "1", "2", ";"}));
    // Han is \p{L}, so 中文abc is one letter run until the CJK class splits it.
    EXPECT_EQ(words(PreTokenizer::DeepseekCoder, "\xE4\xB8\xAD\xE6\x96\x87" "abc"),
              (V{"\xE4\xB8\xAD\xE6\x96\x87", "abc"}));
    // An ideographic space is \s (collapsed to U+000B) and joins the word.
    EXPECT_EQ(words(PreTokenizer::DeepseekCoder, "\xE3\x80\x80x"), (V{"\xE3\x80\x80x"}));
}

TEST(Tokenizer, IgnoreMergesForLlama3) {
    // Byte tokens, "ab" and "abc", and the single merge "a b": the merges make
    // "ab" + "c" of the word "abc", but Llama 3 (ignore_merges) takes the
    // token "abc" whole; dbrx, with the same split, runs the merges.
    auto vocab = [](const std::string& pre) {
        specdec::test::GgufWriter w;
        std::vector<std::string> tokens;
        for (int b = 0; b < 256; ++b) tokens.push_back(unicode::byte_to_unicode(uint8_t(b)));
        tokens.push_back("ab");
        tokens.push_back("abc");
        w.kv_str("tokenizer.ggml.model", "gpt2");
        w.kv_str("tokenizer.ggml.pre", pre);
        w.kv_str_array("tokenizer.ggml.tokens", tokens);
        w.kv_i32_array("tokenizer.ggml.token_type", std::vector<int32_t>(tokens.size(), 1));
        w.kv_str_array("tokenizer.ggml.merges", {"a b"});
        return w.bytes();
    };
    const int32_t ab = 256, abc = 257, c = int32_t(uint8_t('c'));
    for (const char* pre : {"llama-bpe", "dbrx"}) {
        const std::vector<uint8_t> bytes = vocab(pre);
        auto file = GgufFile::parse(bytes.data(), bytes.size(), pre);
        auto tok = Tokenizer::from_gguf(*file);
        const std::vector<int32_t> want =
            pretokenizer_ignores_merges(pre) ? std::vector<int32_t>{abc} : std::vector<int32_t>{ab, c};
        EXPECT_EQ(tok->encode("abc", false, false), want) << pre;
    }
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

