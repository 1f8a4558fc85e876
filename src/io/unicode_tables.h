// Unicode helpers for the tokenizers: UTF-8 <-> code points (with llama.cpp's
// lenient decoding), the per-code-point category flags the regex
// pre-tokenizers split on, and the case and decomposition maps of WordPiece's
// BERT normalizer. The flags mirror llama.cpp's so that \p{L}, \p{N} and \s
// classify every code point exactly as the reference does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specdec::io::unicode {

enum Flag : uint16_t {
    kUndefined = 0x01,
    kNumber = 0x02,     // \p{N}
    kLetter = 0x04,     // \p{L}
    kSeparator = 0x08,  // \p{Z}
    kMark = 0x10,       // \p{M}
    kPunct = 0x20,      // \p{P}
    kSymbol = 0x40,     // \p{S}
    kControl = 0x80,    // \p{C}
    kCategoryMask = 0xFF,
    kWhitespace = 0x100,  // White_Space property (\s)
};

// Flags of a code point; anything past U+10FFFF is kUndefined.
uint16_t flags(uint32_t cpt);

// Simple (one code point) lowercase mapping of UnicodeData.txt; the code
// point itself where there is none.
uint32_t to_lower(uint32_t cpt);
// First code point of the canonical decomposition (NFD), the code point
// itself where it has none. llama.cpp's "NFD" is exactly this one-for-one
// map, so a precomposed letter loses its accent and a Hangul syllable keeps
// only its leading jamo; WordPiece must reproduce that, not real NFD.
uint32_t nfd_first(uint32_t cpt);

// Decodes UTF-8. An invalid or truncated sequence yields U+FFFD and skips one
// byte, as llama.cpp does, so arbitrary bytes never throw.
std::vector<uint32_t> decode_utf8(std::string_view s);
void append_utf8(std::string& out, uint32_t cpt);
// Length of the UTF-8 sequence announced by a lead byte (1 for stray bytes).
size_t utf8_len(uint8_t lead);

// GPT-2 byte-level mapping: every byte to a printable code point's UTF-8.
const std::string& byte_to_unicode(uint8_t b);
// Inverse; returns -1 when the UTF-8 text of a code point is not in the map.
int unicode_to_byte(uint32_t cpt);

}  // namespace specdec::io::unicode
