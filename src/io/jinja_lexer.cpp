#include "io/jinja_lexer.h"

#include <cctype>

#include "io/jinja_value.h"

namespace specdec::io::jinja {
namespace {

[[noreturn]] void fail(int line, const std::string& msg) {
    throw TemplateError("chat template line " + std::to_string(line) + ": " + msg);
}

// Python's \s (str.isspace) at byte offset `at`: its byte length, 0 if none.
size_t space_len(const std::string& s, size_t at) {
    if (at >= s.size()) return 0;
    size_t n;
    const uint32_t c = cp_at(s, at, &n);
    return is_py_space(c) ? n : 0;
}

size_t skip_space(const std::string& s, size_t at) {
    while (size_t n = space_len(s, at)) at += n;
    return at;
}

// Python's str.rstrip(): trailing Unicode whitespace.
std::string rstrip_py(const std::string& s) {
    const std::vector<size_t> off = cp_offsets(s);
    size_t k = off.size() - 1;
    while (k > 0) {
        size_t n;
        if (!is_py_space(cp_at(s, off[k - 1], &n))) break;
        --k;
    }
    return s.substr(0, off[k]);
}

// jinja2's OptionalLStrip: the text before a tag, given the tag's sign.
std::string strip_before(const std::string& text, char sign, bool lstrip, bool line_starting) {
    if (sign == '-') return rstrip_py(text);
    if (sign == '+' || !lstrip) return text;
    const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if (l_pos == 0 && !line_starting) return text;
    if (l_pos == text.size()) return text;  // \s+ needs at least one character
    if (skip_space(text, l_pos) != text.size()) return text;
    return text.substr(0, l_pos);
}

int count_lines(const std::string& s, size_t from, size_t to) {
    int n = 0;
    for (size_t k = from; k < to && k < s.size(); ++k) n += s[k] == '\n';
    return n;
}

bool ident_start(char c) { return std::isalpha(uint8_t(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(uint8_t(c)) || c == '_'; }

// Python's unicode-escape decoding of a string literal's body.
std::string unescape(const std::string& body, int line) {
    std::string out;
    for (size_t k = 0; k < body.size(); ++k) {
        if (body[k] != '\\' || k + 1 >= body.size()) {
            out += body[k];
            continue;
        }
        const char c = body[++k];
        auto hex = [&](size_t digits) {
            uint32_t v = 0;
            for (size_t d = 1; d <= digits; ++d) {
                if (k + d >= body.size() || !std::isxdigit(uint8_t(body[k + d])))
                    fail(line, "truncated \\x, \\u or \\U escape in string literal");
                const char h = char(std::tolower(uint8_t(body[k + d])));
                v = v * 16 + uint32_t(h <= '9' ? h - '0' : h - 'a' + 10);
            }
            k += digits;
            if (v > 0x10FFFF) fail(line, "illegal Unicode character in string literal");
            std::string enc;
            if (v < 0x80) {
                enc += char(v);
            } else if (v < 0x800) {
                enc += char(0xC0 | (v >> 6));
                enc += char(0x80 | (v & 0x3F));
            } else if (v < 0x10000) {
                enc += char(0xE0 | (v >> 12));
                enc += char(0x80 | ((v >> 6) & 0x3F));
                enc += char(0x80 | (v & 0x3F));
            } else {
                enc += char(0xF0 | (v >> 18));
                enc += char(0x80 | ((v >> 12) & 0x3F));
                enc += char(0x80 | ((v >> 6) & 0x3F));
                enc += char(0x80 | (v & 0x3F));
            }
            out += enc;
        };
        switch (c) {
            case '\n': break;
            case '\\': out += '\\'; break;
            case '\'': out += '\''; break;
            case '"': out += '"'; break;
            case 'a': out += '\a'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'v': out += '\v'; break;
            case 'x': hex(2); break;
            case 'u': hex(4); break;
            case 'U': hex(8); break;
            case 'N': fail(line, "\\N{...} escapes are not supported in string literals");
            default:
                if (c >= '0' && c <= '7') {
                    uint32_t v = uint32_t(c - '0');
                    for (int d = 0; d < 2 && k + 1 < body.size() && body[k + 1] >= '0' && body[k + 1] <= '7'; ++d)
                        v = v * 8 + uint32_t(body[++k] - '0');
                    if (v < 0x80) {
                        out += char(v);
                    } else {
                        out += char(0xC0 | (v >> 6));
                        out += char(0x80 | (v & 0x3F));
                    }
                } else {
                    out += '\\';  // unknown escapes stay as written
                    out += c;
                }
        }
    }
    return out;
}

class Lexer {
public:
    explicit Lexer(std::string src) : s_(std::move(src)) {}

    std::vector<Token> run() {
        while (pos_ < s_.size()) {
            size_t at = pos_;
            while ((at = s_.find('{', at)) != std::string::npos) {
                if (at + 1 < s_.size() && (s_[at + 1] == '{' || s_[at + 1] == '%' || s_[at + 1] == '#')) break;
                ++at;
            }
            if (at == std::string::npos) {
                text(s_.substr(pos_));
                pos_ = s_.size();
                break;
            }
            const char kind = s_[at + 1];
            const char sign = at + 2 < s_.size() && (s_[at + 2] == '-' || s_[at + 2] == '+') ? s_[at + 2] : 0;
            const size_t body = at + 2 + (sign ? 1 : 0);
            const std::string before = s_.substr(pos_, at - pos_);
            text(strip_before(before, sign, kind != '{', line_starting_));
            line_ += count_lines(s_, pos_, at);
            if (kind == '#') {
                comment(body);
            } else if (kind == '%' && raw(body, sign)) {
            } else {
                tag(kind == '{', body);
            }
        }
        out_.push_back({Tok::Eof, "", line_});
        return std::move(out_);
    }

private:
    void text(std::string t) {
        if (!t.empty()) out_.push_back({Tok::Text, std::move(t), line_});
    }

    // Consumes a closing tag of length `len` at `at` with its sign's effect on
    // what follows, and records whether a line starts after it.
    void close(size_t at, size_t len, char sign, bool trim) {
        size_t end = at + len;
        if (sign == '-') {
            end = skip_space(s_, end);
        } else if (sign != '+' && trim && end < s_.size() && s_[end] == '\n') {
            ++end;
        }
        line_ += count_lines(s_, pos_, end);
        line_starting_ = end > 0 && s_[end - 1] == '\n';
        pos_ = end;
    }

    void comment(size_t body) {
        const size_t q = s_.find("#}", body);
        if (q == std::string::npos) fail(line_, "missing end of comment tag '#}'");
        const char sign = q > body && (s_[q - 1] == '-' || s_[q - 1] == '+') ? s_[q - 1] : 0;
        pos_ = body;
        close(sign ? q - 1 : q, sign ? 3 : 2, sign, true);
    }

    // {% raw %}...{% endraw %}: the body is text, untouched.
    bool raw(size_t body, char) {
        size_t p = skip_space(s_, body);
        if (s_.compare(p, 3, "raw") != 0) return false;
        p = skip_space(s_, p + 3);
        char sign = 0;
        if (s_.compare(p, 3, "-%}") == 0) {
            sign = '-';
        } else if (s_.compare(p, 2, "%}") != 0) {
            return false;
        }
        pos_ = body;
        close(p, sign ? 3 : 2, sign, false);
        for (size_t q = s_.find("{%", pos_); q != std::string::npos; q = s_.find("{%", q + 1)) {
            const char esign = q + 2 < s_.size() && (s_[q + 2] == '-' || s_[q + 2] == '+') ? s_[q + 2] : 0;
            size_t r = skip_space(s_, q + 2 + (esign ? 1 : 0));
            if (s_.compare(r, 6, "endraw") != 0) continue;
            r = skip_space(s_, r + 6);
            char csign = 0;
            if (s_.compare(r, 3, "-%}") == 0 || s_.compare(r, 3, "+%}") == 0) {
                csign = s_[r];
            } else if (s_.compare(r, 2, "%}") != 0) {
                continue;
            }
            text(strip_before(s_.substr(pos_, q - pos_), esign, true, line_starting_));
            close(r, csign ? 3 : 2, csign, true);
            return true;
        }
        fail(line_, "missing end of raw directive");
    }

    void tag(bool var, size_t body) {
        out_.push_back({var ? Tok::VarBegin : Tok::BlockBegin, "", line_});
        pos_ = body;
        std::string balance;
        for (;;) {
            size_t p = skip_space(s_, pos_);
            line_ += count_lines(s_, pos_, p);
            pos_ = p;
            if (p >= s_.size()) fail(line_, var ? "missing end of expression '}}'" : "missing end of block '%}'");
            if (balance.empty()) {
                if (var && s_.compare(p, 3, "-}}") == 0) {
                    out_.push_back({Tok::VarEnd, "", line_});
                    return close(p, 3, '-', false);
                }
                if (var && s_.compare(p, 2, "}}") == 0) {
                    out_.push_back({Tok::VarEnd, "", line_});
                    return close(p, 2, 0, false);
                }
                if (!var && (s_.compare(p, 3, "-%}") == 0 || s_.compare(p, 3, "+%}") == 0)) {
                    out_.push_back({Tok::BlockEnd, "", line_});
                    return close(p, 3, s_[p], true);
                }
                if (!var && s_.compare(p, 2, "%}") == 0) {
                    out_.push_back({Tok::BlockEnd, "", line_});
                    return close(p, 2, 0, true);
                }
            }
            expression_token(balance);
        }
    }

    void expression_token(std::string& balance) {
        const size_t p = pos_;
        const char c = s_[p];
        if (std::isdigit(uint8_t(c))) return number();
        if (ident_start(c)) {
            size_t e = p;
            while (e < s_.size() && ident_char(s_[e])) ++e;
            out_.push_back({Tok::Name, s_.substr(p, e - p), line_});
            pos_ = e;
            return;
        }
        if (c == '\'' || c == '"') {
            size_t e = p + 1;
            while (e < s_.size() && s_[e] != c) e += s_[e] == '\\' ? 2 : 1;
            if (e >= s_.size()) fail(line_, "unterminated string literal");
            out_.push_back({Tok::String, unescape(s_.substr(p + 1, e - p - 1), line_), line_});
            line_ += count_lines(s_, p, e);
            pos_ = e + 1;
            return;
        }
        static const char* two[] = {"//", "**", "==", "!=", ">=", "<="};
        for (const char* op : two) {
            if (s_.compare(p, 2, op) == 0) {
                out_.push_back({Tok::Op, op, line_});
                pos_ = p + 2;
                return;
            }
        }
        if (std::string_view("+-/*%~[](){}=.:|,<>").find(c) == std::string_view::npos)
            fail(line_, std::string("unexpected character '") + c + "' in a tag");
        if (c == '(' || c == '[' || c == '{') balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
        if (c == ')' || c == ']' || c == '}') {
            if (balance.empty()) fail(line_, std::string("unexpected '") + c + "'");
            if (balance.back() != c) fail(line_, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
            balance.pop_back();
        }
        out_.push_back({Tok::Op, std::string(1, c), line_});
        pos_ = p + 1;
    }

    void number() {
        size_t e = pos_;
        auto digits = [&] {
            const size_t from = e;
            while (e < s_.size() && (std::isdigit(uint8_t(s_[e])) || (s_[e] == '_' && e > from))) ++e;
            return e > from;
        };
        if (s_.compare(pos_, 2, "0x") == 0 || s_.compare(pos_, 2, "0X") == 0) {
            e += 2;
            while (e < s_.size() && (std::isxdigit(uint8_t(s_[e])) || s_[e] == '_')) ++e;
            std::string h;
            for (size_t k = pos_ + 2; k < e; ++k)
                if (s_[k] != '_') h += s_[k];
            if (h.empty() || h.size() > 15) fail(line_, "bad hexadecimal literal");
            out_.push_back({Tok::Int, std::to_string(std::stoll(h, nullptr, 16)), line_});
            pos_ = e;
            return;
        }
        digits();
        bool is_float = false;
        if (e + 1 < s_.size() && s_[e] == '.' && std::isdigit(uint8_t(s_[e + 1]))) {
            ++e;
            digits();
            is_float = true;
        }
        if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
            size_t x = e + 1;
            if (x < s_.size() && (s_[x] == '+' || s_[x] == '-')) ++x;
            if (x < s_.size() && std::isdigit(uint8_t(s_[x]))) {
                e = x;
                digits();
                is_float = true;
            }
        }
        std::string num;
        for (size_t k = pos_; k < e; ++k)
            if (s_[k] != '_') num += s_[k];
        if (!is_float && num.size() > 18) fail(line_, "integer literal too large");
        out_.push_back({is_float ? Tok::Float : Tok::Int, num, line_});
        pos_ = e;
    }

    std::string s_;
    size_t pos_ = 0;
    int line_ = 1;
    bool line_starting_ = true;
    std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex(const std::string& source) {
    // jinja2 reads \r\n and \r as \n everywhere and drops one trailing newline.
    std::string src;
    src.reserve(source.size());
    for (size_t k = 0; k < source.size(); ++k) {
        if (source[k] == '\r') {
            src += '\n';
            if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
        } else {
            src += source[k];
        }
    }
    if (!src.empty() && src.back() == '\n') src.pop_back();
    return Lexer(std::move(src)).run();
}

}  // namespace specdec::io::jinja
