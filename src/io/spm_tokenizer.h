// SentencePiece-style tokenizer as llama.cpp's "SPM" vocab type runs it (used
// by gemma): spaces become U+2581, then adjacent symbols are merged greedily by
// the score of the merged token (highest first, leftmost on ties); pieces that
// are not tokens are re-split along their merge history and finally emitted as
// <0xNN> byte tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/tokenizer_index.h"

namespace specdec::io {

class SpmTokenizer {
public:
    SpmTokenizer(const TokenIndex* token_ids, const std::vector<float>* scores);

    // Appends the ids of raw text; the caller has already applied the space
    // prefix rule. Spaces are escaped to U+2581 here.
    void encode(std::string_view text, std::vector<int32_t>& out) const;

    // Id of the byte-fallback token for b (<0xNN>, else the 1-char token).
    int32_t byte_token(uint8_t b) const;

private:
    const TokenIndex* token_ids_;
    const std::vector<float>* scores_;
};

}  // namespace specdec::io
