#include "io/wpm_tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "io/unicode_tables.h"

namespace specdec::io {
namespace {

// CJK ideographs that BERT splits into single-character words. The ranges
// are Hugging Face's (tokenizers' is_chinese_char), including its
// 0x2B920 start of the fifth extension range where the Unicode block starts at
// 0x2B820; llama.cpp copies that, so it is kept.
bool is_cjk_ideograph(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

}  // namespace

WpmTokenizer::WpmTokenizer(const TokenIndex* token_ids, int32_t unk_id, bool lowercase, bool strip_accents)
    : token_ids_(token_ids), unk_id_(unk_id), lowercase_(lowercase), strip_accents_(strip_accents) {
    for (size_t i = 0; i < token_ids_->size(); ++i) {
        max_token_len_ = std::max(max_token_len_, token_ids_->text(int32_t(i)).size());
    }
}

std::vector<std::string> WpmTokenizer::split_words(std::string_view text) const {
    namespace uc = unicode;
    std::vector<std::string> words(1);
    for (uint32_t cpt : uc::decode_utf8(text)) {
        // llama.cpp's one-for-one "NFD" runs before the classification, so a
        // precomposed letter is classified (and kept) as its base letter.
        if (strip_accents_) cpt = uc::nfd_first(cpt);
        const uint16_t f = uc::flags(cpt);
        if (f & uc::kWhitespace) {
            if (!words.back().empty()) words.emplace_back();
            continue;
        }
        // NUL, U+FFFD (also what invalid UTF-8 decodes to) and \p{C} are dropped.
        if (cpt == 0 || cpt == 0xFFFD || (f & uc::kControl)) continue;
        if (strip_accents_ && (f & uc::kMark)) continue;
        const uint32_t out = lowercase_ ? uc::to_lower(cpt) : cpt;
        // Every \p{P}, every ASCII \p{S} (not the non-ASCII ones) and every
        // ideograph is a word of its own.
        if ((f & uc::kPunct) || (cpt < 0x7F && (f & uc::kSymbol)) || is_cjk_ideograph(cpt)) {
            if (!words.back().empty()) words.emplace_back();
            uc::append_utf8(words.back(), out);
            words.emplace_back();
        } else {
            uc::append_utf8(words.back(), out);
        }
    }
    if (words.back().empty()) words.pop_back();
    return words;
}

void WpmTokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
    for (const std::string& w : split_words(text)) {
        const std::string word = "\xE2\x96\x81" + w;  // U+2581 marks the word start
        const size_t n = word.size();
        const size_t first = out.size();
        // Longest token at each position, by bytes (a token ends on a code
        // point boundary, so no shorter candidate can be cut mid-character
        // and still match). Any position without one voids the word.
        for (size_t i = 0; i < n;) {
            size_t matched = 0;
            for (size_t j = std::min(n, i + max_token_len_); j > i; --j) {
                const auto it = token_ids_->find(std::string_view(word).substr(i, j - i));
                if (it != token_ids_->end()) {
                    out.push_back(it->second);
                    matched = j - i;
                    break;
                }
            }
            if (matched == 0) {
                out.resize(first);
                break;
            }
            i += matched;
        }
        if (out.size() == first) {
            SPECDEC_CHECK(unk_id_ >= 0, "tokenizer: WordPiece cannot spell the word '", w,
                          "' and the vocabulary has no [UNK] token (tokenizer.ggml.unknown_token_id)");
            out.push_back(unk_id_);
        }
    }
}

}  // namespace specdec::io
