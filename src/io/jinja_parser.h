// Jinja parser: tokens (io/jinja_lexer) -> syntax tree (io/jinja_ast), with
// jinja2's grammar and operator precedence. Supports the statements chat
// templates use (if/elif/else, for with loop filter and else, set and block
// set, macro, call, filter, break/continue, raw, and Hugging Face's
// generation block); anything else (include, extends, import, block, ...)
// is a TemplateError naming the tag and its line.
#pragma once

#include <string>

#include "io/jinja_ast.h"

namespace specdec::io::jinja {

// Nesting of expressions and blocks is capped so that a hostile template
// cannot exhaust the stack.
constexpr int kMaxParseDepth = 200;

Body parse(const std::string& source);

}  // namespace specdec::io::jinja
