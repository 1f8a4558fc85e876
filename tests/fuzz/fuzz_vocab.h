// Small synthetic vocabularies for the tokenizer fuzz target and the GGUF
// seeds: a byte-level BPE vocabulary (every byte is a token, so any text
// encodes; every merge result is a token, as in a real vocabulary) and a
// SentencePiece one with the 256 byte-fallback tokens. Both carry control and
// user-defined tokens so that special-token splitting is exercised.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "io/unicode_tables.h"
#include "unit/gguf_writer.h"

namespace specdec::fuzz {

// Words whose merge chains the BPE vocabulary learns, left to right.
inline const std::vector<std::string>& vocab_words() {
    static const std::vector<std::string> w = {
        "hello", " hello", " world", " the", "the", " and", "ing", " don", "'t", "def", " return", "  ",
        "    ", "\n\n", " \n", "123", "12", "\xE4\xB8\xAD\xE6\x96\x87", " \xC3\xA9moji", "\xF0\x9F\x98\x80",
        "()", "):\n", " ="};
    return w;
}

// gpt2-style vocabulary; `pre` is tokenizer.ggml.pre.
inline test::GgufWriter bpe_vocab(const std::string& pre) {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::set<std::string> have;
    auto add = [&](const std::string& t, int32_t type) {
        if (have.insert(t).second) {
            tokens.push_back(t);
            types.push_back(type);
        }
    };
    for (int b = 0; b < 256; ++b) add(io::unicode::byte_to_unicode(uint8_t(b)), 1);
    std::vector<std::string> merges;
    std::set<std::string> have_merge;
    for (const std::string& word : vocab_words()) {
        // Byte-level text of the word, one code point per byte.
        std::vector<std::string> syms;
        for (unsigned char c : word) syms.push_back(io::unicode::byte_to_unicode(c));
        std::string acc = syms[0];
        for (size_t i = 1; i < syms.size(); ++i) {
            const std::string m = acc + " " + syms[i];
            if (have_merge.insert(m).second) merges.push_back(m);
            acc += syms[i];
            add(acc, 1);
        }
    }
    add("<|endoftext|>", 3);
    add("<|im_start|>", 3);
    add("<|im_end|>", 3);
    add("<unused0>", 3);
    add("<tool_call>", 4);  // user-defined: split out even without parse_special
    add("[UNK]", 2);
    test::GgufWriter w;
    w.kv_str("tokenizer.ggml.model", "gpt2");
    w.kv_str("tokenizer.ggml.pre", pre);
    w.kv_str_array("tokenizer.ggml.tokens", tokens);
    w.kv_i32_array("tokenizer.ggml.token_type", types);
    w.kv_str_array("tokenizer.ggml.merges", merges);
    w.kv_u32("tokenizer.ggml.bos_token_id", uint32_t(tokens.size() - 6));  // <|endoftext|>
    w.kv_u32("tokenizer.ggml.eos_token_id", uint32_t(tokens.size() - 4));  // <|im_end|>
    return w;
}

// llama-style (SentencePiece) vocabulary. With space_prefix the tokenizer
// prepends a space to the text (llama); gemma's files turn it off.
inline test::GgufWriter spm_vocab(bool space_prefix) {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};
    std::vector<float> scores = {0, 0, 0};
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
        types.push_back(6);
        scores.push_back(0);
    }
    const std::string sp = "\xE2\x96\x81";  // U+2581
    const std::vector<std::string> pieces = {
        sp, "h", "e", "l", "o", "w", "r", "d", "t", "a", "n", "he", "ll", "llo", "hello", sp + "hello", sp + "w",
        "or", "wor", "ld", "world", sp + "world", sp + "t", sp + "th", "th", sp + "the", "an", "and", sp + "and",
        "1", "2", "3", "12", "123", sp + sp, sp + sp + sp + sp, "\n", "\n\n", "\xE4\xB8\xAD", "\xE6\x96\x87",
        "\xE4\xB8\xAD\xE6\x96\x87", "<unused1>"};
    float score = -1.0f;
    for (const std::string& p : pieces) {
        tokens.push_back(p);
        types.push_back(p == "<unused1>" ? 3 : 1);
        scores.push_back(score);
        // Longer pieces score higher, with ties between some of them, so that
        // the merge order and its tie-breaking both matter.
        score = p.size() > 2 ? score + 0.5f : score - 0.25f;
    }
    test::GgufWriter w;
    w.kv_str("tokenizer.ggml.model", "llama");
    w.kv_str_array("tokenizer.ggml.tokens", tokens);
    w.kv_f32_array("tokenizer.ggml.scores", scores);
    w.kv_i32_array("tokenizer.ggml.token_type", types);
    w.kv_u32("tokenizer.ggml.bos_token_id", 1);
    w.kv_u32("tokenizer.ggml.eos_token_id", 2);
    w.kv_bool("tokenizer.ggml.add_bos_token", true);
    w.kv_bool("tokenizer.ggml.add_space_prefix", space_prefix);
    return w;
}

}  // namespace specdec::fuzz
