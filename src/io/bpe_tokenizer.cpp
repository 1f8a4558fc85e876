#include "io/bpe_tokenizer.h"

#include <queue>

#include "io/merge_symbols.h"
#include "io/unicode_tables.h"

namespace specdec::io {

BpeTokenizer::BpeTokenizer(const TokenIndex* token_ids,
                           const std::vector<std::string>& merges, PreTokenizer pre, bool ignore_merges)
    : token_ids_(token_ids), pre_(pre), ignore_merges_(ignore_merges), spm_style_(pre == PreTokenizer::Gemma4) {
    merge_keys_.reserve(merges.size());
    rank_of_key_.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
        // llama.cpp splits at the first space after the first byte and keeps
        // the first rank of a duplicated merge; normalise to one space.
        const std::string& m = merges[i];
        const size_t sp = m.find(' ', 1);
        if (sp == std::string::npos) continue;
        if (merge_keys_.add(m.substr(0, sp) + " " + m.substr(sp + 1))) rank_of_key_.push_back((int32_t)i);
    }
    merge_keys_.shrink_to_fit();
}

int BpeTokenizer::rank(std::string_view left, std::string_view right) const {
    std::string key;
    key.reserve(left.size() + right.size() + 1);
    key.append(left).push_back(' ');
    key.append(right);
    const auto* it = merge_keys_.find(key);
    return it == merge_keys_.end() ? -1 : rank_of_key_[(size_t)it->second];
}

void BpeTokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
    if (spm_style_) {
        std::string escaped;
        escaped.reserve(text.size() + 16);
        for (char c : text) {
            if (c == ' ')
                escaped += "\xE2\x96\x81";  // U+2581
            else
                escaped.push_back(c);
        }
        for (const std::string& word : pretokenize(pre_, escaped)) {
            // A run of newlines that is a token is taken whole, without the
            // merges (llama.cpp's fix for Gemma 4, its PR 21343).
            if (word.find_first_not_of('\n') == std::string::npos) {
                const auto it = token_ids_->find(word);
                if (it != token_ids_->end()) {
                    out.push_back(it->second);
                    continue;
                }
            }
            encode_word(word, out);
        }
        return;
    }
    for (const std::string& word : pretokenize(pre_, text)) {
        std::string encoded;
        encoded.reserve(word.size() * 2);
        for (unsigned char b : word) encoded += unicode::byte_to_unicode(b);
        if (ignore_merges_) {
            // Llama 3 has tokens the merges cannot build (long digit groups,
            // words), and Hugging Face's tokenizer emits them whole.
            const auto it = token_ids_->find(encoded);
            if (it != token_ids_->end()) {
                out.push_back(it->second);
                continue;
            }
        }
        encode_word(encoded, out);
    }
}

void BpeTokenizer::encode_word(const std::string& word, std::vector<int32_t>& out) const {
    struct Pair {
        int rank;
        int left, right;
        size_t left_len, right_len;  // to detect stale entries after merges
    };
    // Lowest rank first, then leftmost: the order llama.cpp's queue pops in.
    auto worse = [](const Pair& a, const Pair& b) {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    };
    std::vector<MergeSymbol> syms = split_merge_symbols(word);

    std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> queue(worse);
    auto try_pair = [&](int l, int r) {
        if (l < 0 || r < 0) return;
        const std::string_view sv(word);
        const int rk = rank(sv.substr(syms[l].off, syms[l].len), sv.substr(syms[r].off, syms[r].len));
        if (rk >= 0) queue.push({rk, l, r, syms[l].len, syms[r].len});
    };
    for (size_t i = 0; i + 1 < syms.size(); ++i) try_pair(int(i), int(i + 1));

    while (!queue.empty()) {
        const Pair p = queue.top();
        queue.pop();
        const MergeSymbol& l = syms[p.left];
        const MergeSymbol& r = syms[p.right];
        // A symbol only grows, and symbols are contiguous, so unchanged
        // lengths and adjacency mean the pair text is unchanged too.
        if (l.len == 0 || r.len == 0 || l.next != p.right || l.len != p.left_len || r.len != p.right_len)
            continue;
        merge_symbols(syms, p.left, p.right);
        try_pair(l.prev, p.left);
        try_pair(p.left, l.next);
    }

    for (int i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
        const std::string piece = word.substr(syms[i].off, syms[i].len);
        const auto it = token_ids_->find(piece);
        if (it != token_ids_->end()) {
            out.push_back(it->second);
            continue;
        }
        // Not in the vocabulary: fall back to single bytes that are tokens
        // (llama.cpp drops the bytes that are not): the byte-mapped character,
        // or in the SentencePiece-style variant the <0xNN> token.
        for (char ch : piece) {
            static const char* hex = "0123456789ABCDEF";
            const uint8_t b = uint8_t(ch);
            const char name[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
            const auto it = spm_style_ ? token_ids_->find(name) : token_ids_->find(std::string(1, ch));
            if (it != token_ids_->end()) out.push_back(it->second);
        }
    }
}

std::string BpeTokenizer::decode_token_text(const std::string& token_text) {
    std::string out;
    for (uint32_t cpt : unicode::decode_utf8(token_text)) {
        const int b = unicode::unicode_to_byte(cpt);
        if (b >= 0) {
            out.push_back(char(b));
        } else {
            // llama.cpp's marker for a code point outside the byte map.
            std::string utf8;
            unicode::append_utf8(utf8, cpt);
            out += "[UNK_BYTE_0x";
            static const char* hex = "0123456789abcdef";
            for (unsigned char c : utf8) {
                out.push_back(hex[c >> 4]);
                out.push_back(hex[c & 15]);
            }
            out += token_text + "]";
        }
    }
    return out;
}

}  // namespace specdec::io
