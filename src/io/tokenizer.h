// The engine's tokenizer: loads the vocabulary from GGUF metadata and encodes
// and decodes exactly as llama.cpp's llama_tokenize / llama_token_to_piece do
// for byte-level BPE ("gpt2"), SentencePiece-style ("llama"), Gemma 4's
// SentencePiece-style BPE ("gemma4") and WordPiece ("bert") vocabularies.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "io/bpe_tokenizer.h"
#include "io/gguf.h"
#include "io/spm_tokenizer.h"
#include "io/tokenizer_index.h"
#include "io/wpm_tokenizer.h"

namespace specdec::io {

class Tokenizer {
public:
    // Throws specdec::Error on missing or inconsistent tokenizer metadata.
    static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);

    // add_special: add BOS/EOS as the metadata says (llama_tokenize's
    // add_special; WordPiece always adds BOS ([CLS]) and SEP ([SEP]), as
    // llama.cpp does). parse_special: recognise control tokens written in the
    // text (llama_tokenize's parse_special); user-defined tokens are always
    // recognised, as in llama.cpp.
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
    // Bytes of one token with special tokens rendered (llama_token_to_piece
    // with special=true); may be a partial UTF-8 sequence. Out-of-range ids throw.
    std::string token_to_piece(int32_t id) const;
    // Concatenated pieces (special tokens rendered).
    std::string decode(const std::vector<int32_t>& ids) const;

    int32_t n_vocab() const { return int32_t(ids_.size()); }
    int32_t bos_id() const { return bos_; }
    int32_t eos_id() const { return eos_; }
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    // True for every token llama.cpp treats as end of generation (eos, eot,
    // <|im_end|>, <end_of_turn>, <|endoftext|>, FIM pad/repo/sep, ...).
    bool is_end_of_generation(int32_t id) const { return eog_.count(id) != 0; }
    bool is_control(int32_t id) const;
    std::string_view token_text(int32_t id) const;
    // FNV-1a 64 over every token string followed by a 0 byte, in id order;
    // identifies the vocabulary in model manifests.
    uint64_t token_list_hash() const;

    // llama.cpp token attribute bits (llama_token_attr).
    enum Attr : uint32_t {
        kUnknown = 1u << 0, kUnused = 1u << 1, kNormal = 1u << 2, kControl = 1u << 3,
        kUserDefined = 1u << 4, kByte = 1u << 5,
    };
    uint32_t attr(int32_t id) const;

private:
    Tokenizer() = default;
    void finish_special_tokens(const GgufFile& file);
    void check_id(int32_t id) const;

    enum class Kind { Bpe, Spm, Wpm } kind_ = Kind::Bpe;
    std::vector<uint32_t> attrs_;
    std::vector<float> scores_;
    TokenIndex ids_;  // text <-> id, one copy of the vocabulary's texts
    std::unique_ptr<BpeTokenizer> bpe_;
    std::unique_ptr<SpmTokenizer> spm_;
    std::unique_ptr<WpmTokenizer> wpm_;
    std::vector<int32_t> special_;  // partition order: longest text first
    std::unordered_set<int32_t> eog_;
    // Rendered pieces, concatenated: piece i is [piece_off_[i], piece_off_[i + 1]).
    std::string pieces_;
    std::vector<uint32_t> piece_off_;
    int32_t bos_ = -1, eos_ = -1;
    int32_t sep_ = -1;  // WordPiece's [SEP], added after the text by add_special
    bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
    uint64_t hash_ = 0;
};

}  // namespace specdec::io
