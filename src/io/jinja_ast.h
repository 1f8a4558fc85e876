// Syntax tree of a Jinja template (built by io/jinja_parser, run by
// io/jinja_evaluator). One node type per kind of expression or statement;
// every node keeps its line for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/jinja_value.h"

namespace specdec::io::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
    Literal,    // value
    Name,       // name
    List,       // items
    Tuple,      // items
    Dict,       // items as key, value pairs
    Attr,       // items[0].name
    Subscript,  // items[0][items[1]]
    Slice,      // items[0][items[1]:items[2]:items[3]] (null parts absent)
    Call,       // items[0](items[1..], kwargs)
    Filter,     // items[0] | name(items[1..], kwargs); items[0] null in a {% filter %} block
    Test,       // items[0] is [not] name(items[1..])
    Unary,      // op items[0]: "not", "-", "+"
    Binary,     // items[0] op items[1]: or and + - * / // % ** ~
    Compare,    // items[0] (op operand)... from kwargs: == != < <= > >= in notin, chained as in Python
    CondExpr,   // items[1] if items[0] else items[2] (items[2] null: undefined)
};

struct Expr {
    ExprKind kind;
    int line = 0;
    std::string name;  // Name, Attr, Filter, Test; the operator for Unary/Binary
    bool negate = false;  // Test: `is not`
    Value value;          // Literal
    std::vector<ExprPtr> items;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;  // Call, Filter, Test
};

enum class StmtKind {
    Text,        // text
    Output,      // {{ expr }}
    If,          // if expr: body else orelse
    For,         // for targets in expr [if cond]: body else orelse
    Set,         // set targets (or ns.attr) = expr
    SetBlock,    // set target: body, then optional filter expr
    Macro,       // macro name(params): body
    CallBlock,   // call(params) expr: body
    FilterBlock, // filter expr: body
    Break,
    Continue,
    Generation,  // Hugging Face's {% generation %}: renders its body as is
};

struct Param {
    std::string name;
    ExprPtr default_value;  // null: required
};

struct Stmt {
    StmtKind kind;
    int line = 0;
    std::string text;                  // Text; Macro name; Set namespace attribute
    std::vector<std::string> targets;  // For loop variables; Set names
    ExprPtr expr;                      // the main expression
    ExprPtr cond;                      // For: filter condition; SetBlock: filter
    std::vector<Param> params;         // Macro, CallBlock
    Body body, orelse;
    bool recursive = false;
};

}  // namespace specdec::io::jinja
