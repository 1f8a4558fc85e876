#include "io/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace specdec::io::jinja {

Value Value::undefined(std::string what) {
    Value v;
    v.s = std::move(what);
    return v;
}
Value Value::none() {
    Value v;
    v.kind = Kind::None;
    return v;
}
Value Value::boolean(bool x) {
    Value v;
    v.kind = Kind::Bool;
    v.b = x;
    return v;
}
Value Value::integer(int64_t x) {
    Value v;
    v.kind = Kind::Int;
    v.i = x;
    return v;
}
Value Value::number(double x) {
    Value v;
    v.kind = Kind::Float;
    v.f = x;
    return v;
}
Value Value::string(std::string x) {
    Value v;
    v.kind = Kind::String;
    v.s = std::move(x);
    return v;
}
Value Value::array(std::vector<Value> items, bool tuple) {
    Value v;
    v.kind = Kind::Array;
    v.arr = std::make_shared<Array>();
    v.arr->items = std::move(items);
    v.arr->tuple = tuple;
    return v;
}
Value Value::object() {
    Value v;
    v.kind = Kind::Object;
    v.obj = std::make_shared<Object>();
    return v;
}
Value Value::function(std::string name, std::function<Value(CallArgs&)> fn) {
    Value v;
    v.kind = Kind::Function;
    v.fn = std::make_shared<Function>(Function{std::move(name), std::move(fn)});
    return v;
}

double Value::as_double() const {
    switch (kind) {
        case Kind::Int: return double(i);
        case Kind::Float: return f;
        case Kind::Bool: return b ? 1 : 0;
        default: return 0;
    }
}

const Value* Object::find(std::string_view key) const {
    for (const auto& [k, v] : items)
        if (k.kind == Kind::String && k.s == key) return &v;
    return nullptr;
}

const Value* Object::find(const Value& key) const {
    for (const auto& [k, v] : items)
        if (equals(k, key)) return &v;
    return nullptr;
}

void Object::set(const std::string& key, Value v) { set(Value::string(key), std::move(v)); }

void Object::set(Value key, Value v) {
    for (auto& [k, old] : items) {
        if (equals(k, key)) {
            old = std::move(v);
            return;
        }
    }
    items.emplace_back(std::move(key), std::move(v));
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
    if (index < pos.size()) return &pos[index];
    for (const auto& [k, v] : kw)
        if (k == name) return &v;
    return nullptr;
}

bool truthy(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined:
        case Kind::None: return false;
        case Kind::Bool: return v.b;
        case Kind::Int: return v.i != 0;
        case Kind::Float: return v.f != 0;
        case Kind::String: return !v.s.empty();
        case Kind::Array: return v.arr->generator || !v.arr->items.empty();
        case Kind::Object: return v.obj->is_namespace || !v.obj->items.empty();
        case Kind::Function: return true;
    }
    return false;
}

std::string float_repr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    // Shortest round-trip digits, then Python's layout: positional for
    // exponents in [-5, 16), scientific otherwise, always with a '.' or 'e'.
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, r.ptr);
    const size_t e = sci.find('e');
    std::string mant = sci.substr(0, e);
    const int exp = std::stoi(sci.substr(e + 1));
    const bool neg = mant[0] == '-';
    if (neg) mant.erase(0, 1);
    std::string digits;
    for (char c : mant)
        if (c != '.') digits.push_back(c);
    std::string out = neg ? "-" : "";
    if (exp < -4 || exp >= 16) {
        out.append(digits, 0, 1);
        if (digits.size() > 1) {
            out.push_back('.');
            out.append(digits, 1, std::string::npos);
        }
        char eb[16];
        std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
        out.append(eb);
    } else if (exp < 0) {
        out.append("0.");
        out.append(size_t(-exp - 1), '0');
        out.append(digits);
    } else {
        const size_t int_len = size_t(exp) + 1;
        if (digits.size() <= int_len) {
            out.append(digits);
            out.append(int_len - digits.size(), '0');
            out.append(".0");
        } else {
            out.append(digits, 0, int_len);
            out.push_back('.');
            out.append(digits, int_len, std::string::npos);
        }
    }
    return out;
}

uint32_t cp_at(std::string_view s, size_t at, size_t* len) {
    const auto c0 = uint8_t(s[at]);
    size_t n = c0 < 0x80 ? 1 : (c0 >> 5) == 6 ? 2 : (c0 >> 4) == 14 ? 3 : (c0 >> 3) == 30 ? 4 : 0;
    if (n == 0 || at + n > s.size()) {
        *len = 1;
        return c0;
    }
    uint32_t cp = n == 1 ? c0 : n == 2 ? (c0 & 0x1F) : n == 3 ? (c0 & 0x0F) : (c0 & 0x07);
    for (size_t k = 1; k < n; ++k) {
        const auto c = uint8_t(s[at + k]);
        if ((c & 0xC0) != 0x80) {
            *len = 1;
            return c0;
        }
        cp = (cp << 6) | (c & 0x3F);
    }
    *len = n;
    return cp;
}

std::vector<size_t> cp_offsets(std::string_view s) {
    std::vector<size_t> off;
    off.reserve(s.size() + 1);
    size_t at = 0;
    while (at < s.size()) {
        off.push_back(at);
        size_t n;
        cp_at(s, at, &n);
        at += n;
    }
    off.push_back(s.size());
    return off;
}

size_t cp_length(std::string_view s) {
    size_t n = 0;
    for (char c : s)
        if ((uint8_t(c) & 0xC0) != 0x80) ++n;
    return n;
}

bool is_py_space(uint32_t c) {
    return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

namespace {

std::string repr_string(const std::string& s) {
    const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
    const char q = dq ? '"' : '\'';
    std::string out(1, q);
    for (unsigned char c : s) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == q) {
            out += '\\';
            out += char(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7F) {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", c);
            out += b;
        } else {
            out += char(c);
        }
    }
    out += q;
    return out;
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
    out += '"';
    for (size_t at = 0; at < s.size();) {
        size_t n;
        const uint32_t c = cp_at(s, at, &n);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
                    char b[16];
                    if (c >= 0x10000) {
                        const uint32_t v = c - 0x10000;
                        std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
                    } else {
                        std::snprintf(b, sizeof b, "\\u%04x", c);
                    }
                    out += b;
                } else {
                    out.append(s, at, n);
                }
        }
        at += n;
    }
    out += '"';
}

void json_dump(std::string& out, const Value& v, const JsonOptions& o, int depth) {
    if (depth > 512) throw TemplateError("tojson: nesting deeper than 512 levels");
    auto newline = [&](int d) {
        if (!o.indent) return;
        out += '\n';
        for (int k = 0; k < d; ++k) out += *o.indent;
    };
    switch (v.kind) {
        case Kind::None: out += "null"; return;
        case Kind::Bool: out += v.b ? "true" : "false"; return;
        case Kind::Int: out += std::to_string(v.i); return;
        case Kind::Float:
            if (std::isnan(v.f)) out += "NaN";
            else if (std::isinf(v.f)) out += v.f > 0 ? "Infinity" : "-Infinity";
            else out += float_repr(v.f);
            return;
        case Kind::String: json_string(out, v.s, o.ensure_ascii); return;
        case Kind::Array: {
            if (v.arr->generator) throw TemplateError("tojson: Object of type generator is not JSON serializable");
            if (v.arr->items.empty()) {
                out += "[]";
                return;
            }
            out += '[';
            bool first = true;
            for (const Value& x : v.arr->items) {
                if (!first) out += o.item_sep;
                first = false;
                newline(depth + 1);
                json_dump(out, x, o, depth + 1);
            }
            newline(depth);
            out += ']';
            return;
        }
        case Kind::Object: {
            if (v.obj->items.empty()) {
                out += "{}";
                return;
            }
            std::vector<const std::pair<Value, Value>*> items;
            for (const auto& kv : v.obj->items) items.push_back(&kv);
            if (o.sort_keys)
                std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return less(a->first, b->first); });
            out += '{';
            bool first = true;
            for (const auto* kv : items) {
                if (!first) out += o.item_sep;
                first = false;
                newline(depth + 1);
                // json.dumps writes int, float, bool and None keys as strings
                const Value& key = kv->first;
                if (key.kind == Kind::Array || key.kind == Kind::Object || key.kind == Kind::Function ||
                    key.kind == Kind::Undefined)
                    throw TemplateError("tojson: keys must be str, int, float, bool or None");
                json_string(out,
                            key.kind == Kind::String ? key.s
                            : key.kind == Kind::None ? "null"
                            : key.kind == Kind::Bool ? (key.b ? "true" : "false")
                                                     : to_str(key),
                            o.ensure_ascii);
                out += o.key_sep;
                json_dump(out, kv->second, o, depth + 1);
            }
            newline(depth);
            out += '}';
            return;
        }
        case Kind::Undefined:
        case Kind::Function: throw TemplateError("tojson: Object of type " + type_name(v) + " is not JSON serializable");
    }
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& opts) {
    std::string out;
    json_dump(out, v, opts, 0);
    return out;
}

std::string type_name(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined: return "Undefined";
        case Kind::None: return "NoneType";
        case Kind::Bool: return "bool";
        case Kind::Int: return "int";
        case Kind::Float: return "float";
        case Kind::String: return "str";
        case Kind::Array: return v.arr->generator ? "generator" : v.arr->tuple ? "tuple" : "list";
        case Kind::Object: return v.obj->is_namespace ? "Namespace" : "dict";
        case Kind::Function: return "function";
    }
    return "?";
}

std::string repr(const Value& v) {
    switch (v.kind) {
        case Kind::String: return repr_string(v.s);
        case Kind::Array: {
            if (v.arr->generator) return "<generator object>";
            std::string out = v.arr->tuple ? "(" : "[";
            for (size_t k = 0; k < v.arr->items.size(); ++k) {
                if (k) out += ", ";
                out += repr(v.arr->items[k]);
            }
            if (v.arr->tuple && v.arr->items.size() == 1) out += ",";
            return out + (v.arr->tuple ? ")" : "]");
        }
        case Kind::Object: {
            std::string out = v.obj->is_namespace ? "<Namespace {" : "{";
            bool first = true;
            for (const auto& [k, x] : v.obj->items) {
                if (!first) out += ", ";
                first = false;
                out += repr(k) + ": " + repr(x);
            }
            return out + (v.obj->is_namespace ? "}>" : "}");
        }
        default: return to_str(v);
    }
}

std::string to_str(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined: return "";
        case Kind::None: return "None";
        case Kind::Bool: return v.b ? "True" : "False";
        case Kind::Int: return std::to_string(v.i);
        case Kind::Float: return float_repr(v.f);
        case Kind::String: return v.s;
        case Kind::Array:
        case Kind::Object: return repr(v);
        case Kind::Function: return "<function " + v.fn->name + ">";
    }
    return "";
}

bool equals(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() == b.as_double();
        const int64_t x = a.kind == Kind::Bool ? a.b : a.i, y = b.kind == Kind::Bool ? b.b : b.i;
        return x == y;
    }
    if (a.kind != b.kind) return false;
    switch (a.kind) {
        case Kind::Undefined:
        case Kind::None: return true;
        case Kind::String: return a.s == b.s;
        case Kind::Array: {
            if (a.arr->items.size() != b.arr->items.size()) return false;
            for (size_t k = 0; k < a.arr->items.size(); ++k)
                if (!equals(a.arr->items[k], b.arr->items[k])) return false;
            return true;
        }
        case Kind::Object: {
            if (a.obj == b.obj) return true;
            if (a.obj->is_namespace || b.obj->is_namespace) return false;
            if (a.obj->items.size() != b.obj->items.size()) return false;
            for (const auto& [k, x] : a.obj->items) {
                const Value* y = b.obj->find(static_cast<const Value&>(k));
                if (!y || !equals(x, *y)) return false;
            }
            return true;
        }
        case Kind::Function: return a.fn == b.fn;
        default: return false;
    }
}

bool less(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() < b.as_double();
        const int64_t x = a.kind == Kind::Bool ? a.b : a.i, y = b.kind == Kind::Bool ? b.b : b.i;
        return x < y;
    }
    // UTF-8 byte order is code point order, which is how Python orders str.
    if (a.is_string() && b.is_string()) return a.s < b.s;
    if (a.is_array() && b.is_array() && a.arr->tuple == b.arr->tuple) {
        const auto &x = a.arr->items, &y = b.arr->items;
        for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
            if (equals(x[k], y[k])) continue;
            return less(x[k], y[k]);
        }
        return x.size() < y.size();
    }
    throw TemplateError("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

}  // namespace specdec::io::jinja
