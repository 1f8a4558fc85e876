#include "io/pretokenizer.h"

#include <cstdint>

#include "core/error.h"
#include "io/unicode_tables.h"

namespace specdec::io {
namespace {

namespace uc = unicode;
using Pieces = std::vector<size_t>;  // lengths in code points, consecutive

// Character classes as llama.cpp's std::regex path sees them: it collapses
// every non-ASCII code point to one byte per category (whitespace first), so
// ASCII keeps the regex's own ASCII meaning and non-ASCII uses the table.
bool is_space(uint32_t c) {
    if (c < 128) return c == ' ' || (c >= 9 && c <= 13);
    return (uc::flags(c) & uc::kWhitespace) != 0;
}
bool has_cat(uint32_t c, uint16_t cat) {
    const uint16_t f = uc::flags(c);
    return (f & uc::kWhitespace) == 0 && (f & cat) != 0;
}
bool is_letter(uint32_t c) {
    if (c < 128) return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    return has_cat(c, uc::kLetter);
}
bool is_number(uint32_t c) {
    if (c < 128) return c >= '0' && c <= '9';
    return has_cat(c, uc::kNumber);
}
// [\p{P}\$\+<=>\^~\|] of the default BPE pre-tokenizer.
bool is_default_punct(uint32_t c) {
    if (c < 128) {
        if (c >= 0x21 && c <= 0x23) return true;
        if (c >= 0x25 && c <= 0x2A) return true;
        if (c >= 0x2C && c <= 0x2F) return true;
        if (c == 0x3A || c == 0x3B || c == 0x3F || c == 0x40) return true;
        if (c >= 0x5B && c <= 0x5D) return true;
        switch (c) {
            case '_': case '{': case '}': case '$': case '+': case '<': case '=': case '>':
            case '^': case '~': case '|':
                return true;
            default:
                return false;
        }
    }
    return has_cat(c, uc::kPunct);
}

// Applies `match` inside every current piece. match(cpts, pos, end) returns the
// length of the match starting at pos (0: none); unmatched stretches between
// matches are kept as one piece each, as llama.cpp's regex splitter does.
template <typename Match>
Pieces split(const std::vector<uint32_t>& cpts, const Pieces& pieces, Match match) {
    Pieces out;
    out.reserve(pieces.size());
    size_t start = 0;
    for (size_t len : pieces) {
        const size_t end = start + len;
        size_t gap_start = start;
        for (size_t pos = start; pos < end;) {
            const size_t m = match(cpts, pos, end);
            if (m == 0) {
                ++pos;
                continue;
            }
            if (pos > gap_start) out.push_back(pos - gap_start);
            out.push_back(m);
            pos += m;
            gap_start = pos;
        }
        if (end > gap_start) out.push_back(end - gap_start);
        start = end;
    }
    return out;
}

template <typename Pred>
auto single(Pred pred) {
    return [pred](const std::vector<uint32_t>& c, size_t pos, size_t) -> size_t { return pred(c[pos]) ? 1 : 0; };
}
template <typename Pred>
auto run(Pred pred) {
    return [pred](const std::vector<uint32_t>& c, size_t pos, size_t end) -> size_t {
        size_t p = pos;
        while (p < end && pred(c[p])) ++p;
        return p - pos;
    };
}

// 's|'t|'re|'ve|'m|'ll|'d, case-sensitive or not. Returns the match length.
size_t contraction(const std::vector<uint32_t>& c, size_t pos, size_t end, bool any_case) {
    if (c[pos] != '\'' || pos + 1 >= end) return 0;
    auto low = [&](uint32_t x) { return any_case && x >= 'A' && x <= 'Z' ? x + 32 : x; };
    const uint32_t a = low(c[pos + 1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 >= end) return 0;
    const uint32_t b = low(c[pos + 2]);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
// llama.cpp runs this one through a hand-written matcher on the raw category
// table (not the collapsed regex), so the classes come straight from flags.
size_t match_gpt2(const std::vector<uint32_t>& c, size_t pos, size_t end) {
    if (size_t m = contraction(c, pos, end, false)) return m;
    auto fl = [&](size_t p) -> uint16_t { return p < end ? uc::flags(c[p]) : 0; };
    auto other = [](uint16_t f) { return f != 0 && (f & (uc::kWhitespace | uc::kLetter | uc::kNumber)) == 0; };
    const size_t body = (c[pos] == ' ' && pos + 1 < end) ? pos + 1 : pos;
    const uint16_t f = fl(body);
    auto extend = [&](auto pred) {
        size_t p = body;
        while (pred(fl(p))) ++p;
        return p - pos;
    };
    if (f & uc::kLetter) return extend([](uint16_t x) { return (x & uc::kLetter) != 0; });
    if (f & uc::kNumber) return extend([](uint16_t x) { return (x & uc::kNumber) != 0; });
    if (other(f)) return extend(other);
    size_t n = 0;
    while (fl(pos + n) & uc::kWhitespace) ++n;
    if (n > 1 && pos + n < end) return n - 1;  // \s+(?!\S): leave the last space to the next word
    return n > 0 ? n : 1;                       // \s+ or a lone unmatched code point
}

// (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
// | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t match_qwen2(const std::vector<uint32_t>& c, size_t pos, size_t end) {
    if (size_t m = contraction(c, pos, end, true)) return m;
    const uint32_t c0 = c[pos];
    auto letters_from = [&](size_t p) {
        while (p < end && is_letter(c[p])) ++p;
        return p;
    };
    const bool nl0 = c0 == '\r' || c0 == '\n';
    if (!nl0 && !is_letter(c0) && !is_number(c0) && pos + 1 < end && is_letter(c[pos + 1])) {
        return letters_from(pos + 1) - pos;
    }
    if (is_letter(c0)) return letters_from(pos) - pos;
    if (is_number(c0)) return 1;
    auto other = [&](uint32_t x) { return !is_space(x) && !is_letter(x) && !is_number(x); };
    size_t body = pos;
    if (c0 == ' ' && pos + 1 < end && other(c[pos + 1])) body = pos + 1;
    if (other(c[body])) {
        size_t p = body;
        while (p < end && other(c[p])) ++p;
        while (p < end && (c[p] == '\r' || c[p] == '\n')) ++p;
        return p - pos;
    }
    // Whitespace run [pos, q).
    size_t q = pos;
    size_t last_nl = 0;
    while (q < end && is_space(c[q])) {
        if (c[q] == '\r' || c[q] == '\n') last_nl = q + 1;
        ++q;
    }
    if (last_nl) return last_nl - pos;           // \s*[\r\n]+ (backtracks to the last newline)
    if (q - pos > 1 && q < end) return q - pos - 1;  // \s+(?!\S)
    return q > pos ? q - pos : 1;                // \s+
}

// [0-9][0-9][0-9] (run by llama.cpp through std::wregex, ASCII digits only).
size_t match_digit_triple(const std::vector<uint32_t>& c, size_t pos, size_t end) {
    if (pos + 3 > end) return 0;
    for (size_t i = 0; i < 3; ++i) {
        if (c[pos + i] < '0' || c[pos + i] > '9') return 0;
    }
    return 3;
}

}  // namespace

PreTokenizer pretokenizer_from_name(const std::string& pre) {
    if (pre.empty() || pre == "default") return PreTokenizer::Default;
    if (pre == "gpt2" || pre == "mpt" || pre == "olmo" || pre == "jais" || pre == "exaone4")
        return PreTokenizer::Gpt2;
    if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "command-r" ||
        pre == "codeshell" || pre == "exaone" || pre == "minerva-7b")
        return PreTokenizer::Smollm;
    if (pre == "qwen2" || pre == "stablelm2" || pre == "megrez" || pre == "deepseek-r1-qwen")
        return PreTokenizer::Qwen2;
    throw Error("tokenizer: unsupported pre-tokenizer '" + pre + "' (tokenizer.ggml.pre)");
}

std::vector<std::string> pretokenize(PreTokenizer type, std::string_view text) {
    const std::vector<uint32_t> cpts = unicode::decode_utf8(text);
    Pieces pieces{cpts.size()};
    switch (type) {
        case PreTokenizer::Gpt2:
            pieces = split(cpts, pieces, match_gpt2);
            break;
        case PreTokenizer::Smollm:
            // "\p{N}" first: every digit becomes its own piece.
            pieces = split(cpts, pieces, single(is_number));
            pieces = split(cpts, pieces, match_gpt2);
            break;
        case PreTokenizer::Qwen2:
            pieces = split(cpts, pieces, match_qwen2);
            break;
        case PreTokenizer::Default:
            pieces = split(cpts, pieces, run(is_default_punct));
            pieces = split(cpts, pieces, match_gpt2);
            pieces = split(cpts, pieces, run(is_number));
            pieces = split(cpts, pieces, match_digit_triple);
            break;
    }
    std::vector<std::string> words;
    words.reserve(pieces.size());
    size_t start = 0;
    for (size_t len : pieces) {
        std::string w;
        for (size_t i = start; i < start + len; ++i) unicode::append_utf8(w, cpts[i]);
        words.push_back(std::move(w));
        start += len;
    }
    return words;
}

}  // namespace specdec::io
