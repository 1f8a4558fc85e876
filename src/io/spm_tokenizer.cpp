#include "io/spm_tokenizer.h"

#include <map>
#include <queue>

#include "core/error.h"
#include "io/merge_symbols.h"
#include "io/unicode_tables.h"

namespace specdec::io {

SpmTokenizer::SpmTokenizer(const TokenIndex* token_ids,
                           const std::vector<float>* scores)
    : token_ids_(token_ids), scores_(scores) {}

int32_t SpmTokenizer::byte_token(uint8_t b) const {
    static const char* hex = "0123456789ABCDEF";
    const char name[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
    auto it = token_ids_->find(name);
    if (it != token_ids_->end()) return it->second;
    it = token_ids_->find(std::string(1, char(b)));
    if (it != token_ids_->end()) return it->second;
    throw Error(std::string("tokenizer: no byte-fallback token for byte ") + name);
}

void SpmTokenizer::encode(std::string_view raw, std::vector<int32_t>& out) const {
    std::string text;
    text.reserve(raw.size() + 16);
    for (char c : raw) {
        if (c == ' ')
            text += "\xE2\x96\x81";  // U+2581, SentencePiece's visible space
        else
            text.push_back(c);
    }

    struct Pair {
        float score;
        int left, right;
        size_t size;
    };
    // Highest score first, then leftmost.
    auto worse = [](const Pair& a, const Pair& b) {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    };
    std::vector<MergeSymbol> syms = split_merge_symbols(text);

    std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> queue(worse);
    // Which symbol pair last produced a given merged text. Later pairs with the
    // same text overwrite earlier ones; resegmentation follows that latest
    // entry, exactly like the reference (which matters for exotic inputs).
    std::map<std::string, std::pair<int, int>> history;
    auto try_pair = [&](int l, int r) {
        if (l < 0 || r < 0) return;
        std::string merged = text.substr(syms[l].off, syms[l].len + syms[r].len);
        const auto it = token_ids_->find(merged);
        if (it == token_ids_->end() || size_t(it->second) >= scores_->size()) return;
        queue.push({(*scores_)[size_t(it->second)], l, r, merged.size()});
        history[std::move(merged)] = {l, r};
    };
    for (size_t i = 0; i + 1 < syms.size(); ++i) try_pair(int(i), int(i + 1));

    while (!queue.empty()) {
        const Pair p = queue.top();
        queue.pop();
        const MergeSymbol& l = syms[p.left];
        const MergeSymbol& r = syms[p.right];
        if (l.len == 0 || r.len == 0 || l.len + r.len != p.size) continue;
        merge_symbols(syms, p.left, p.right);
        try_pair(l.prev, p.left);
        try_pair(p.left, l.next);
    }

    // Emit a symbol: a token if it is one, else the two halves it was merged
    // from, else its bytes.
    auto emit = [&](auto&& self, size_t off, size_t len) -> void {
        const std::string piece = text.substr(off, len);
        const auto it = token_ids_->find(piece);
        if (it != token_ids_->end()) {
            out.push_back(it->second);
            return;
        }
        const auto h = history.find(piece);
        if (h == history.end()) {
            for (char c : piece) out.push_back(byte_token(uint8_t(c)));
            return;
        }
        const MergeSymbol& a = syms[h->second.first];
        const MergeSymbol& b = syms[h->second.second];
        self(self, a.off, a.len);
        self(self, b.off, b.len);
    };
    for (int i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) emit(emit, syms[i].off, syms[i].len);
}

}  // namespace specdec::io
