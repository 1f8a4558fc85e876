// WordPiece as llama.cpp's "WPM" vocab type runs it (tokenizer.ggml.model
// "bert"): BERT's normalizer and pre-tokenizer (drop control characters,
// optionally lowercase and strip accents, split on whitespace and around
// every punctuation mark, ASCII symbol and CJK ideograph), then per word a
// greedy longest-match over the vocabulary from the left. The GGUF converter
// already rewrote Hugging Face's pieces: a word-initial piece "x" is stored as
// "\u2581x" and a continuation "##x" as "x", so a word is matched as
// "\u2581" + word. A word with any unmatched rest becomes one [UNK].
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/tokenizer_index.h"

namespace specdec::io {

class WpmTokenizer {
public:
    // unk_id: the id emitted for a word the vocabulary cannot spell; -1 when
    // the vocabulary has none, and then such a word throws specdec::Error
    // (llama.cpp would emit the invalid id -1).
    // lowercase / strip_accents: tokenizer.ggml.normalizer.* (BertNormalizer).
    WpmTokenizer(const TokenIndex* token_ids, int32_t unk_id, bool lowercase, bool strip_accents);

    // Appends the ids of raw (not special-token) text.
    void encode(std::string_view text, std::vector<int32_t>& out) const;

    // The normalized words, before matching (exposed for the unit tests).
    std::vector<std::string> split_words(std::string_view text) const;

private:
    const TokenIndex* token_ids_;
    int32_t unk_id_;
    bool lowercase_, strip_accents_;
    size_t max_token_len_ = 0;  // bytes; bounds the longest-match search
};

}  // namespace specdec::io
