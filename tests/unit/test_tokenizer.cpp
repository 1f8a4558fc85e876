// Tokenizer, pre-tokenizer and chat template tests on the real models, plus
// TokenizerParity.Dump: a data dumper driven by tests/python/test_tokenizer_parity.py
// (skipped unless SPECDEC_TOKENIZE_IN is set).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
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

TEST(Unicode, LowercaseAndNfd) {
    namespace uc = specdec::io::unicode;
    EXPECT_EQ(uc::to_lower('A'), uint32_t('a'));
    EXPECT_EQ(uc::to_lower('a'), uint32_t('a'));
    EXPECT_EQ(uc::to_lower(0x00C9), 0x00E9u);  // É -> é
    EXPECT_EQ(uc::to_lower(0x0130), 0x0069u);  // İ: UnicodeData's simple mapping, not "i" + U+0307
    EXPECT_EQ(uc::to_lower(0x03A3), 0x03C3u);  // Σ -> σ
    EXPECT_EQ(uc::to_lower(0x10400), 0x10428u);  // Deseret
    EXPECT_EQ(uc::nfd_first(0x00E9), uint32_t('e'));  // é
    EXPECT_EQ(uc::nfd_first(0x00C5), uint32_t('A'));  // Å
    EXPECT_EQ(uc::nfd_first(0x1E69), uint32_t('s'));  // ṩ: two marks, still the base letter
    EXPECT_EQ(uc::nfd_first(0xAC00), 0x1100u);        // 가: llama.cpp keeps only the leading jamo
    EXPECT_EQ(uc::nfd_first(0x00DF), 0x00DFu);        // ß has no decomposition
    EXPECT_EQ(uc::nfd_first('a'), uint32_t('a'));
    EXPECT_EQ(uc::nfd_first(0x10FFFF), 0x10FFFFu);
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

TEST(PreTokenizer, Gemma4) {
    using V = std::vector<std::string>;
    // [^\n]+|[\n]+: only newline runs are cut out; spaces and \r stay in words.
    EXPECT_EQ(words(PreTokenizer::Gemma4, "a b\n\nc\r\n"), (V{"a b", "\n\n", "c\r", "\n"}));
    EXPECT_EQ(words(PreTokenizer::Gemma4, "\n"), (V{"\n"}));
    EXPECT_EQ(pretokenizer_from_name("gemma4"), PreTokenizer::Gemma4);
}

namespace {

// A tiny "gemma4" vocabulary: control tokens, the 256 <0xNN> byte tokens,
// then "▁", "a", "b", "▁a", "ab", "\n", "\n\n", "</s>", "<|tool_response>",
// with the merges "▁ a" (rank 0) and "a b" (rank 1).
std::vector<uint8_t> gemma4_vocab(bool add_bos) {
    specdec::test::GgufWriter w;
    std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>"};
    std::vector<int32_t> types = {3, 3, 3};
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
        types.push_back(6);
    }
    for (const char* t : {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab", "\n", "\n\n", "</s>"}) {
        tokens.push_back(t);
        types.push_back(1);
    }
    tokens.push_back("<|tool_response>");
    types.push_back(4);
    w.kv_str("tokenizer.ggml.model", "gemma4");
    w.kv_str_array("tokenizer.ggml.tokens", tokens);
    w.kv_i32_array("tokenizer.ggml.token_type", types);
    w.kv_str_array("tokenizer.ggml.merges", {"\xE2\x96\x81 a", "a b"});
    w.kv_u32("tokenizer.ggml.bos_token_id", 2);
    w.kv_u32("tokenizer.ggml.eos_token_id", 1);
    w.kv_bool("tokenizer.ggml.add_bos_token", add_bos);
    return w.bytes();
}

}  // namespace

TEST(Tokenizer, Gemma4SentencePieceStyleBpe) {
    const std::vector<uint8_t> bytes = gemma4_vocab(false);
    auto file = GgufFile::parse(bytes.data(), bytes.size(), "gemma4-tiny");
    auto tok = Tokenizer::from_gguf(*file);
    const int32_t sp = 259, a = 260, b = 261, sp_a = 262, ab = 263, nl = 264, nl2 = 265;
    auto byte = [](uint8_t v) { return int32_t(3 + v); };
    // "a▁ab": "▁ a" (rank 0) goes before "a b" (rank 1), leaving a + ▁a + b.
    EXPECT_EQ(tok->encode("a ab", false, false), (std::vector<int32_t>{a, sp_a, b}));
    EXPECT_EQ(tok->encode("ab", false, false), (std::vector<int32_t>{ab}));
    // A newline run that is a token is taken whole; one that is not is merged
    // (no merges here), and a lone space is the "▁" token.
    EXPECT_EQ(tok->encode("\n\n", false, false), (std::vector<int32_t>{nl2}));
    EXPECT_EQ(tok->encode("\n\n\n ", false, false), (std::vector<int32_t>{nl, nl, nl, sp}));
    // No token: the UTF-8 bytes as <0xNN> tokens (é is C3 A9).
    EXPECT_EQ(tok->encode("\xC3\xA9", false, false), (std::vector<int32_t>{byte(0xC3), byte(0xA9)}));
    // llama.cpp forces BOS on for Gemma 4 even though the file says no.
    EXPECT_TRUE(tok->add_bos());
    EXPECT_EQ(tok->encode("b", true, false), (std::vector<int32_t>{2, b}));
    EXPECT_EQ(tok->token_to_piece(sp_a), " a");
    EXPECT_EQ(tok->token_to_piece(byte(0x41)), "A");
    EXPECT_EQ(tok->decode(tok->encode("a ab\n\n\xC3\xA9 b", false, false)), "a ab\n\n\xC3\xA9 b");
    // With "<|tool_response>" ending generation, "</s>" is ordinary text (llama.cpp's
    // rule for Gemma 4): not end of generation, not split out as a special token.
    const int32_t end_s = 266, tool_response = 267;
    EXPECT_TRUE(tok->is_end_of_generation(tool_response));
    EXPECT_TRUE(tok->is_end_of_generation(1));
    EXPECT_FALSE(tok->is_end_of_generation(end_s));
    EXPECT_EQ(tok->attr(end_s), Tokenizer::kNormal);
    // (No merges build it, so it is spelled in bytes; as a special token it would be end_s.)
    EXPECT_EQ(tok->encode("</s>", false, true), (std::vector<int32_t>{byte('<'), byte('/'), byte('s'), byte('>')}));
}

namespace {

// A tiny "bert" vocabulary with llama.cpp's converted WordPiece pieces:
// word starts carry "▁", continuations ("##s" in Hugging Face's file) do not.
std::vector<uint8_t> bert_vocab(int lowercase) {
    specdec::test::GgufWriter w;
    const std::vector<std::string> tokens = {
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xE2\x96\x81hello", "\xE2\x96\x81he", "llo", "\xE2\x96\x81world",
        "\xE2\x96\x81,", "\xE2\x96\x81!", "s", "\xE2\x96\x81" "cafe", "\xE2\x96\x81\xE4\xB8\xAD",  // ▁中
        "\xE2\x96\x81Hello"};
    std::vector<int32_t> types(tokens.size(), 1);
    for (int i = 0; i < 4; ++i) types[size_t(i)] = 3;
    w.kv_str("tokenizer.ggml.model", "bert");
    w.kv_str("tokenizer.ggml.pre", "bert-bge");
    w.kv_str_array("tokenizer.ggml.tokens", tokens);
    w.kv_i32_array("tokenizer.ggml.token_type", types);
    w.kv_u32("tokenizer.ggml.bos_token_id", 2);
    w.kv_u32("tokenizer.ggml.unknown_token_id", 1);
    w.kv_u32("tokenizer.ggml.seperator_token_id", 3);
    if (lowercase >= 0) w.kv_bool("tokenizer.ggml.normalizer.lowercase", lowercase != 0);
    return w.bytes();
}

}  // namespace

TEST(Tokenizer, WordPiece) {
    using V = std::vector<int32_t>;
    const std::vector<uint8_t> bytes = bert_vocab(-1);  // no normalizer keys: lowercase, strip accents
    auto file = GgufFile::parse(bytes.data(), bytes.size(), "bert-tiny");
    auto tok = Tokenizer::from_gguf(*file);
    const int32_t unk = 1, cls = 2, sep = 3, hello = 4, he = 5, llo = 6, world = 7, comma = 8, bang = 9, s = 10,
                  cafe = 11, zhong = 12;
    // Punctuation is a word of its own; add_special wraps in [CLS] ... [SEP].
    EXPECT_EQ(tok->encode("Hello, WORLD!", true, false), (V{cls, hello, comma, world, bang, sep}));
    EXPECT_EQ(tok->encode("Hello, WORLD!", false, false), (V{hello, comma, world, bang}));
    // Greedy longest match from the left, continuations without "▁".
    EXPECT_EQ(tok->encode("hellos", false, false), (V{hello, s}));
    EXPECT_EQ(tok->encode("hello\tllo", false, false), (V{hello, unk}));  // "▁llo" is no token
    // Any unmatched rest voids the whole word: one [UNK], not ▁he + [UNK].
    EXPECT_EQ(tok->encode("he", false, false), (V{he}));
    EXPECT_EQ(tok->encode("hexyz world", false, false), (V{unk, world}));
    // Accents stripped, control characters dropped, ideographs split off.
    EXPECT_EQ(tok->encode("Caf\xC3\xA9\x01", false, false), (V{cafe}));
    EXPECT_EQ(tok->encode("\xE4\xB8\xAD\xE4\xB8\xAD", false, false), (V{zhong, zhong}));
    EXPECT_TRUE(tok->encode(" \n\x01 ", false, false).empty());
    EXPECT_EQ(tok->encode("", true, false), (V{cls, sep}));
    EXPECT_EQ(tok->token_to_piece(hello), " hello");
    EXPECT_EQ(tok->token_to_piece(llo), "llo");
    EXPECT_EQ(tok->token_to_piece(cls), "[CLS]");
    EXPECT_EQ(tok->decode(tok->encode("hellos, world", false, false)), " hellos , world");

    // tokenizer.ggml.normalizer.lowercase = false: case (and accents) kept.
    const std::vector<uint8_t> cased = bert_vocab(0);
    auto cased_file = GgufFile::parse(cased.data(), cased.size(), "bert-cased");
    auto cased_tok = Tokenizer::from_gguf(*cased_file);
    EXPECT_EQ(cased_tok->encode("Hello hello Caf\xC3\xA9", false, false), (V{13, hello, unk}));
}

namespace {

// A tiny "llama" (SentencePiece) vocabulary: "<unk>", "<s>", "</s>" (control),
// "a", then `extra` as normal tokens (ids 4, 5, ...): llama.cpp finds its
// special tokens by text whatever their type. `kv` adds metadata.
std::unique_ptr<Tokenizer> spm_with(const std::vector<std::string>& extra,
                                    const std::function<void(specdec::test::GgufWriter&)>& kv = {}) {
    specdec::test::GgufWriter w;
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "a"};
    std::vector<int32_t> types = {2, 3, 3, 1};
    for (const std::string& t : extra) {
        tokens.push_back(t);
        types.push_back(1);
    }
    w.kv_str("tokenizer.ggml.model", "llama");
    w.kv_str_array("tokenizer.ggml.tokens", tokens);
    w.kv_f32_array("tokenizer.ggml.scores", std::vector<float>(tokens.size(), 0.0f));
    w.kv_i32_array("tokenizer.ggml.token_type", types);
    if (kv) kv(w);
    const std::vector<uint8_t> bytes = w.bytes();
    auto file = GgufFile::parse(bytes.data(), bytes.size(), "spm-tiny");
    return Tokenizer::from_gguf(*file);
}

const std::string kEndOfSentence = "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>";

}  // namespace

// llama.cpp's gpt-oss / Solar Open rule: with "<|return|>" and "<|call|>" (or
// "<|calls|>" and "<|flush|>") ending generation, "<|end|>" only ends a
// message; it is not end of generation and becomes user-defined.
TEST(Tokenizer, GptOssEndIsNotEndOfGeneration) {
    const int32_t end = 4, ret = 5, call = 6;
    auto gpt_oss = spm_with({"<|end|>", "<|return|>", "<|call|>", "<|channel|>"});
    EXPECT_FALSE(gpt_oss->is_end_of_generation(end));
    EXPECT_EQ(gpt_oss->attr(end), Tokenizer::kUserDefined);
    EXPECT_TRUE(gpt_oss->is_end_of_generation(ret));
    EXPECT_TRUE(gpt_oss->is_end_of_generation(call));
    EXPECT_TRUE(gpt_oss->is_end_of_generation(2));
    // gpt-oss's chat markers are user-defined (always rendered, always parsed).
    EXPECT_EQ(gpt_oss->attr(7), Tokenizer::kUserDefined);
    EXPECT_EQ(gpt_oss->encode("<|end|><|channel|>", false, false), (std::vector<int32_t>{end, 7}));
    // Also when the metadata names "<|end|>" as the end-of-turn token.
    auto eot_end = spm_with({"<|end|>", "<|return|>", "<|call|>"},
                            [](specdec::test::GgufWriter& w) { w.kv_u32("tokenizer.ggml.eot_token_id", 4); });
    EXPECT_FALSE(eot_end->is_end_of_generation(end));
    // Solar Open's pair, and the mixed "<|return|>" + "<|calls|>".
    EXPECT_FALSE(spm_with({"<|end|>", "<|calls|>", "<|flush|>"})->is_end_of_generation(end));
    EXPECT_FALSE(spm_with({"<|end|>", "<|return|>", "<|calls|>"})->is_end_of_generation(end));
    EXPECT_FALSE(spm_with({"<|end|>", "<|call|>", "<|flush|>"})->is_end_of_generation(end));
    // One of a pair is not enough: "<|end|>" stays end of generation (Phi-3).
    for (const auto& v : std::vector<std::vector<std::string>>{
             {"<|end|>"}, {"<|end|>", "<|return|>"}, {"<|end|>", "<|call|>"}, {"<|end|>", "<|flush|>"},
             {"<|end|>", "<|return|>", "<|flush|>"}}) {
        auto t = spm_with(v);
        EXPECT_TRUE(t->is_end_of_generation(end)) << v.size();
        EXPECT_TRUE(t->is_control(end));
        for (int32_t id = end + 1; id < t->n_vocab(); ++id) EXPECT_TRUE(t->is_end_of_generation(id)) << id;
    }
}

// Every text on llama.cpp's end-of-generation list, including DeepSeek's
// "<｜end▁of▁sentence｜>" and MiniMax's "[e~[", ends generation and is made a
// control token even when the file types it as normal text.
TEST(Tokenizer, EndOfGenerationNames) {
    const std::vector<std::string> names = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|flush|>", "<end_of_turn>", "<|endoftext|>",
        "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
        "<turn|>", "<|tool_response>", kEndOfSentence, "[e~["};
    std::vector<std::string> extra = names;
    extra.push_back("<|im_start|>");
    auto t = spm_with(extra);
    for (size_t i = 0; i < names.size(); ++i) {
        const int32_t id = int32_t(4 + i);
        EXPECT_TRUE(t->is_end_of_generation(id)) << names[i];
        EXPECT_TRUE(t->is_control(id)) << names[i];
    }
    EXPECT_FALSE(t->is_end_of_generation(int32_t(4 + names.size())));
    EXPECT_FALSE(t->is_end_of_generation(3));
    // Each alone too (the EOT pick cannot hide one).
    for (const std::string& name : {kEndOfSentence, std::string("[e~[")}) {
        auto one = spm_with({name});
        EXPECT_TRUE(one->is_end_of_generation(4)) << name;
        EXPECT_TRUE(one->is_control(4)) << name;
        EXPECT_EQ(one->encode(name, false, true), (std::vector<int32_t>{4})) << name;
    }
}

// FIM tokens found by text: DeepSeek's "<｜fim▁begin｜>"/"<｜fim▁hole｜>"/
// "<｜fim▁end｜>" become control tokens, unless the metadata names the role's
// token (llama.cpp then does not look); of several FIM pad texts exactly one is
// picked and ends generation.
TEST(Tokenizer, FimTokensByText) {
    const std::string begin = "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>";
    const std::string hole = "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>";
    const std::string fend = "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>";
    auto t = spm_with({begin, hole, fend});
    for (int32_t id : {4, 5, 6}) {
        EXPECT_TRUE(t->is_control(id)) << id;
        EXPECT_FALSE(t->is_end_of_generation(id)) << id;
    }
    auto named = spm_with({begin, hole, fend}, [](specdec::test::GgufWriter& w) {
        w.kv_u32("tokenizer.ggml.fim_pre_token_id", 3);
        w.kv_u32("tokenizer.ggml.suffix_token_id", 3);  // the deprecated key
    });
    EXPECT_FALSE(named->is_control(4));
    EXPECT_FALSE(named->is_control(5));
    EXPECT_TRUE(named->is_control(6));

    auto pads = spm_with({"<PAD>", "[PAD]", "<fim_pad>", "<REPO>", "<reponame>"});
    EXPECT_EQ(int(pads->is_end_of_generation(4)) + int(pads->is_end_of_generation(5)) +
                  int(pads->is_end_of_generation(6)),
              1);
    EXPECT_EQ(int(pads->is_end_of_generation(7)) + int(pads->is_end_of_generation(8)), 1);
    for (int32_t id = 4; id <= 8; ++id) EXPECT_EQ(pads->is_control(id), pads->is_end_of_generation(id)) << id;
}

TEST(Tokenizer, UnknownModelIsRefused) {
    specdec::test::GgufWriter w;
    w.kv_str("tokenizer.ggml.model", "no-such-model-7");
    w.kv_str_array("tokenizer.ggml.tokens", {"a", "b"});
    const std::vector<uint8_t> bytes = w.bytes();
    auto file = GgufFile::parse(bytes.data(), bytes.size(), "unknown-model");
    try {
        Tokenizer::from_gguf(*file);
        FAIL() << "an unknown tokenizer.ggml.model was accepted";
    } catch (const specdec::Error& e) {
        EXPECT_NE(std::string(e.what()).find("no-such-model-7"), std::string::npos) << e.what();
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

TEST(ChatTemplate, RealModels) {
    LOAD_OR_FAIL(m, specdec::test::kSmolLM);
    const ChatTemplate tmpl(model_chat_template(*m.file));
    EXPECT_EQ(apply_chat_template(tmpl, *m.tok, {{"user", "Hi"}}, true),
              "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
              "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

