// The symbol list both merge tokenizers (BPE and SentencePiece) work on: the
// text split into UTF-8 characters, doubly linked so that merging two
// neighbours is O(1) and leaves the merged-away symbol empty (len 0) in place.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <vector>

#include "io/unicode_tables.h"

namespace specdec::io {

struct MergeSymbol {
    size_t off, len;  // bytes of the text this symbol covers; len 0: merged away
    int prev, next;   // neighbours, -1 at the ends
};

// One symbol per UTF-8 character (a truncated trailing sequence is one symbol).
inline std::vector<MergeSymbol> split_merge_symbols(std::string_view text) {
    std::vector<MergeSymbol> syms;
    for (size_t off = 0; off < text.size();) {
        const size_t len = std::min(text.size() - off, unicode::utf8_len(uint8_t(text[off])));
        syms.push_back({off, len, int(syms.size()) - 1, -1});
        off += len;
    }
    for (size_t i = 0; i + 1 < syms.size(); ++i) syms[i].next = int(i + 1);
    return syms;
}

// Merges symbol `right` into its left neighbour `left`.
inline void merge_symbols(std::vector<MergeSymbol>& syms, int left, int right) {
    MergeSymbol& l = syms[size_t(left)];
    MergeSymbol& r = syms[size_t(right)];
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[size_t(r.next)].prev = left;
}

}  // namespace specdec::io
