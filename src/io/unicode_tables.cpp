#include "io/unicode_tables.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <vector>

namespace specdec::io::unicode {
namespace {

struct CategoryRange {
    uint32_t first;
    uint16_t flag;
};
struct CaseMapping {
    uint32_t from, to;
};
struct NfdRange {
    uint32_t first, last, nfd;
};

#include "io/unicode_tables_data.inc"

constexpr uint32_t kMaxCodepoint = 0x110000;

// Two-level table: code point >> 8 picks one of the distinct 256-entry blocks
// (a few hundred: most of the code space is unassigned or one category), so
// a lookup is two loads. A flat 0x110000-entry table was one load but 2.2 MB,
// 2 % of SmolLM2's peak RSS; the pre-tokenizers query each code point several
// times, so this stays a table rather than a search of the ranges.
struct FlagTable {
    std::vector<uint16_t> block_of;  // (kMaxCodepoint >> 8) block indices
    std::vector<uint16_t> flags;     // 256 flags per distinct block
};

const FlagTable& flag_table() {
    static const FlagTable table = [] {
        FlagTable t;
        constexpr size_t n = sizeof(kCategoryRanges) / sizeof(kCategoryRanges[0]);
        std::map<std::array<uint16_t, 256>, uint16_t> seen;
        std::array<uint16_t, 256> block{};
        size_t r = 0;  // the range holding the current code point
        t.block_of.reserve(kMaxCodepoint >> 8);
        for (uint32_t b = 0; b < (kMaxCodepoint >> 8); ++b) {
            for (uint32_t k = 0; k < 256; ++k) {
                const uint32_t c = (b << 8) | k;
                while (r + 1 < n && kCategoryRanges[r + 1].first <= c) ++r;
                block[k] = c >= kCategoryRanges[r].first ? kCategoryRanges[r].flag : uint16_t(kUndefined);
            }
            for (uint32_t c : kWhitespaceCodepoints)
                if ((c >> 8) == b) block[c & 255] |= kWhitespace;
            const auto [it, fresh] = seen.emplace(block, (uint16_t)(t.flags.size() / 256));
            if (fresh) t.flags.insert(t.flags.end(), block.begin(), block.end());
            t.block_of.push_back(it->second);
        }
        t.flags.shrink_to_fit();
        return t;
    }();
    return table;
}

struct ByteMaps {
    std::array<std::string, 256> to_utf8;
    std::array<int, 512> from_cpt;  // the mapped code points are all < 512
};

const ByteMaps& byte_maps() {
    static const ByteMaps maps = [] {
        ByteMaps m;
        m.from_cpt.fill(-1);
        std::array<uint32_t, 256> cpt{};
        std::array<bool, 256> direct{};
        for (int b = 0; b < 256; ++b) {
            direct[b] = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        }
        uint32_t n = 0;
        for (int b = 0; b < 256; ++b) cpt[b] = direct[b] ? uint32_t(b) : 256 + n++;
        for (int b = 0; b < 256; ++b) {
            append_utf8(m.to_utf8[b], cpt[b]);
            m.from_cpt[cpt[b]] = b;
        }
        return m;
    }();
    return maps;
}

}  // namespace

uint16_t flags(uint32_t cpt) {
    if (cpt >= kMaxCodepoint) return kUndefined;
    const FlagTable& t = flag_table();
    return t.flags[(size_t)t.block_of[cpt >> 8] * 256 + (cpt & 255)];
}

uint32_t to_lower(uint32_t cpt) {
    const auto* end = std::end(kLowercase);
    const auto* it = std::lower_bound(std::begin(kLowercase), end, cpt,
                                      [](const CaseMapping& m, uint32_t c) { return m.from < c; });
    return it != end && it->from == cpt ? it->to : cpt;
}

uint32_t nfd_first(uint32_t cpt) {
    // The last range starting at or before cpt is the only one that can hold it.
    const auto* it = std::upper_bound(std::begin(kNfdRanges), std::end(kNfdRanges), cpt,
                                      [](uint32_t c, const NfdRange& r) { return c < r.first; });
    if (it == std::begin(kNfdRanges)) return cpt;
    --it;
    return cpt <= it->last ? it->nfd : cpt;
}

size_t utf8_len(uint8_t lead) {
    static constexpr uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[lead >> 4];
}

std::vector<uint32_t> decode_utf8(std::string_view s) {
    std::vector<uint32_t> out;
    out.reserve(s.size());
    size_t i = 0;
    const size_t n = s.size();
    auto cont = [&](size_t k) { return k < n && (uint8_t(s[k]) & 0xC0) == 0x80; };
    while (i < n) {
        const uint8_t c = uint8_t(s[i]);
        if (c < 0x80) {
            out.push_back(c);
            i += 1;
        } else if ((c & 0xE0) == 0xC0 && cont(i + 1)) {
            out.push_back((uint32_t(c & 0x1F) << 6) | (uint8_t(s[i + 1]) & 0x3F));
            i += 2;
        } else if ((c & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
            out.push_back((uint32_t(c & 0x0F) << 12) | (uint32_t(uint8_t(s[i + 1]) & 0x3F) << 6) |
                          (uint8_t(s[i + 2]) & 0x3F));
            i += 3;
        } else if ((c & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
            out.push_back((uint32_t(c & 0x07) << 18) | (uint32_t(uint8_t(s[i + 1]) & 0x3F) << 12) |
                          (uint32_t(uint8_t(s[i + 2]) & 0x3F) << 6) | (uint8_t(s[i + 3]) & 0x3F));
            i += 4;
        } else {
            out.push_back(0xFFFD);  // lenient, like llama.cpp: never throw on user text
            i += 1;
        }
    }
    return out;
}

void append_utf8(std::string& out, uint32_t cpt) {
    if (cpt <= 0x7F) {
        out.push_back(char(cpt));
    } else if (cpt <= 0x7FF) {
        out.push_back(char(0xC0 | (cpt >> 6)));
        out.push_back(char(0x80 | (cpt & 0x3F)));
    } else if (cpt <= 0xFFFF) {
        out.push_back(char(0xE0 | (cpt >> 12)));
        out.push_back(char(0x80 | ((cpt >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cpt & 0x3F)));
    } else {
        out.push_back(char(0xF0 | ((cpt >> 18) & 0x07)));
        out.push_back(char(0x80 | ((cpt >> 12) & 0x3F)));
        out.push_back(char(0x80 | ((cpt >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cpt & 0x3F)));
    }
}

const std::string& byte_to_unicode(uint8_t b) { return byte_maps().to_utf8[b]; }

int unicode_to_byte(uint32_t cpt) { return cpt < 512 ? byte_maps().from_cpt[cpt] : -1; }

}  // namespace specdec::io::unicode
