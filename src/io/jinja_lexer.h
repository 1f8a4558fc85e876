// Jinja lexer: template source -> tokens, with the whitespace rules of
// jinja2's lexer under Hugging Face's settings (trim_blocks, lstrip_blocks,
// keep_trailing_newline=False): `{%-`/`-%}` strip whitespace, `{%+`/`+%}`
// keep it, a block or comment tag alone on its line takes its indentation and
// its newline with it, and one trailing newline of the template is dropped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace specdec::io::jinja {

enum class Tok {
    Text,        // template data between tags
    VarBegin,    // {{
    VarEnd,      // }}
    BlockBegin,  // {%
    BlockEnd,    // %}
    Name,
    String,  // value already unescaped
    Int,
    Float,
    Op,  // + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
    Eof,
};

struct Token {
    Tok kind;
    std::string text;
    int line = 1;
};

// Throws TemplateError naming the line on a malformed template.
std::vector<Token> lex(const std::string& source);

}  // namespace specdec::io::jinja
