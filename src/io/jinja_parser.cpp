#include "io/jinja_parser.h"

#include <initializer_list>

#include "io/jinja_lexer.h"

namespace specdec::io::jinja {
namespace {

class Parser {
public:
    explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

    Body parse_template() {
        Body body = parse_body({});
        if (cur().kind != Tok::Eof) fail("unexpected tag '" + cur().text + "'");
        return body;
    }

private:
    // ---- token stream --------------------------------------------------------
    const Token& cur() const { return t_[p_]; }
    const Token& peek(size_t k = 1) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
    void next() {
        if (p_ + 1 < t_.size()) ++p_;
    }
    bool is_op(const char* op) const { return cur().kind == Tok::Op && cur().text == op; }
    bool is_name(const char* n) const { return cur().kind == Tok::Name && cur().text == n; }
    bool skip_op(const char* op) {
        if (!is_op(op)) return false;
        next();
        return true;
    }
    bool skip_name(const char* n) {
        if (!is_name(n)) return false;
        next();
        return true;
    }
    [[noreturn]] void fail(const std::string& msg) const {
        throw TemplateError("chat template line " + std::to_string(cur().line) + ": " + msg);
    }
    std::string describe(const Token& t) const {
        switch (t.kind) {
            case Tok::Eof: return "end of template";
            case Tok::BlockEnd: return "end of block '%}'";
            case Tok::VarEnd: return "end of expression '}}'";
            case Tok::Text: return "template text";
            default: return "'" + t.text + "'";
        }
    }
    void expect_op(const char* op) {
        if (!skip_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
    }
    std::string expect_name() {
        if (cur().kind != Tok::Name) fail("expected a name, got " + describe(cur()));
        std::string n = cur().text;
        next();
        return n;
    }
    void expect_block_end() {
        if (cur().kind != Tok::BlockEnd) fail("expected end of block '%}', got " + describe(cur()));
        next();
    }
    struct DepthGuard {
        Parser& p;
        explicit DepthGuard(Parser& parser) : p(parser) {
            if (++p.depth_ > kMaxParseDepth)
                p.fail("expressions or blocks nested deeper than " + std::to_string(kMaxParseDepth));
        }
        ~DepthGuard() { --p.depth_; }
    };

    ExprPtr node(ExprKind k) {
        auto e = std::make_unique<Expr>();
        e->kind = k;
        e->line = cur().line;
        return e;
    }

    // ---- statements ------------------------------------------------------------
    // Parses until a block tag whose name is in `ends` (left unconsumed: the
    // cursor is on the name) or the end of the template.
    Body parse_body(std::initializer_list<const char*> ends) {
        DepthGuard g(*this);
        Body body;
        for (;;) {
            const Token& tk = cur();
            if (tk.kind == Tok::Eof) {
                if (ends.size()) fail(std::string("missing '{% ") + *ends.begin() + " %}' (unclosed block)");
                return body;
            }
            if (tk.kind == Tok::Text) {
                auto s = std::make_unique<Stmt>();
                s->kind = StmtKind::Text;
                s->line = tk.line;
                s->text = tk.text;
                body.push_back(std::move(s));
                next();
            } else if (tk.kind == Tok::VarBegin) {
                next();
                auto s = std::make_unique<Stmt>();
                s->kind = StmtKind::Output;
                s->line = tk.line;
                s->expr = parse_tuple(true);
                if (cur().kind != Tok::VarEnd) fail("expected end of expression '}}', got " + describe(cur()));
                next();
                body.push_back(std::move(s));
            } else if (tk.kind == Tok::BlockBegin) {
                next();
                if (cur().kind != Tok::Name) fail("expected a statement name after '{%', got " + describe(cur()));
                for (const char* e : ends)
                    if (cur().text == e) return body;
                body.push_back(parse_statement());
            } else {
                fail("unexpected " + describe(tk));
            }
        }
    }

    StmtPtr parse_statement() {
        const std::string n = cur().text;
        const int line = cur().line;
        auto s = std::make_unique<Stmt>();
        s->line = line;
        next();
        if (n == "if") {
            s->kind = StmtKind::If;
            s->expr = parse_tuple(false);
            expect_block_end();
            s->body = parse_body({"endif", "elif", "else"});
            if (skip_name("elif")) {
                // elif is an if nested in the else branch
                --p_;
                t_[p_].text = "if";
                s->orelse.push_back(parse_statement());
                return s;
            }
            if (skip_name("else")) {
                expect_block_end();
                s->orelse = parse_body({"endif"});
            }
            next();  // endif
            expect_block_end();
        } else if (n == "for") {
            s->kind = StmtKind::For;
            s->targets = parse_targets();
            if (!skip_name("in")) fail("expected 'in' in a for loop, got " + describe(cur()));
            s->expr = parse_tuple(false, true);
            if (skip_name("if")) s->cond = parse_expression(true);
            s->recursive = skip_name("recursive");
            expect_block_end();
            s->body = parse_body({"endfor", "else"});
            if (skip_name("else")) {
                expect_block_end();
                s->orelse = parse_body({"endfor"});
            }
            next();
            expect_block_end();
        } else if (n == "set") {
            const std::string first = expect_name();
            if (skip_op(".")) {
                s->kind = StmtKind::Set;
                s->targets = {first};
                s->text = expect_name();
                expect_op("=");
                s->expr = parse_tuple(true);
                expect_block_end();
                return s;
            }
            s->targets = {first};
            while (skip_op(",")) {
                if (cur().kind != Tok::Name) break;
                s->targets.push_back(expect_name());
            }
            if (skip_op("=")) {
                s->kind = StmtKind::Set;
                s->expr = parse_tuple(true);
                expect_block_end();
            } else {
                s->kind = StmtKind::SetBlock;
                if (skip_op("|")) s->cond = parse_filter_chain();
                expect_block_end();
                s->body = parse_body({"endset"});
                next();
                expect_block_end();
            }
        } else if (n == "macro") {
            s->kind = StmtKind::Macro;
            s->text = expect_name();
            s->params = parse_signature();
            expect_block_end();
            s->body = parse_body({"endmacro"});
            next();
            expect_block_end();
        } else if (n == "call") {
            s->kind = StmtKind::CallBlock;
            if (is_op("(")) s->params = parse_signature();
            s->expr = parse_expression(true);
            if (s->expr->kind != ExprKind::Call) fail("expected a call after '{% call %}'");
            expect_block_end();
            s->body = parse_body({"endcall"});
            next();
            expect_block_end();
        } else if (n == "filter") {
            s->kind = StmtKind::FilterBlock;
            s->expr = parse_filter_chain();
            expect_block_end();
            s->body = parse_body({"endfilter"});
            next();
            expect_block_end();
        } else if (n == "break" || n == "continue") {
            s->kind = n == "break" ? StmtKind::Break : StmtKind::Continue;
            expect_block_end();
        } else if (n == "generation") {
            s->kind = StmtKind::Generation;
            expect_block_end();
            s->body = parse_body({"endgeneration"});
            next();
            expect_block_end();
        } else {
            --p_;
            fail("unsupported statement '{% " + n + " %}'");
        }
        return s;
    }

    std::vector<std::string> parse_targets() {
        std::vector<std::string> names;
        const bool paren = skip_op("(");
        names.push_back(expect_name());
        while (skip_op(",")) {
            if (cur().kind != Tok::Name) break;
            names.push_back(expect_name());
        }
        if (paren) expect_op(")");
        return names;
    }

    std::vector<Param> parse_signature() {
        std::vector<Param> params;
        expect_op("(");
        while (!is_op(")")) {
            if (!params.empty()) expect_op(",");
            if (is_op(")")) break;
            Param prm;
            prm.name = expect_name();
            if (skip_op("=")) prm.default_value = parse_expression(true);
            params.push_back(std::move(prm));
        }
        next();
        return params;
    }

    // ---- expressions -------------------------------------------------------------
    // A comma-separated list makes a tuple (jinja2's parse_tuple).
    ExprPtr parse_tuple(bool with_condexpr, bool stop_at_recursive = false, bool explicit_parens = false) {
        auto tup = node(ExprKind::Tuple);
        bool comma = false;
        for (;;) {
            if (!tup->items.empty()) {
                if (!skip_op(",")) break;
                comma = true;
            }
            const Token& tk = cur();
            if (tk.kind == Tok::VarEnd || tk.kind == Tok::BlockEnd || tk.kind == Tok::Eof || is_op(")") ||
                (tk.kind == Tok::Name && (tk.text == "in" || (stop_at_recursive && tk.text == "recursive") ||
                                          (!with_condexpr && tk.text == "if"))))
                break;
            tup->items.push_back(parse_expression(with_condexpr));
        }
        if (!comma) {
            if (tup->items.empty()) {
                if (explicit_parens) return tup;  // ()
                fail("expected an expression, got " + describe(cur()));
            }
            return std::move(tup->items[0]);
        }
        return tup;
    }

    ExprPtr parse_expression(bool with_condexpr) {
        DepthGuard g(*this);
        if (!with_condexpr) return parse_or();
        ExprPtr e = parse_or();
        while (is_name("if")) {
            next();
            auto c = node(ExprKind::CondExpr);
            c->items.push_back(parse_or());
            c->items.push_back(std::move(e));
            c->items.push_back(skip_name("else") ? parse_expression(true) : nullptr);
            e = std::move(c);
        }
        return e;
    }

    ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r) {
        auto b = node(ExprKind::Binary);
        b->name = op;
        b->items.push_back(std::move(l));
        b->items.push_back(std::move(r));
        return b;
    }

    ExprPtr parse_or() {
        ExprPtr e = parse_and();
        while (skip_name("or")) e = binary("or", std::move(e), parse_and());
        return e;
    }
    ExprPtr parse_and() {
        ExprPtr e = parse_not();
        while (skip_name("and")) e = binary("and", std::move(e), parse_not());
        return e;
    }
    ExprPtr parse_not() {
        if (is_name("not")) {
            auto u = node(ExprKind::Unary);
            next();
            u->name = "not";
            DepthGuard g(*this);
            u->items.push_back(parse_not());
            return u;
        }
        return parse_compare();
    }
    ExprPtr parse_compare() {
        ExprPtr first = parse_math1();
        auto c = node(ExprKind::Compare);
        for (;;) {
            std::string op;
            if (cur().kind == Tok::Op &&
                (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
                 cur().text == ">" || cur().text == ">=")) {
                op = cur().text;
                next();
            } else if (skip_name("in")) {
                op = "in";
            } else if (is_name("not") && peek().kind == Tok::Name && peek().text == "in") {
                next();
                next();
                op = "notin";
            } else {
                break;
            }
            c->kwargs.emplace_back(op, parse_math1());
        }
        if (c->kwargs.empty()) return first;
        c->items.push_back(std::move(first));
        return c;
    }
    ExprPtr parse_math1() {
        ExprPtr e = parse_concat();
        while (is_op("+") || is_op("-")) {
            const std::string op = cur().text;
            next();
            e = binary(op, std::move(e), parse_concat());
        }
        return e;
    }
    ExprPtr parse_concat() {
        ExprPtr e = parse_math2();
        while (skip_op("~")) e = binary("~", std::move(e), parse_math2());
        return e;
    }
    ExprPtr parse_math2() {
        ExprPtr e = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const std::string op = cur().text;
            next();
            e = binary(op, std::move(e), parse_pow());
        }
        return e;
    }
    ExprPtr parse_pow() {
        ExprPtr e = parse_unary(true);
        while (skip_op("**")) e = binary("**", std::move(e), parse_unary(true));
        return e;
    }
    ExprPtr parse_unary(bool with_filter) {
        DepthGuard g(*this);
        ExprPtr e;
        if (is_op("-") || is_op("+")) {
            auto u = node(ExprKind::Unary);
            u->name = cur().text;
            next();
            u->items.push_back(parse_unary(false));
            e = std::move(u);
        } else {
            e = parse_postfix(parse_primary());
        }
        if (with_filter) e = parse_filter_expr(std::move(e));
        return e;
    }

    ExprPtr parse_primary() {
        const Token& tk = cur();
        if (tk.kind == Tok::Name) {
            auto e = node(ExprKind::Literal);
            if (tk.text == "true" || tk.text == "True") {
                e->value = Value::boolean(true);
            } else if (tk.text == "false" || tk.text == "False") {
                e->value = Value::boolean(false);
            } else if (tk.text == "none" || tk.text == "None") {
                e->value = Value::none();
            } else {
                e->kind = ExprKind::Name;
                e->name = tk.text;
            }
            next();
            return e;
        }
        if (tk.kind == Tok::String) {
            auto e = node(ExprKind::Literal);
            std::string s;
            while (cur().kind == Tok::String) {  // adjacent literals concatenate
                s += cur().text;
                next();
            }
            e->value = Value::string(std::move(s));
            return e;
        }
        if (tk.kind == Tok::Int || tk.kind == Tok::Float) {
            auto e = node(ExprKind::Literal);
            e->value = tk.kind == Tok::Int ? Value::integer(std::stoll(tk.text)) : Value::number(std::stod(tk.text));
            next();
            return e;
        }
        if (skip_op("(")) {
            ExprPtr e = parse_tuple(true, false, true);
            expect_op(")");
            return e;
        }
        if (is_op("[")) {
            auto e = node(ExprKind::List);
            next();
            while (!is_op("]")) {
                if (!e->items.empty()) expect_op(",");
                if (is_op("]")) break;
                e->items.push_back(parse_expression(true));
            }
            next();
            return e;
        }
        if (is_op("{")) {
            auto e = node(ExprKind::Dict);
            next();
            while (!is_op("}")) {
                if (!e->items.empty()) expect_op(",");
                if (is_op("}")) break;
                e->items.push_back(parse_expression(true));
                expect_op(":");
                e->items.push_back(parse_expression(true));
            }
            next();
            return e;
        }
        fail("unexpected " + describe(tk) + " in an expression");
    }

    ExprPtr parse_postfix(ExprPtr e) {
        for (;;) {
            if (is_op(".")) {
                next();
                if (cur().kind == Tok::Name) {
                    auto a = node(ExprKind::Attr);
                    a->name = cur().text;
                    next();
                    a->items.push_back(std::move(e));
                    e = std::move(a);
                } else if (cur().kind == Tok::Int) {
                    auto a = node(ExprKind::Subscript);
                    a->items.push_back(std::move(e));
                    auto idx = node(ExprKind::Literal);
                    idx->value = Value::integer(std::stoll(cur().text));
                    next();
                    a->items.push_back(std::move(idx));
                    e = std::move(a);
                } else {
                    fail("expected an attribute name after '.', got " + describe(cur()));
                }
            } else if (is_op("[")) {
                next();
                e = parse_subscript(std::move(e));
            } else if (is_op("(")) {
                e = parse_call(std::move(e));
            } else {
                return e;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr target) {
        ExprPtr parts[3];
        bool slice = false;
        int k = 0;
        for (;;) {
            if (is_op("]")) break;
            if (is_op(":")) {
                next();
                slice = true;
                if (++k > 2) fail("a slice has at most three parts");
                continue;
            }
            if (parts[k]) fail("expected ':' or ']' in a subscript, got " + describe(cur()));
            parts[k] = parse_expression(true);
        }
        next();
        auto e = node(slice ? ExprKind::Slice : ExprKind::Subscript);
        e->items.push_back(std::move(target));
        if (!slice) {
            if (!parts[0]) fail("empty subscript '[]'");
            e->items.push_back(std::move(parts[0]));
        } else {
            for (auto& p : parts) e->items.push_back(std::move(p));
        }
        return e;
    }

    void parse_call_args(Expr& e) {
        expect_op("(");
        bool any = false;
        while (!is_op(")")) {
            if (any) expect_op(",");
            if (is_op(")")) break;
            if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
            if (cur().kind == Tok::Name && peek().kind == Tok::Op && peek().text == "=") {
                std::string k = cur().text;
                next();
                next();
                e.kwargs.emplace_back(std::move(k), parse_expression(true));
            } else {
                if (!e.kwargs.empty()) fail("positional argument after keyword argument");
                e.items.push_back(parse_expression(true));
            }
            any = true;
        }
        next();
    }

    ExprPtr parse_call(ExprPtr fn) {
        auto c = node(ExprKind::Call);
        c->items.push_back(std::move(fn));
        parse_call_args(*c);
        return c;
    }

    // A filter chain applied to a block's output (the filtered value is null).
    ExprPtr parse_filter_chain() {
        ExprPtr e = parse_one_filter(nullptr);
        while (skip_op("|")) e = parse_one_filter(std::move(e));
        return e;
    }
    ExprPtr parse_one_filter(ExprPtr target) {
        auto f = node(ExprKind::Filter);
        f->name = expect_name();
        while (skip_op(".")) f->name += "." + expect_name();
        f->items.push_back(std::move(target));
        if (is_op("(")) parse_call_args(*f);
        return f;
    }

    ExprPtr parse_filter_expr(ExprPtr e) {
        for (;;) {
            if (is_op("|")) {
                next();
                e = parse_one_filter(std::move(e));
            } else if (is_name("is")) {
                next();
                auto t = node(ExprKind::Test);
                t->negate = skip_name("not");
                t->name = expect_name();
                while (skip_op(".")) t->name += "." + expect_name();
                t->items.push_back(std::move(e));
                const Token& a = cur();
                if (is_op("(")) {
                    parse_call_args(*t);
                } else if ((a.kind == Tok::Name || a.kind == Tok::String || a.kind == Tok::Int ||
                            a.kind == Tok::Float || is_op("[") || is_op("{")) &&
                           !(a.kind == Tok::Name && (a.text == "else" || a.text == "or" || a.text == "and"))) {
                    if (is_name("is")) fail("tests cannot be chained with 'is'");
                    t->items.push_back(parse_postfix(parse_primary()));
                }
                e = std::move(t);
            } else if (is_op("(")) {
                e = parse_call(std::move(e));
            } else {
                return e;
            }
        }
    }

    std::vector<Token> t_;
    size_t p_ = 0;
    int depth_ = 0;
};

}  // namespace

Body parse(const std::string& source) { return Parser(lex(source)).parse_template(); }

}  // namespace specdec::io::jinja
