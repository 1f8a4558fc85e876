// jinja2's filters and tests, and Hugging Face's tojson.
#include <algorithm>
#include <cmath>
#include <set>

#include "io/jinja_builtins.h"
#include "io/jinja_evaluator.h"

namespace specdec::io::jinja {
namespace {

Value generator(std::vector<Value> items) {
    Value v = Value::array(std::move(items));
    v.arr->generator = true;
    return v;
}

const Value* arg(const CallArgs& a, size_t i, const char* name) { return a.get(i, name); }

bool arg_bool(const CallArgs& a, size_t i, const char* name, bool dflt) {
    const Value* v = a.get(i, name);
    return v ? truthy(*v) : dflt;
}

std::string arg_string(const CallArgs& a, size_t i, const char* name, const std::string& dflt) {
    const Value* v = a.get(i, name);
    return v ? to_str(*v) : dflt;
}

size_t py_len(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined: return 0;
        case Kind::String: return cp_length(v.s);
        case Kind::Array:
            if (v.arr->generator) break;
            return v.arr->items.size();
        case Kind::Object:
            if (v.obj->is_namespace) break;
            return v.obj->items.size();
        default: break;
    }
    throw TemplateError("object of type '" + type_name(v) + "' has no len()");
}

// jinja2's make_attrgetter: "a.b" or "0" walks attributes / items.
Value attr_path(const Value& v, const std::string& path) {
    Value cur = v;
    size_t at = 0;
    while (at <= path.size()) {
        const size_t dot = std::min(path.find('.', at), path.size());
        const std::string part = path.substr(at, dot - at);
        const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
        cur = get_item(cur, digits ? Value::integer(std::stoll(part)) : Value::string(part));
        at = dot + 1;
    }
    return cur;
}

Value attribute_or_self(const Value& v, const Value* attribute) {
    if (!attribute || attribute->is_none()) return v;
    return attr_path(v, to_str(*attribute));
}

// Sort key: strings lowered unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
    if (!case_sensitive && v.is_string()) return Value::string(py_lower(v.s));
    return v;
}

}  // namespace

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&#34;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

namespace {

// Hugging Face's tojson: json.dumps(x, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False).
Value hf_tojson(const Value& v, const CallArgs& a) {
    JsonOptions o;
    o.ensure_ascii = arg_bool(a, 0, "ensure_ascii", false);
    if (const Value* ind = arg(a, 1, "indent"); ind && !ind->is_none()) {
        if (ind->kind == Kind::Int) o.indent = std::string(size_t(std::clamp<int64_t>(ind->i, 0, 64)), ' ');
        else if (ind->is_string()) o.indent = ind->s;
        else throw TemplateError("tojson: indent must be an integer or a string");
        o.item_sep = ",";
    }
    if (const Value* sep = arg(a, 2, "separators"); sep && !sep->is_none()) {
        if (!sep->is_array() || sep->arr->items.size() != 2 || !sep->arr->items[0].is_string() ||
            !sep->arr->items[1].is_string())
            throw TemplateError("tojson: separators must be a pair of strings");
        o.item_sep = sep->arr->items[0].s;
        o.key_sep = sep->arr->items[1].s;
    }
    o.sort_keys = arg_bool(a, 3, "sort_keys", false);
    return Value::string(to_json(v, o));
}

Value do_indent(const Value& v, const CallArgs& a) {
    const Value* w = arg(a, 0, "width");
    std::string ind = !w ? "    " : w->is_string() ? w->s : std::string(size_t(std::clamp<int64_t>(w->is_number() ? int64_t(w->as_double()) : 4, 0, 1 << 16)), ' ');
    const bool first = arg_bool(a, 1, "first", false), blank = arg_bool(a, 2, "blank", false);
    const std::vector<std::string> lines = py_splitlines(to_str(v) + "\n");
    std::string rv;
    if (blank) {
        for (size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + ind : "") + lines[k];
    } else {
        rv = lines.empty() ? "" : lines[0];
        for (size_t k = 1; k < lines.size(); ++k) rv += "\n" + (lines[k].empty() ? "" : ind + lines[k]);
    }
    return Value::string(first ? ind + rv : rv);
}

Value do_int(const Value& v, const CallArgs& a) {
    const Value* dv = arg(a, 0, "default");
    const Value dflt = dv ? *dv : Value::integer(0);
    const int64_t base = [&] {
        const Value* b = arg(a, 1, "base");
        return b && b->kind == Kind::Int ? b->i : 10;
    }();
    switch (v.kind) {
        case Kind::Int: return v;
        case Kind::Bool: return Value::integer(v.b);
        case Kind::Float:
            if (std::isfinite(v.f) && std::fabs(v.f) < 9.2e18) return Value::integer(int64_t(v.f));
            return dflt;
        case Kind::String: {
            const std::string t = py_strip(v.s, nullptr, true, true);
            std::string digits;
            for (char c : t)
                if (c != '_') digits += c;
            try {
                size_t used = 0;
                const long long r = std::stoll(digits, &used, int(base));
                if (used == digits.size() && !digits.empty()) return Value::integer(r);
            } catch (...) {
            }
            try {
                size_t used = 0;
                const double d = std::stod(digits, &used);
                if (used == digits.size() && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value::integer(int64_t(d));
            } catch (...) {
            }
            return dflt;
        }
        default: return dflt;
    }
}

Value do_float(const Value& v, const CallArgs& a) {
    const Value* dv = arg(a, 0, "default");
    const Value dflt = dv ? *dv : Value::number(0);
    if (v.is_number()) return Value::number(v.as_double());
    if (v.is_string()) {
        try {
            size_t used = 0;
            const std::string t = py_strip(v.s, nullptr, true, true);
            const double d = std::stod(t, &used);
            if (used == t.size()) return Value::number(d);
        } catch (...) {
        }
    }
    return dflt;
}

std::vector<Value> select_items(Evaluator& ev, const Value& v, const CallArgs& a, bool attr, bool keep) {
    std::vector<Value> out;
    std::string attribute, test;
    size_t rest = 0;
    if (attr) {
        const Value* at = arg(a, 0, "attribute");
        if (!at) throw TemplateError("selectattr/rejectattr need an attribute name");
        attribute = to_str(*at);
        rest = 1;
    }
    const bool has_test = a.pos.size() > rest;
    if (has_test) test = to_str(a.pos[rest]);
    CallArgs targs;
    for (size_t k = rest + 1; k < a.pos.size(); ++k) targs.pos.push_back(a.pos[k]);
    if (!truthy(v)) return out;  // jinja2: `if seq:` (None selects nothing)
    for (const Value& item : Evaluator::iterate(v)) {
        const Value x = attr ? attr_path(item, attribute) : item;
        const bool t = has_test ? ev.apply_test(test, x, targs) : truthy(x);
        if (t == keep) out.push_back(item);
    }
    return out;
}

Value do_map(Evaluator& ev, const Value& v, CallArgs& a) {
    std::vector<Value> out;
    if (!truthy(v)) return generator({});  // jinja2: `if value:`
    if (a.pos.empty()) {
        const Value* at = arg(a, 99, "attribute");
        if (!at) throw TemplateError("map: no filter name or attribute given");
        const Value* dflt = arg(a, 99, "default");
        for (const Value& item : Evaluator::iterate(v)) {
            Value x = attr_path(item, to_str(*at));
            out.push_back(x.is_undefined() && dflt ? *dflt : x);
        }
        return generator(std::move(out));
    }
    const std::string name = to_str(a.pos[0]);
    CallArgs fargs;
    fargs.pos.assign(a.pos.begin() + 1, a.pos.end());
    fargs.kw = a.kw;
    for (const Value& item : Evaluator::iterate(v)) out.push_back(ev.apply_filter(name, item, fargs));
    return generator(std::move(out));
}

Value do_sort(const Value& v, const CallArgs& a, bool dictsort) {
    if (dictsort) {
        if (!v.is_object()) throw TemplateError("You can only sort by either \"key\" or \"value\" of a dict");
        const bool cs = arg_bool(a, 0, "case_sensitive", false);
        const std::string by = arg_string(a, 1, "by", "key");
        const bool rev = arg_bool(a, 2, "reverse", false);
        std::vector<Value> items;
        for (const auto& [k, x] : v.obj->items) items.push_back(Value::array({k, x}, true));
        const size_t pos = by == "value" ? 1 : 0;
        std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
            const Value kp = sort_key(p.arr->items[pos], cs), kq = sort_key(q.arr->items[pos], cs);
            return rev ? less(kq, kp) : less(kp, kq);
        });
        return Value::array(std::move(items));
    }
    const bool rev = arg_bool(a, 0, "reverse", false), cs = arg_bool(a, 1, "case_sensitive", false);
    const Value* attribute = arg(a, 2, "attribute");
    std::vector<Value> items = Evaluator::iterate(v);
    std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
        const Value kp = sort_key(attribute_or_self(p, attribute), cs), kq = sort_key(attribute_or_self(q, attribute), cs);
        return rev ? less(kq, kp) : less(kp, kq);
    });
    return Value::array(std::move(items));
}

Value do_minmax(const Value& v, const CallArgs& a, bool max) {
    const bool cs = arg_bool(a, 0, "case_sensitive", false);
    const Value* attribute = arg(a, 1, "attribute");
    const std::vector<Value> items = Evaluator::iterate(v);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    for (size_t k = 1; k < items.size(); ++k) {
        const Value kb = sort_key(attribute_or_self(items[best], attribute), cs);
        const Value kk = sort_key(attribute_or_self(items[k], attribute), cs);
        if (max ? less(kb, kk) : less(kk, kb)) best = k;
    }
    return items[best];
}

}  // namespace

bool is_jinja_filter(const std::string& n) {
    static const std::set<std::string> names = {
        "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
        "filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "items", "join",
        "last", "length", "list", "lower", "map", "max", "min", "pprint", "random", "reject", "rejectattr",
        "replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort", "string", "striptags", "sum",
        "title", "tojson", "trim", "truncate", "unique", "upper", "urlencode", "urlize", "wordcount", "wordwrap",
        "xmlattr"};
    return names.count(n) > 0;
}

bool is_jinja_test(const std::string& n) {
    static const std::set<std::string> names = {
        "!=", "<", "<=", "==", ">", ">=", "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped",
        "even", "false", "filter", "float", "ge", "greaterthan", "gt", "in", "integer", "iterable", "le", "lessthan",
        "lower", "lt", "mapping", "ne", "none", "number", "odd", "sameas", "sequence", "string", "test", "true",
        "undefined", "upper"};
    return names.count(n) > 0;
}

Value call_filter(Evaluator& ev, const std::string& n, const Value& v, CallArgs& a) {
    if (n == "tojson") return hf_tojson(v, a);
    if (n == "length" || n == "count") return Value::integer(int64_t(py_len(v)));
    if (n == "trim") return Value::string(py_strip(to_str(v), arg(a, 0, "chars"), true, true));
    if (n == "string") {
        Value r = Value::string(to_str(v));
        r.markup = v.markup;
        return r;
    }
    if (n == "safe") {
        Value r = Value::string(to_str(v));
        r.markup = true;
        return r;
    }
    if (n == "default" || n == "d") {
        const bool boolean = arg_bool(a, 1, "boolean", false);
        if (v.is_undefined() || (boolean && !truthy(v))) {
            const Value* dv = arg(a, 0, "default_value");
            return dv ? *dv : Value::string("");
        }
        return v;
    }
    if (n == "items") {
        if (v.is_undefined()) return generator({});
        if (!v.is_object() || v.obj->is_namespace) throw TemplateError("Can only get item pairs from a mapping.");
        std::vector<Value> out;
        for (const auto& [k, x] : v.obj->items) out.push_back(Value::array({k, x}, true));
        return generator(std::move(out));
    }
    if (n == "join") {
        const std::string sep = arg_string(a, 0, "d", "");
        const Value* attribute = arg(a, 1, "attribute");
        std::string out;
        bool first = true;
        for (const Value& item : Evaluator::iterate(v)) {
            if (!first) out += sep;
            first = false;
            const std::string piece = to_str(attribute_or_self(item, attribute));
            ev.check_size(piece.size() + sep.size());  // charges the work; the total is checked below
            out += piece;
        }
        ev.check_size(out.size());
        return Value::string(std::move(out));
    }
    if (n == "upper") return Value::string(py_upper(to_str(v)));
    if (n == "lower") return Value::string(py_lower(to_str(v)));
    if (n == "title" || n == "capitalize") {
        CallArgs none;
        return ev.call(bound_method(Value::string(to_str(v)), n), none);
    }
    if (n == "replace") {
        CallArgs sa;
        sa.pos = {Value::string(arg_string(a, 0, "old", "")), Value::string(arg_string(a, 1, "new", ""))};
        if (const Value* c = arg(a, 2, "count"); c && !c->is_none()) sa.pos.push_back(*c);
        Value r = ev.call(bound_method(Value::string(to_str(v)), "replace"), sa);
        ev.check_size(r.s.size());
        return r;
    }
    if (n == "list") return Value::array(Evaluator::iterate(v));
    if (n == "first" || n == "last") {
        const std::vector<Value> items = Evaluator::iterate(v);
        if (items.empty()) return Value::undefined("No " + n + " item, sequence was empty.");
        return n == "first" ? items.front() : items.back();
    }
    if (n == "indent") return do_indent(v, a);
    if (n == "int") return do_int(v, a);
    if (n == "float") return do_float(v, a);
    if (n == "abs") {
        if (v.kind == Kind::Float) return Value::number(std::fabs(v.f));
        if (v.kind == Kind::Int || v.kind == Kind::Bool) {
            const int64_t x = v.kind == Kind::Bool ? v.b : v.i;
            if (x == INT64_MIN) throw TemplateError("integer overflow");
            return Value::integer(x < 0 ? -x : x);
        }
        throw TemplateError("bad operand type for abs(): '" + type_name(v) + "'");
    }
    if (n == "map") return do_map(ev, v, a);
    if (n == "select" || n == "reject") return generator(select_items(ev, v, a, false, n == "select"));
    if (n == "selectattr" || n == "rejectattr") return generator(select_items(ev, v, a, true, n == "selectattr"));
    if (n == "sort") return do_sort(v, a, false);
    if (n == "dictsort") return do_sort(v, a, true);
    if (n == "min" || n == "max") return do_minmax(v, a, n == "max");
    if (n == "unique") {
        const bool cs = arg_bool(a, 0, "case_sensitive", false);
        const Value* attribute = arg(a, 1, "attribute");
        std::vector<Value> out, seen;
        for (const Value& item : Evaluator::iterate(v)) {
            const Value key = sort_key(attribute_or_self(item, attribute), cs);
            if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
            seen.push_back(key);
            out.push_back(item);
        }
        return generator(std::move(out));
    }
    if (n == "reverse") {
        if (v.is_string()) {
            const std::vector<size_t> off = cp_offsets(v.s);
            std::string r;
            for (size_t k = off.size() - 1; k > 0; --k) r.append(v.s, off[k - 1], off[k] - off[k - 1]);
            return Value::string(std::move(r));
        }
        std::vector<Value> items = Evaluator::iterate(v);
        std::reverse(items.begin(), items.end());
        return generator(std::move(items));
    }
    if (n == "attr") return get_attr(v, arg_string(a, 0, "name", ""));
    if (n == "escape" || n == "e" || n == "forceescape") {
        Value r = Value::string(v.markup && n != "forceescape" ? v.s : html_escape(to_str(v)));
        r.markup = true;
        return r;
    }
    if (n == "format") {
        std::vector<Value> rest = a.pos;
        return percent_format(to_str(v), rest.size() == 1 ? rest[0] : Value::array(std::move(rest), true));
    }
    if (n == "sum") {
        const Value* attribute = arg(a, 0, "attribute");
        const Value* start = arg(a, 1, "start");
        bool is_float = start && start->kind == Kind::Float;
        double df = start ? start->as_double() : 0;
        int64_t di = start && !is_float ? int64_t(start->as_double()) : 0;
        for (const Value& item : Evaluator::iterate(v)) {
            const Value x = attribute_or_self(item, attribute);
            if (!x.is_number()) throw TemplateError("sum: unsupported operand type '" + type_name(x) + "'");
            if (x.kind == Kind::Float) is_float = true;
            df += x.as_double();
            if (__builtin_add_overflow(di, x.kind == Kind::Float ? 0 : int64_t(x.as_double()), &di))
                throw TemplateError("integer overflow");
        }
        return is_float ? Value::number(df) : Value::integer(di);
    }
    if (n == "round") {
        const Value* p = arg(a, 0, "precision");
        const std::string method = arg_string(a, 1, "method", "common");
        const double scale = std::pow(10.0, p && p->kind == Kind::Int ? double(std::clamp<int64_t>(p->i, -300, 300)) : 0.0);
        const double x = v.as_double() * scale;
        double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
        return Value::number(r / scale);
    }
    if (n == "wordcount") {
        CallArgs none;
        return Value::integer(int64_t(ev.call(bound_method(Value::string(to_str(v)), "split"), none).arr->items.size()));
    }
    if (n == "center") {
        const Value* w = arg(a, 0, "width");
        const std::string s = to_str(v);
        const int64_t width = w && w->kind == Kind::Int ? std::min<int64_t>(w->i, 1 << 20) : 80;
        const int64_t len = int64_t(cp_length(s));
        if (width <= len) return Value::string(s);
        const int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
        return Value::string(std::string(size_t(left), ' ') + s + std::string(size_t(pad - left), ' '));
    }
    if (is_jinja_filter(n)) throw TemplateError("the '" + n + "' filter is not supported");
    throw TemplateError("No filter named '" + n + "' found.");
}

bool call_test(Evaluator& ev, const std::string& n, const Value& v, CallArgs& a) {
    auto other = [&]() -> const Value& {
        if (a.pos.empty()) throw TemplateError("test '" + n + "' needs an argument");
        return a.pos[0];
    };
    if (n == "defined") return !v.is_undefined();
    if (n == "undefined") return v.is_undefined();
    if (n == "none") return v.is_none();
    if (n == "string") return v.is_string();
    if (n == "mapping") return v.is_object() && !v.obj->is_namespace;
    if (n == "iterable") return v.is_undefined() || v.is_string() || v.is_array() || (v.is_object() && !v.obj->is_namespace);
    if (n == "sequence")
        return v.is_undefined() || v.is_string() || (v.is_array() && !v.arr->generator) || (v.is_object() && !v.obj->is_namespace);
    if (n == "boolean") return v.kind == Kind::Bool;
    if (n == "true") return v.kind == Kind::Bool && v.b;
    if (n == "false") return v.kind == Kind::Bool && !v.b;
    if (n == "integer") return v.kind == Kind::Int;
    if (n == "float") return v.kind == Kind::Float;
    if (n == "number") return v.is_number();
    if (n == "callable") return v.kind == Kind::Function;
    if (n == "lower" || n == "upper") {
        const std::string s = to_str(v);
        CallArgs none;
        return truthy(ev.call(bound_method(Value::string(s), n == "lower" ? "islower" : "isupper"), none));
    }
    if (n == "eq" || n == "equalto" || n == "==") return equals(v, other());
    if (n == "ne" || n == "!=") return !equals(v, other());
    if (n == "lt" || n == "lessthan" || n == "<") return less(v, other());
    if (n == "gt" || n == "greaterthan" || n == ">") return less(other(), v);
    if (n == "le" || n == "<=") return less(v, other()) || equals(v, other());
    if (n == "ge" || n == ">=") return less(other(), v) || equals(v, other());
    if (n == "in") return contains(other(), v);
    if (n == "sameas") {
        const Value& o = other();
        if (v.kind != o.kind) return false;
        if (v.is_array()) return v.arr == o.arr;
        if (v.is_object()) return v.obj == o.obj;
        if (v.kind == Kind::Function) return v.fn == o.fn;
        return v.kind == Kind::None || v.kind == Kind::Undefined || (v.kind == Kind::Bool && v.b == o.b);
    }
    if (n == "divisibleby" || n == "even" || n == "odd") {
        if (!v.is_number()) throw TemplateError("test '" + n + "' needs a number, not " + type_name(v));
        const int64_t x = v.kind == Kind::Bool ? v.b : v.kind == Kind::Int ? v.i : int64_t(v.f);
        if (n == "even") return x % 2 == 0;
        if (n == "odd") return x % 2 != 0;
        const Value& d = other();
        const int64_t y = d.kind == Kind::Int ? d.i : int64_t(d.as_double());
        if (y == 0) throw TemplateError("integer division or modulo by zero");
        return x % y == 0;
    }
    if (n == "escaped") return false;
    if (n == "filter") return v.is_string() && is_jinja_filter(v.s);
    if (n == "test") return v.is_string() && is_jinja_test(v.s);
    throw TemplateError("no test named '" + n + "'");
}

}  // namespace specdec::io::jinja
