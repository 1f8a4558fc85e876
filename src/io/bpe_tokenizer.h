// Byte-level BPE (GPT-2 style) as llama.cpp runs it: pre-tokenize, map bytes to
// printable code points, then repeatedly merge the adjacent pair with the
// lowest merge rank (leftmost first on ties) inside each word.
//
// With the Gemma4 pre-tokenizer it is llama.cpp's SentencePiece-style BPE
// instead: spaces become U+2581, the merges run on the raw UTF-8 (no byte
// map), a run of newlines that is a token is taken whole, and bytes left
// without a token fall back to <0xNN> byte tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/pretokenizer.h"
#include "io/tokenizer_index.h"

namespace specdec::io {

class BpeTokenizer {
public:
    // token_ids: text -> id for the whole vocabulary; merges: "left right"
    // strings in rank order (tokenizer.ggml.merges). ignore_merges: a word
    // that is a token maps to it directly (llama.cpp's ignore_merges, see
    // pretokenizer_ignores_merges).
    BpeTokenizer(const TokenIndex* token_ids,
                 const std::vector<std::string>& merges, PreTokenizer pre, bool ignore_merges = false);

    // Appends the ids of raw (not special-token) text.
    void encode(std::string_view text, std::vector<int32_t>& out) const;

    // Byte-level token text back to bytes, as llama.cpp's llama_decode_text.
    static std::string decode_token_text(const std::string& token_text);

    // True for the SentencePiece-style variant: token texts then hold U+2581
    // for spaces and <0xNN> byte tokens, not byte-mapped text.
    bool spm_style() const { return spm_style_; }

private:
    void encode_word(const std::string& word, std::vector<int32_t>& out) const;
    int rank(std::string_view left, std::string_view right) const;

    const TokenIndex* token_ids_;
    // "left right" -> rank, in the vocabulary's flat index (an unordered_map
    // of strings cost ~3 MiB for 49k merges, a sixth of SmolLM2's heap):
    // merge_keys_ numbers the keys in the order added, rank_of_key_ maps that
    // number to the merge's rank (malformed merges are skipped, duplicates
    // keep their first rank, so the two numberings differ).
    TokenIndex merge_keys_;
    std::vector<int32_t> rank_of_key_;
    PreTokenizer pre_;
    bool ignore_merges_;
    bool spm_style_;
};

}  // namespace specdec::io
