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
// \p{P} as the collapsed regex sees it: llama.cpp rewrites it to the
// category byte plus the ASCII punctuation !-#%-*,-/:-;?-@[-]_{} (the ASCII
// symbols $+<=>^`|~ are \p{S}, so they are not in it).
bool is_punct(uint32_t c) {
    if (c < 128) {
        if (c >= 0x21 && c <= 0x23) return true;
        if (c >= 0x25 && c <= 0x2A) return true;
        if (c >= 0x2C && c <= 0x2F) return true;
        if (c == 0x3A || c == 0x3B || c == 0x3F || c == 0x40) return true;
        if (c >= 0x5B && c <= 0x5D) return true;
        return c == '_' || c == '{' || c == '}';
    }
    return has_cat(c, uc::kPunct);
}
// [\p{P}\$\+<=>\^~\|] of the default BPE pre-tokenizer.
bool is_default_punct(uint32_t c) {
    switch (c) {
        case '$': case '+': case '<': case '=': case '>': case '^': case '~': case '|':
            return true;
        default:
            return is_punct(c);
    }
}
// [\p{P}\$\+<=>\^~\|`] of Falcon: the default class plus the backtick, i.e.
// every ASCII punctuation or symbol, but of the non-ASCII ones only \p{P}.
bool is_falcon_punct(uint32_t c) { return c == '`' || is_default_punct(c); }

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

// The split of Qwen2, Llama 3 and Qwen3.5, which llama.cpp runs through
// hand-written matchers on the raw category flags (not the collapsed regex):
// (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?W+|\p{N}{1,kDigits}
// | ?[^\s W \p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with W = \p{L} (Qwen2: kDigits 1; Llama 3: kDigits 3) or W = [\p{L}\p{M}]
// (Qwen3.5, kMarks: a combining mark stays in its word, and is no "other").
template <size_t kDigits, bool kMarks>
size_t match_qwen_family(const std::vector<uint32_t>& c, size_t pos, size_t end) {
    if (size_t m = contraction(c, pos, end, true)) return m;
    auto is_word = [](uint32_t x) { return is_letter(x) || (kMarks && has_cat(x, uc::kMark)); };
    const uint32_t c0 = c[pos];
    auto letters_from = [&](size_t p) {
        while (p < end && is_word(c[p])) ++p;
        return p;
    };
    const bool nl0 = c0 == '\r' || c0 == '\n';
    if (!nl0 && !is_word(c0) && !is_number(c0) && pos + 1 < end && is_word(c[pos + 1])) {
        return letters_from(pos + 1) - pos;
    }
    if (is_word(c0)) return letters_from(pos) - pos;
    if (is_number(c0)) {
        // Greedy {1,k}: a longer run is cut into k-digit groups from the left.
        size_t p = pos + 1;
        while (p < end && p - pos < kDigits && is_number(c[p])) ++p;
        return p - pos;
    }
    auto other = [&](uint32_t x) { return !is_space(x) && !is_word(x) && !is_number(x); };
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

bool is_newline(uint32_t c) { return c == '\r' || c == '\n'; }

// llama.cpp runs a regex without \p{..} through std::wregex on the code
// points, but first replaces every non-ASCII whitespace by U+000B: a class
// that lists U+3000 (DeepSeek's) thus never matches the ideographic space,
// which only \s does. \s itself is then exactly is_space().
uint32_t wregex_view(uint32_t c) { return c > 0x7F && is_space(c) ? 0x0B : c; }

struct CodeRange {
    uint32_t first, last;  // inclusive
};

// The explicit letter class of DeepSeek LLM's second regex, \s?[A-Za-z...]+
// (Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee, ... cased letters),
// as sorted inclusive ranges.
constexpr CodeRange kDeepseekLetters[] = {
    {0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6},
    {0x00F8, 0x01BA}, {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373},
    {0x0376, 0x0377}, {0x037B, 0x037D}, {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x038A},
    {0x038C, 0x038C}, {0x038E, 0x03A1}, {0x03A3, 0x03F5}, {0x03F7, 0x0481}, {0x048A, 0x052F},
    {0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
    {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

template <size_t N>
bool in_sorted_ranges(const CodeRange (&r)[N], uint32_t c) {
    size_t lo = 0, hi = N;  // first range with last >= c
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (r[mid].last < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < N && r[lo].first <= c;
}

bool is_deepseek_letter(uint32_t c) { return in_sorted_ranges(kDeepseekLetters, wregex_view(c)); }

// The class of DeepSeek LLM's third regex, \s?[...]+: !-/ :-~ U+FF01-FF0F
// U+FF1A-FF5E U+2018-201F U+3000-3002. Note :-~ spans the ASCII letters too,
// and U+3000 is unreachable (see wregex_view).
bool is_deepseek_punct(uint32_t c) {
    c = wregex_view(c);
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x7E) || (c >= 0xFF01 && c <= 0xFF0F) ||
           (c >= 0xFF1A && c <= 0xFF5E) || (c >= 0x2018 && c <= 0x201F) || (c >= 0x3000 && c <= 0x3002);
}

// The [...]+ class of both DeepSeek splits: U+4E00-U+9FA5, U+0800-U+4E00 and
// U+AC00-U+D7FF, so everything from Samaritan to the CJK ideographs (kana,
// Devanagari, Thai, general punctuation, ...) and Hangul syllables.
bool is_deepseek_cjk(uint32_t c) {
    c = wregex_view(c);
    return (c >= 0x0800 && c <= 0x9FA5) || (c >= 0xAC00 && c <= 0xD7FF);
}

// \s?C+ for a class C: greedy, so a whitespace joins the run it precedes;
// before anything else it is not matched here.
template <typename Pred>
auto space_then_run(Pred in_class) {
    return [in_class](const std::vector<uint32_t>& c, size_t pos, size_t end) -> size_t {
        size_t p = pos;
        if (is_space(c[p]) && p + 1 < end && in_class(c[p + 1])) ++p;
        if (!in_class(c[p])) return 0;
        while (p < end && in_class(c[p])) ++p;
        return p - pos;
    };
}

// \s+$ inside every piece: $ is the end of the piece (std::regex_iterator's
// range), so whitespace ending a piece becomes a piece of its own. A split
// of its own rather than a matcher: the leftmost-match scan would retry every
// space of a long run.
Pieces split_trailing_space(const std::vector<uint32_t>& cpts, const Pieces& pieces) {
    Pieces out;
    out.reserve(pieces.size());
    size_t start = 0;
    for (size_t len : pieces) {
        size_t n = 0;
        while (n < len && is_space(cpts[start + len - 1 - n])) ++n;
        if (n == 0 || n == len) {
            out.push_back(len);
        } else {
            out.push_back(len - n);
            out.push_back(n);
        }
        start += len;
    }
    return out;
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
    // llama.cpp's names for GPT-2's own split (gpt-2 is the name its converter
    // writes for openai-community/gpt2). Not the jina/roberta/modern-bert names
    // also mapped there: those vocabularies carry more settings (add_sep, ...).
    if (pre == "gpt-2" || pre == "phi-2" || pre == "gigachat" || pre == "a.x-4.0" || pre == "mellum" ||
        pre == "trillion" || pre == "granite-docling")
        return PreTokenizer::Gpt2;
    // Every name llama.cpp gives the Llama 3 regex (LLAMA3, DBRX, SMAUG); not
    // chatglm-bpe/glm4/glm5, which share it but also drop the BOS token.
    if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3" || pre == "falcon-h1" ||
        pre == "pixtral" || pre == "midm-2.0" || pre == "lfm2" || pre == "jina-v5-nano" || pre == "dbrx" ||
        pre == "smaug-bpe")
        return PreTokenizer::Llama3;
    if (pre == "qwen35") return PreTokenizer::Qwen35;
    if (pre == "falcon") return PreTokenizer::Falcon;
    if (pre == "deepseek-llm") return PreTokenizer::DeepseekLlm;
    if (pre == "deepseek-coder") return PreTokenizer::DeepseekCoder;
    if (pre == "gemma4") return PreTokenizer::Gemma4;
    throw Error("tokenizer: unsupported pre-tokenizer '" + pre + "' (tokenizer.ggml.pre)");
}

// The names llama.cpp groups as its LLAMA3 pre-tokenizer type.
static bool is_llama3_name(const std::string& pre) {
    return pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3" || pre == "falcon-h1" ||
           pre == "pixtral" || pre == "midm-2.0" || pre == "lfm2" || pre == "jina-v5-nano";
}

bool pretokenizer_ignores_merges(const std::string& pre) { return is_llama3_name(pre); }

bool pretokenizer_adds_bos(const std::string& pre) { return is_llama3_name(pre); }

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
            pieces = split(cpts, pieces, match_qwen_family<1, false>);
            break;
        case PreTokenizer::Llama3:
            pieces = split(cpts, pieces, match_qwen_family<3, false>);
            break;
        case PreTokenizer::Qwen35:
            pieces = split(cpts, pieces, match_qwen_family<1, true>);
            break;
        case PreTokenizer::Falcon:
            // The default's steps minus \p{N}+, with ` in the first class.
            pieces = split(cpts, pieces, run(is_falcon_punct));
            pieces = split(cpts, pieces, match_gpt2);
            pieces = split(cpts, pieces, match_digit_triple);
            break;
        case PreTokenizer::DeepseekLlm:
            // [\r\n], \s?[letters]+, \s?[punct]+, \s+$, [cjk]+, \p{N}+: only the
            // last goes through the collapsed regex, the others through wregex.
            pieces = split(cpts, pieces, single(is_newline));
            pieces = split(cpts, pieces, space_then_run(is_deepseek_letter));
            pieces = split(cpts, pieces, space_then_run(is_deepseek_punct));
            pieces = split_trailing_space(cpts, pieces);
            pieces = split(cpts, pieces, run(is_deepseek_cjk));
            pieces = split(cpts, pieces, run(is_number));
            break;
        case PreTokenizer::DeepseekCoder:
            // [\r\n], \s?\p{L}+, \s?\p{P}+ (collapsed), [cjk]+ (wregex), \p{N}.
            pieces = split(cpts, pieces, single(is_newline));
            pieces = split(cpts, pieces, space_then_run(is_letter));
            pieces = split(cpts, pieces, space_then_run(is_punct));
            pieces = split(cpts, pieces, run(is_deepseek_cjk));
            pieces = split(cpts, pieces, single(is_number));
            break;
        case PreTokenizer::Gemma4:
            // [^\n]+|[\n]+ (through std::wregex in llama.cpp).
            pieces = split(cpts, pieces, run([](uint32_t c) { return c == '\n'; }));
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
