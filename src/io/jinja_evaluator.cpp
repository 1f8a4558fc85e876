#include "io/jinja_evaluator.h"

#include <climits>
#include <cmath>

#include "io/jinja_builtins.h"

namespace specdec::io::jinja {
namespace {

[[noreturn]] void raise_undefined(const Value& v) {
    throw TemplateError(v.s.empty() ? "undefined value used" : v.s);
}

[[noreturn]] void type_error(const std::string& op, const Value& a, const Value& b) {
    throw TemplateError("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) +
                        "'");
}

int64_t as_int(const Value& v) { return v.kind == Kind::Bool ? int64_t(v.b) : v.i; }

bool is_int(const Value& v) { return v.kind == Kind::Int || v.kind == Kind::Bool; }

int64_t add(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) throw TemplateError("integer overflow");
    return r;
}
int64_t sub(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_sub_overflow(a, b, &r)) throw TemplateError("integer overflow");
    return r;
}
int64_t mul(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) throw TemplateError("integer overflow");
    return r;
}

// Python's floor division and modulo on integers.
int64_t floordiv(int64_t a, int64_t b) {
    if (b == 0) throw TemplateError("integer division or modulo by zero");
    if (a == INT64_MIN && b == -1) throw TemplateError("integer overflow");
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}
int64_t pymod(int64_t a, int64_t b) {
    if (b == 0) throw TemplateError("integer division or modulo by zero");
    if (b == -1) return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}
double pyfmod(double a, double b) {
    if (b == 0) throw TemplateError("float modulo");
    double r = std::fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

// Python slice bounds for a sequence of n items.
std::vector<size_t> slice_indices(int64_t n, const Value& start, const Value& stop, const Value& step) {
    auto opt = [](const Value& v, const char* what) -> std::optional<int64_t> {
        if (v.is_none() || v.is_undefined()) return std::nullopt;
        if (!is_int(v)) throw TemplateError(std::string("slice ") + what + " must be an integer or None");
        return as_int(v);
    };
    const int64_t st = opt(step, "step").value_or(1);
    if (st == 0) throw TemplateError("slice step cannot be zero");
    auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
        if (!v) return dflt;
        int64_t x = *v;
        if (x < 0) x += n;
        if (st > 0) return std::clamp<int64_t>(x, 0, n);
        return std::clamp<int64_t>(x, -1, n - 1);
    };
    const int64_t a = clamp(opt(start, "start"), st > 0 ? 0 : n - 1);
    const int64_t b = clamp(opt(stop, "stop"), st > 0 ? n : -1);
    std::vector<size_t> idx;
    for (int64_t k = a; st > 0 ? k < b : k > b; k += st) idx.push_back(size_t(k));
    return idx;
}

}  // namespace

Value* Scope::find(const std::string& name) {
    for (Scope* s = this; s; s = s->parent.get()) {
        auto it = s->vars.find(name);
        if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
}

Evaluator::Evaluator(const Limits& limits, std::unordered_map<std::string, Value> globals)
    : limits_(limits), root_(std::make_shared<Scope>()) {
    auto g = std::make_shared<Scope>();
    add_builtin_globals(g->vars, *this);
    for (auto& [k, v] : globals) g->vars[k] = std::move(v);
    root_->parent = g;
}

Evaluator::~Evaluator() {
    for (const auto& c : closures_) {
        for (Scope* s = c.get(); s; s = s->parent.get()) {
            auto vars = std::move(s->vars);
            s->vars.clear();
        }
    }
    for (const auto& ns : namespaces_) {
        auto items = std::move(ns->items);
        ns->items.clear();
    }
}

std::string Evaluator::render(const Body& body) {
    std::string out;
    exec_body(body, root_, out);
    return out;
}

void Evaluator::check_size(size_t bytes) {
    // Producing bytes is work too: a long string costs steps, so that a
    // template cannot spend its step budget copying megabytes each step.
    steps_ += bytes / 64;
    if (steps_ > limits_.max_steps) step();
    if (bytes > limits_.max_output)
        throw TemplateError("a value or the output exceeds the limit of " + std::to_string(limits_.max_output) +
                            " bytes");
}

void Evaluator::step() {
    if (++steps_ > limits_.max_steps)
        throw TemplateError("template evaluation exceeded the limit of " + std::to_string(limits_.max_steps) +
                            " steps");
}

void Evaluator::append(std::string& out, const std::string& s) {
    if (out.size() + s.size() > limits_.max_output) check_size(out.size() + s.size());
    check_size(s.size());
    out += s;
}

Evaluator::Flow Evaluator::exec_body(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out) {
    for (const StmtPtr& s : body) {
        const Flow f = exec(*s, scope, out);
        if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
}

Evaluator::Flow Evaluator::exec(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
    step();
    switch (s.kind) {
        case StmtKind::Text: append(out, s.text); break;
        case StmtKind::Output: append(out, to_str(eval(*s.expr, scope))); break;
        case StmtKind::If:
            return exec_body(truthy(eval(*s.expr, scope)) ? s.body : s.orelse, scope, out);
        case StmtKind::For: exec_for(s, scope, out); break;
        case StmtKind::Set:
        case StmtKind::SetBlock: exec_set(s, scope, out); break;
        case StmtKind::Macro: scope->vars[s.text] = make_macro(s, scope); break;
        case StmtKind::CallBlock: {
            // caller() renders the block body with the call block's parameters.
            Stmt* self = const_cast<Stmt*>(&s);
            closures_.push_back(scope);
            Value caller = Value::function("caller", [this, self, scope](CallArgs& a) {
                auto sc = std::make_shared<Scope>();
                sc->parent = scope;
                for (size_t k = 0; k < self->params.size(); ++k) {
                    const Value* v = a.get(k, self->params[k].name);
                    sc->vars[self->params[k].name] =
                        v ? *v : self->params[k].default_value ? eval(*self->params[k].default_value, sc)
                                                               : Value::undefined();
                }
                std::string body;
                exec_body(self->body, sc, body);
                return Value::string(std::move(body));
            });
            const Expr& call = *s.expr;
            Value fn = eval(*call.items[0], scope);
            CallArgs args = eval_args(call, 1, scope);
            args.kw.emplace_back("caller", caller);
            append(out, to_str(this->call(fn, args)));
            break;
        }
        case StmtKind::FilterBlock: {
            std::string body;
            exec_body(s.body, scope, body);
            filter_input_ = Value::string(std::move(body));
            append(out, to_str(eval(*s.expr, scope)));
            break;
        }
        case StmtKind::Break: return Flow::Break;
        case StmtKind::Continue: return Flow::Continue;
        case StmtKind::Generation: return exec_body(s.body, scope, out);
    }
    return Flow::Normal;
}

std::vector<Value> Evaluator::iterate(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined: return {};
        case Kind::Array: return v.arr->items;
        case Kind::Object: {
            if (v.obj->is_namespace) break;
            std::vector<Value> keys;
            for (const auto& kv : v.obj->items) keys.push_back(kv.first);
            return keys;
        }
        case Kind::String: {
            std::vector<Value> chars;
            const std::vector<size_t> off = cp_offsets(v.s);
            for (size_t k = 0; k + 1 < off.size(); ++k) chars.push_back(Value::string(v.s.substr(off[k], off[k + 1] - off[k])));
            return chars;
        }
        default: break;
    }
    throw TemplateError("'" + type_name(v) + "' object is not iterable");
}

void Evaluator::bind_targets(Scope& sc, const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) {
        sc.vars[targets[0]] = v;
        return;
    }
    std::vector<Value> parts = iterate(v);
    if (parts.size() != targets.size())
        throw TemplateError("cannot unpack " + std::to_string(parts.size()) + " values into " +
                            std::to_string(targets.size()) + " names");
    for (size_t k = 0; k < targets.size(); ++k) sc.vars[targets[k]] = parts[k];
}

void Evaluator::exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
    if (s.recursive) throw TemplateError("recursive for loops are not supported");
    std::vector<Value> items = iterate(eval(*s.expr, scope));
    if (s.cond) {  // for x in xs if cond: filtered before the loop, so loop.length counts what is kept
        std::vector<Value> kept;
        for (Value& v : items) {
            auto sc = std::make_shared<Scope>();
            sc->parent = scope;
            bind_targets(*sc, s.targets, v);
            if (truthy(eval(*s.cond, sc))) kept.push_back(std::move(v));
        }
        items = std::move(kept);
    }
    // One loop object for the whole loop, updated in place (jinja2's
    // LoopContext is one object too); each iteration gets a fresh scope.
    const auto n = int64_t(items.size());
    auto index = std::make_shared<int64_t>(0);
    Value loop = Value::object();
    Object& o = *loop.obj;
    static const char* const keys[] = {"index", "index0", "revindex", "revindex0", "first", "last",
                                       "length", "depth", "depth0", "previtem", "nextitem"};
    for (const char* key : keys) o.items.emplace_back(Value::string(key), Value());
    o.set("cycle", Value::function("loop.cycle", [index](CallArgs& a) {
        if (a.pos.empty()) throw TemplateError("no items for cycling given");
        return a.pos[size_t(*index) % a.pos.size()];
    }));
    for (int64_t k = 0; k < n; ++k) {
        step();
        *index = k;
        auto sc = std::make_shared<Scope>();
        sc->parent = scope;
        bind_targets(*sc, s.targets, items[size_t(k)]);
        auto& f = o.items;
        f[0].second = Value::integer(k + 1);
        f[1].second = Value::integer(k);
        f[2].second = Value::integer(n - k);
        f[3].second = Value::integer(n - k - 1);
        f[4].second = Value::boolean(k == 0);
        f[5].second = Value::boolean(k == n - 1);
        f[6].second = Value::integer(n);
        f[7].second = Value::integer(1);
        f[8].second = Value::integer(0);
        f[9].second = k > 0 ? items[size_t(k - 1)] : Value::undefined("there is no previous item");
        f[10].second = k + 1 < n ? items[size_t(k + 1)] : Value::undefined("there is no next item");
        sc->vars.emplace("loop", loop);
        if (exec_body(s.body, sc, out) == Flow::Break) break;
    }
    if (n == 0) exec_body(s.orelse, scope, out);
}

void Evaluator::exec_set(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
    (void)out;
    Value v;
    if (s.kind == StmtKind::SetBlock) {
        std::string body;
        exec_body(s.body, scope, body);
        v = Value::string(std::move(body));
        if (s.cond) {
            filter_input_ = v;
            v = eval(*s.cond, scope);
        }
    } else {
        v = eval(*s.expr, scope);
    }
    if (!s.text.empty()) {  // set ns.attr = v
        Value* ns = scope->find(s.targets[0]);
        if (!ns || !ns->is_object() || !ns->obj->is_namespace)
            throw TemplateError("cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
        ns->obj->set(s.text, std::move(v));
        return;
    }
    bind_targets(*scope, s.targets, v);
}

Value Evaluator::make_macro(const Stmt& s, const std::shared_ptr<Scope>& scope) {
    const Stmt* self = &s;
    closures_.push_back(scope);
    return Value::function(s.text, [this, self, scope](CallArgs& a) {
        if (a.pos.size() > self->params.size())
            throw TemplateError("macro '" + self->text + "' takes not more than " +
                                std::to_string(self->params.size()) + " argument(s)");
        if (++depth_ > limits_.max_call_depth) {
            --depth_;
            throw TemplateError("macro calls nested deeper than " + std::to_string(limits_.max_call_depth));
        }
        struct Restore {
            int& d;
            ~Restore() { --d; }
        } restore{depth_};
        auto sc = std::make_shared<Scope>();
        sc->parent = scope;
        for (const auto& [k, v] : a.kw) {
            bool known = k == "caller";
            for (const Param& p : self->params) known = known || p.name == k;
            if (!known) throw TemplateError("macro '" + self->text + "' takes no keyword argument '" + k + "'");
        }
        for (size_t k = 0; k < self->params.size(); ++k) {
            const Param& p = self->params[k];
            const Value* v = a.get(k, p.name);
            sc->vars[p.name] = v ? *v : p.default_value ? eval(*p.default_value, sc) : Value::undefined("parameter '" + p.name + "' was not provided");
        }
        for (const auto& [k, v] : a.kw)
            if (k == "caller") sc->vars["caller"] = v;
        std::string body;
        exec_body(self->body, sc, body);
        return Value::string(std::move(body));
    });
}

Value Evaluator::call(const Value& fn, CallArgs& args) {
    if (fn.is_undefined()) raise_undefined(fn);
    if (fn.kind != Kind::Function) throw TemplateError("'" + type_name(fn) + "' object is not callable");
    return fn.fn->call(args);
}

CallArgs Evaluator::eval_args(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope) {
    CallArgs a;
    for (size_t k = first; k < e.items.size(); ++k) a.pos.push_back(eval(*e.items[k], scope));
    for (const auto& [name, x] : e.kwargs) a.kw.emplace_back(name, eval(*x, scope));
    return a;
}

Value Evaluator::apply_filter(const std::string& name, const Value& target, CallArgs& args) {
    return call_filter(*this, name, target, args);
}

bool Evaluator::apply_test(const std::string& name, const Value& v, CallArgs& args) {
    return call_test(*this, name, v, args);
}

Value Evaluator::eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
    step();
    try {
        Value v = eval_inner(e, scope);
        // Every string value is copied and built: its bytes are work (and a
        // method such as upper() on a long string is not otherwise charged).
        if (v.kind == Kind::String && v.s.size() >= 64) check_size(v.s.size());
        return v;
    } catch (const TemplateError& err) {
        const std::string msg = err.what();
        if (msg.rfind("chat template line ", 0) == 0) throw;
        throw TemplateError("chat template line " + std::to_string(e.line) + ": " + msg);
    }
}

Value Evaluator::eval_inner(const Expr& e, const std::shared_ptr<Scope>& scope) {
    switch (e.kind) {
        case ExprKind::Literal: return e.value;
        case ExprKind::Name: {
            if (Value* v = scope->find(e.name)) return *v;
            return Value::undefined("'" + e.name + "' is undefined");
        }
        case ExprKind::List:
        case ExprKind::Tuple: {
            std::vector<Value> items;
            for (const ExprPtr& x : e.items) items.push_back(eval(*x, scope));
            return Value::array(std::move(items), e.kind == ExprKind::Tuple);
        }
        case ExprKind::Dict: {
            Value d = Value::object();
            for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
                Value key = eval(*e.items[k], scope);
                if (key.is_array() || key.is_object() || key.is_undefined())
                    throw TemplateError("unhashable type: '" + type_name(key) + "'");
                d.obj->set(std::move(key), eval(*e.items[k + 1], scope));
            }
            return d;
        }
        case ExprKind::Attr: return get_attr(eval(*e.items[0], scope), e.name);
        case ExprKind::Subscript: return get_item(eval(*e.items[0], scope), eval(*e.items[1], scope));
        case ExprKind::Slice: {
            Value t = eval(*e.items[0], scope);
            Value parts[3];
            for (int k = 0; k < 3; ++k) parts[k] = e.items[size_t(k) + 1] ? eval(*e.items[size_t(k) + 1], scope) : Value::none();
            if (t.is_undefined()) raise_undefined(t);
            if (t.is_string()) {
                const std::vector<size_t> off = cp_offsets(t.s);
                std::string r;
                for (size_t k : slice_indices(int64_t(off.size() - 1), parts[0], parts[1], parts[2]))
                    r.append(t.s, off[k], off[k + 1] - off[k]);
                return Value::string(std::move(r));
            }
            if (t.is_array()) {
                std::vector<Value> r;
                for (size_t k : slice_indices(int64_t(t.arr->items.size()), parts[0], parts[1], parts[2]))
                    r.push_back(t.arr->items[k]);
                return Value::array(std::move(r), t.arr->tuple);
            }
            throw TemplateError("'" + type_name(t) + "' object is not subscriptable");
        }
        case ExprKind::Call: {
            Value fn = eval(*e.items[0], scope);
            CallArgs args = eval_args(e, 1, scope);
            return call(fn, args);
        }
        case ExprKind::Filter: {
            Value target = e.items[0] ? eval(*e.items[0], scope) : filter_input_;
            CallArgs args = eval_args(e, 1, scope);
            return apply_filter(e.name, target, args);
        }
        case ExprKind::Test: {
            Value v = eval(*e.items[0], scope);
            CallArgs args = eval_args(e, 1, scope);
            return Value::boolean(apply_test(e.name, v, args) != e.negate);
        }
        case ExprKind::Unary: {
            Value v = eval(*e.items[0], scope);
            if (e.name == "not") return Value::boolean(!truthy(v));
            if (v.is_undefined()) raise_undefined(v);
            if (!v.is_number()) throw TemplateError("bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
            if (e.name == "+") return v.kind == Kind::Bool ? Value::integer(v.b) : v;
            if (v.kind == Kind::Float) return Value::number(-v.f);
            return Value::integer(sub(int64_t(0), as_int(v)));
        }
        case ExprKind::Binary: return eval_binary(e, scope);
        case ExprKind::Compare: return eval_compare(e, scope);
        case ExprKind::CondExpr:
            if (truthy(eval(*e.items[0], scope))) return eval(*e.items[1], scope);
            return e.items[2] ? eval(*e.items[2], scope) : Value::undefined("the conditional expression had no else");
    }
    return Value::undefined();
}

Value Evaluator::eval_binary(const Expr& e, const std::shared_ptr<Scope>& scope) {
    const std::string& op = e.name;
    Value a = eval(*e.items[0], scope);
    if (op == "and") return truthy(a) ? eval(*e.items[1], scope) : a;
    if (op == "or") return truthy(a) ? a : eval(*e.items[1], scope);
    Value b = eval(*e.items[1], scope);
    if (op == "~") {
        std::string sa = to_str(a), sb = to_str(b);
        check_size(sa.size() + sb.size());
        return Value::string(sa + sb);
    }
    if (a.is_undefined()) raise_undefined(a);
    if (b.is_undefined()) raise_undefined(b);
    const bool ints = is_int(a) && is_int(b), nums = a.is_number() && b.is_number();
    const int64_t x = as_int(a), y = as_int(b);
    if (op == "+") {
        if (ints) return Value::integer(add(x, y));
        if (nums) return Value::number(a.as_double() + b.as_double());
        if (a.is_string() && b.is_string()) {
            check_size(a.s.size() + b.s.size());
            if (!a.markup && !b.markup) return Value::string(a.s + b.s);
            // markupsafe: Markup + str (either order) escapes the plain str
            Value r = Value::string((a.markup ? a.s : html_escape(a.s)) + (b.markup ? b.s : html_escape(b.s)));
            r.markup = true;
            check_size(r.s.size());
            return r;
        }
        if (a.is_array() && b.is_array() && a.arr->tuple == b.arr->tuple) {
            std::vector<Value> items = a.arr->items;
            items.insert(items.end(), b.arr->items.begin(), b.arr->items.end());
            check_size(items.size());
            return Value::array(std::move(items), a.arr->tuple);
        }
        if (a.is_string()) throw TemplateError("can only concatenate str (not \"" + type_name(b) + "\") to str");
        type_error("+", a, b);
    }
    if (op == "-") {
        if (ints) return Value::integer(sub(x, y));
        if (nums) return Value::number(a.as_double() - b.as_double());
        type_error("-", a, b);
    }
    if (op == "*") {
        if (ints) return Value::integer(mul(x, y));
        if (nums) return Value::number(a.as_double() * b.as_double());
        const Value& seq = is_int(a) ? b : a;
        const Value& cnt = is_int(a) ? a : b;
        if (is_int(cnt) && (seq.is_string() || seq.is_array())) {
            const int64_t n = std::max<int64_t>(0, as_int(cnt));
            const size_t unit = seq.is_string() ? seq.s.size() : seq.arr->items.size();
            if (unit && uint64_t(n) > limits_.max_output / unit) check_size(limits_.max_output + 1);
            check_size(size_t(n) * unit);
            if (seq.is_string()) {
                std::string s;
                for (int64_t k = 0; k < n; ++k) s += seq.s;
                return Value::string(std::move(s));
            }
            std::vector<Value> items;
            for (int64_t k = 0; k < n; ++k) items.insert(items.end(), seq.arr->items.begin(), seq.arr->items.end());
            return Value::array(std::move(items), seq.arr->tuple);
        }
        type_error("*", a, b);
    }
    if (op == "/") {
        if (!nums) type_error("/", a, b);
        if (b.as_double() == 0) throw TemplateError("division by zero");
        return Value::number(a.as_double() / b.as_double());
    }
    if (op == "//") {
        if (ints) return Value::integer(floordiv(x, y));
        if (!nums) type_error("//", a, b);
        if (b.as_double() == 0) throw TemplateError("float floor division by zero");
        return Value::number(std::floor(a.as_double() / b.as_double()));
    }
    if (op == "%") {
        if (ints) return Value::integer(pymod(x, y));
        if (nums) return Value::number(pyfmod(a.as_double(), b.as_double()));
        if (a.is_string()) return percent_format(a.s, b);
        type_error("%", a, b);
    }
    if (op == "**") {
        if (ints && y >= 0) {
            int64_t acc = 1;
            for (int64_t k = 0; k < y; ++k) {
                if (__builtin_mul_overflow(acc, x, &acc)) throw TemplateError("integer overflow");
                if (acc == 0 || acc == 1) break;
            }
            return Value::integer(acc);
        }
        if (nums) return Value::number(std::pow(a.as_double(), b.as_double()));
        type_error("** or pow()", a, b);
    }
    throw TemplateError("unknown operator '" + op + "'");
}

Value Evaluator::eval_compare(const Expr& e, const std::shared_ptr<Scope>& scope) {
    Value left = eval(*e.items[0], scope);
    for (const auto& [op, rhs] : e.kwargs) {
        Value right = eval(*rhs, scope);
        bool ok;
        if (op == "==") {
            ok = equals(left, right);
        } else if (op == "!=") {
            ok = !equals(left, right);
        } else if (op == "in" || op == "notin") {
            ok = contains(right, left) == (op == "in");
        } else {
            if (left.is_undefined()) raise_undefined(left);
            if (right.is_undefined()) raise_undefined(right);
            if (op == "<") ok = less(left, right);
            else if (op == ">") ok = less(right, left);
            else if (op == "<=") ok = less(left, right) || equals(left, right);
            else ok = less(right, left) || equals(left, right);
        }
        if (!ok) return Value::boolean(false);
        left = std::move(right);
    }
    return Value::boolean(true);
}

Value get_attr(const Value& obj, const std::string& name) {
    if (obj.is_undefined()) raise_undefined(obj);
    if (Value m = bound_method(obj, name); !m.is_undefined() || !m.s.empty()) return m;
    if (obj.is_object()) {
        if (const Value* v = obj.obj->find(name)) return *v;
    }
    return Value::undefined("'" + type_name(obj) + " object' has no attribute '" + name + "'");
}

Value get_item(const Value& obj, const Value& key) {
    if (obj.is_undefined()) raise_undefined(obj);
    if ((obj.is_array() || obj.is_string()) && is_int(key)) {
        const int64_t n = obj.is_array() ? int64_t(obj.arr->items.size()) : int64_t(cp_length(obj.s));
        int64_t k = as_int(key);
        if (k < 0) k += n;
        if (k < 0 || k >= n)
            return Value::undefined("'" + type_name(obj) + " object' has no element " + std::to_string(as_int(key)));
        if (obj.is_array()) return obj.arr->items[size_t(k)];
        const std::vector<size_t> off = cp_offsets(obj.s);
        return Value::string(obj.s.substr(off[size_t(k)], off[size_t(k) + 1] - off[size_t(k)]));
    }
    if (obj.is_object() && !obj.obj->is_namespace) {
        if (const Value* v = obj.obj->find(key)) return *v;
    }
    if (key.is_string()) return get_attr(obj, key.s);
    return Value::undefined("'" + type_name(obj) + " object' has no element " + repr(key));
}

bool contains(const Value& container, const Value& item) {
    switch (container.kind) {
        case Kind::Undefined: return false;
        case Kind::String:
            if (!item.is_string())
                throw TemplateError("'in <string>' requires string as left operand, not " + type_name(item));
            return container.s.find(item.s) != std::string::npos;
        case Kind::Array:
            for (const Value& v : container.arr->items)
                if (equals(v, item)) return true;
            return false;
        case Kind::Object:
            if (container.obj->is_namespace) break;
            return container.obj->find(item) != nullptr;
        default: break;
    }
    throw TemplateError("argument of type '" + type_name(container) + "' is not iterable");
}

}  // namespace specdec::io::jinja
