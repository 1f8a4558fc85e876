// Methods of str, dict and list that jinja2's ImmutableSandboxedEnvironment
// lets a template call, Python's string formatting, and jinja2's globals.
#include <algorithm>

#include "io/jinja_builtins.h"
#include "io/jinja_evaluator.h"

namespace specdec::io::jinja {
namespace {

void utf8_append(std::string& out, uint32_t c) {
    if (c < 0x80) {
        out += char(c);
    } else if (c < 0x800) {
        out += char(0xC0 | (c >> 6));
        out += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += char(0xE0 | (c >> 12));
        out += char(0x80 | ((c >> 6) & 0x3F));
        out += char(0x80 | (c & 0x3F));
    } else {
        out += char(0xF0 | (c >> 18));
        out += char(0x80 | ((c >> 12) & 0x3F));
        out += char(0x80 | ((c >> 6) & 0x3F));
        out += char(0x80 | (c & 0x3F));
    }
}

// Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek and
// Cyrillic (what chat templates and their role names use); other scripts
// are left as they are.
uint32_t to_upper(uint32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
        const bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_lower ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
        return c;
    }
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
}
uint32_t to_lower(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
        const bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_lower ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
        return c;
    }
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

std::string map_case(const std::string& s, uint32_t (*f)(uint32_t)) {
    std::string out;
    out.reserve(s.size());
    for (size_t at = 0; at < s.size();) {
        size_t n;
        const uint32_t c = cp_at(s, at, &n);
        if (n == 1 && c >= 0x80) {
            out += s[at];  // a stray byte stays as it is
        } else {
            utf8_append(out, f(c));
        }
        at += n;
    }
    return out;
}

bool is_cased_upper(uint32_t c) { return to_lower(c) != c; }
bool is_cased_lower(uint32_t c) { return to_upper(c) != c; }

std::string title_case(const std::string& s) {
    std::string out;
    bool prev_cased = false;
    for (size_t at = 0; at < s.size();) {
        size_t n;
        const uint32_t c = cp_at(s, at, &n);
        const bool cased = is_cased_upper(c) || is_cased_lower(c);
        utf8_append(out, prev_cased ? to_lower(c) : to_upper(c));
        prev_cased = cased;
        at += n;
    }
    return out;
}

std::vector<uint32_t> code_points(const std::string& s) {
    std::vector<uint32_t> cps;
    for (size_t at = 0; at < s.size();) {
        size_t n;
        cps.push_back(cp_at(s, at, &n));
        at += n;
    }
    return cps;
}

const std::string& arg_str(const CallArgs& a, size_t i, const char* name, const char* method) {
    const Value* v = a.get(i, name);
    if (!v) throw TemplateError(std::string(method) + "() missing argument '" + name + "'");
    if (!v->is_string())
        throw TemplateError(std::string(method) + "() argument '" + name + "' must be str, not " + type_name(*v));
    return v->s;
}

int64_t arg_int(const CallArgs& a, size_t i, const char* name, int64_t dflt) {
    const Value* v = a.get(i, name);
    if (!v || v->is_none()) return dflt;
    if (v->kind == Kind::Bool) return v->b;
    if (v->kind != Kind::Int) throw TemplateError(std::string("argument '") + name + "' must be an integer");
    return v->i;
}

std::vector<std::string> py_split(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right) {
    std::vector<std::string> parts;
    if (!sep || sep->is_none()) {  // runs of whitespace; no empty strings
        std::vector<std::pair<size_t, size_t>> words;
        size_t at = 0, start = std::string::npos;
        while (at < s.size()) {
            size_t n;
            const bool sp = is_py_space(cp_at(s, at, &n));
            if (!sp && start == std::string::npos) start = at;
            if (sp && start != std::string::npos) {
                words.emplace_back(start, at);
                start = std::string::npos;
            }
            at += n;
        }
        if (start != std::string::npos) words.emplace_back(start, s.size());
        if (maxsplit < 0 || size_t(maxsplit) >= words.size()) {
            for (auto [a, b] : words) parts.push_back(s.substr(a, b - a));
            return parts;
        }
        if (!from_right) {
            for (size_t k = 0; k < size_t(maxsplit); ++k) parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
            std::string rest = s.substr(words[size_t(maxsplit)].first);
            parts.push_back(py_strip(rest, nullptr, false, true));
        } else {
            const size_t keep = words.size() - size_t(maxsplit);
            parts.push_back(py_strip(s.substr(0, words[keep - 1].second), nullptr, true, false));
            for (size_t k = keep; k < words.size(); ++k) parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
        }
        return parts;
    }
    if (!sep->is_string()) throw TemplateError("must be str or None, not " + type_name(*sep));
    const std::string& d = sep->s;
    if (d.empty()) throw TemplateError("empty separator");
    if (!from_right) {
        size_t at = 0;
        int64_t done = 0;
        for (size_t q; (maxsplit < 0 || done < maxsplit) && (q = s.find(d, at)) != std::string::npos; ++done) {
            parts.push_back(s.substr(at, q - at));
            at = q + d.size();
        }
        parts.push_back(s.substr(at));
        return parts;
    }
    size_t end = s.size();
    int64_t done = 0;
    std::vector<std::string> rev;
    while (maxsplit < 0 || done < maxsplit) {
        if (end < d.size()) break;
        const size_t q = s.rfind(d, end - d.size());
        if (q == std::string::npos) break;
        rev.push_back(s.substr(q + d.size(), end - q - d.size()));
        end = q;
        ++done;
    }
    rev.push_back(s.substr(0, end));
    return {rev.rbegin(), rev.rend()};
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
    auto one = [&](const Value& a) {
        if (!a.is_string()) throw TemplateError("startswith/endswith arg must be str or a tuple of str, not " + type_name(a));
        if (a.s.size() > s.size()) return false;
        return prefix ? s.compare(0, a.s.size(), a.s) == 0 : s.compare(s.size() - a.s.size(), a.s.size(), a.s) == 0;
    };
    if (affix.is_array()) {
        for (const Value& a : affix.arr->items)
            if (one(a)) return true;
        return false;
    }
    return one(affix);
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
    std::string out;
    if (from.empty()) {  // inserted before every character and at the end
        const std::vector<size_t> off = cp_offsets(s);
        int64_t done = 0;
        for (size_t k = 0; k + 1 < off.size(); ++k) {
            if (count < 0 || done < count) {
                out += to;
                ++done;
            }
            out.append(s, off[k], off[k + 1] - off[k]);
        }
        if (count < 0 || done < count) out += to;
        return out;
    }
    size_t at = 0;
    int64_t done = 0;
    for (size_t q; (count < 0 || done < count) && (q = s.find(from, at)) != std::string::npos; ++done) {
        out.append(s, at, q - at);
        out += to;
        at = q + from.size();
    }
    out.append(s, at, std::string::npos);
    return out;
}

Value str_method(const std::string& s, const std::string& name) {
    auto fn = [&](auto body) { return Value::function("str." + name, [s, body](CallArgs& a) { return body(s, a); }); };
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        const bool l = name != "rstrip", r = name != "lstrip";
        return fn([l, r](const std::string& x, CallArgs& a) { return Value::string(py_strip(x, a.get(0, "chars"), l, r)); });
    }
    if (name == "split" || name == "rsplit") {
        const bool right = name == "rsplit";
        return fn([right](const std::string& x, CallArgs& a) {
            std::vector<Value> parts;
            for (std::string& p : py_split(x, a.get(0, "sep"), arg_int(a, 1, "maxsplit", -1), right))
                parts.push_back(Value::string(std::move(p)));
            return Value::array(std::move(parts));
        });
    }
    if (name == "startswith" || name == "endswith") {
        const bool prefix = name == "startswith";
        return fn([prefix](const std::string& x, CallArgs& a) {
            const Value* v = a.get(0, "prefix");
            if (!v) throw TemplateError("startswith/endswith takes at least 1 argument");
            if (a.pos.size() > 1) throw TemplateError("startswith/endswith with start/end is not supported");
            return Value::boolean(affix_match(x, *v, prefix));
        });
    }
    if (name == "replace")
        return fn([](const std::string& x, CallArgs& a) {
            return Value::string(py_replace(x, arg_str(a, 0, "old", "replace"), arg_str(a, 1, "new", "replace"),
                                            arg_int(a, 2, "count", -1)));
        });
    if (name == "upper") return fn([](const std::string& x, CallArgs&) { return Value::string(py_upper(x)); });
    if (name == "lower") return fn([](const std::string& x, CallArgs&) { return Value::string(py_lower(x)); });
    if (name == "title") return fn([](const std::string& x, CallArgs&) { return Value::string(title_case(x)); });
    if (name == "capitalize")
        return fn([](const std::string& x, CallArgs&) {
            const std::vector<size_t> off = cp_offsets(x);
            if (off.size() < 2) return Value::string(x);
            return Value::string(py_upper(x.substr(0, off[1])) + py_lower(x.substr(off[1])));
        });
    if (name == "format") return fn([](const std::string& x, CallArgs& a) { return Value::string(str_format(x, a)); });
    if (name == "join")
        return fn([](const std::string& x, CallArgs& a) {
            const Value* v = a.get(0, "iterable");
            if (!v) throw TemplateError("join() takes exactly one argument");
            std::string out;
            bool first = true;
            for (const Value& item : Evaluator::iterate(*v)) {
                if (!item.is_string()) throw TemplateError("sequence item: expected str instance, " + type_name(item) + " found");
                if (!first) out += x;
                first = false;
                out += item.s;
            }
            return Value::string(std::move(out));
        });
    if (name == "find" || name == "rfind" || name == "count" || name == "index" || name == "rindex")
        return fn([name](const std::string& x, CallArgs& a) {
            const std::string& sub = arg_str(a, 0, "sub", name.c_str());
            if (name == "count") {
                if (sub.empty()) return Value::integer(int64_t(cp_length(x)) + 1);
                int64_t n = 0;
                for (size_t q = x.find(sub); q != std::string::npos; q = x.find(sub, q + sub.size())) ++n;
                return Value::integer(n);
            }
            const size_t q = name[0] == 'r' ? x.rfind(sub) : x.find(sub);
            if (q == std::string::npos) {
                if (name.find("index") != std::string::npos) throw TemplateError("substring not found");
                return Value::integer(-1);
            }
            return Value::integer(int64_t(cp_length(x.substr(0, q))));
        });
    if (name == "splitlines")
        return fn([](const std::string& x, CallArgs& a) {
            if (const Value* k = a.get(0, "keepends"); k && truthy(*k)) throw TemplateError("splitlines(keepends=True) is not supported");
            std::vector<Value> parts;
            for (std::string& p : py_splitlines(x)) parts.push_back(Value::string(std::move(p)));
            return Value::array(std::move(parts));
        });
    if (name == "removeprefix" || name == "removesuffix") {
        const bool prefix = name == "removeprefix";
        return fn([prefix](const std::string& x, CallArgs& a) {
            const std::string& af = arg_str(a, 0, "affix", "removeprefix");
            if (!affix_match(x, Value::string(af), prefix)) return Value::string(x);
            return Value::string(prefix ? x.substr(af.size()) : x.substr(0, x.size() - af.size()));
        });
    }
    if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" ||
        name == "isupper")
        return fn([name](const std::string& x, CallArgs&) {
            const std::vector<uint32_t> cps = code_points(x);
            if (cps.empty()) return Value::boolean(false);
            if (name == "islower" || name == "isupper") {
                bool cased = false;
                for (uint32_t c : cps) {
                    if (name == "islower" ? is_cased_upper(c) : is_cased_lower(c)) return Value::boolean(false);
                    cased = cased || is_cased_upper(c) || is_cased_lower(c);
                }
                return Value::boolean(cased);
            }
            for (uint32_t c : cps) {
                const bool digit = c >= '0' && c <= '9';
                const bool alpha = is_cased_upper(c) || is_cased_lower(c);
                if (c >= 0x80 && name != "isspace")
                    throw TemplateError("str." + name + "() on non-ASCII text is not supported");
                const bool ok = name == "isdigit" ? digit : name == "isalpha" ? alpha : name == "isalnum" ? digit || alpha : is_py_space(c);
                if (!ok) return Value::boolean(false);
            }
            return Value::boolean(true);
        });
    return Value::undefined();
}

Value dict_method(const Value& d, const std::string& name) {
    if (name == "get")
        return Value::function("dict.get", [d](CallArgs& a) {
            const Value* k = a.get(0, "key");
            if (!k) throw TemplateError("get expected at least 1 argument, got 0");
            if (const Value* v = d.obj->find(*k)) return *v;
            const Value* dflt = a.get(1, "default");
            return dflt ? *dflt : Value::none();
        });
    if (name == "items" || name == "keys" || name == "values")
        return Value::function("dict." + name, [d, name](CallArgs&) {
            std::vector<Value> out;
            for (const auto& [k, v] : d.obj->items) {
                if (name == "items") out.push_back(Value::array({k, v}, true));
                else out.push_back(name == "keys" ? k : v);
            }
            return Value::array(std::move(out));
        });
    if (name == "copy")
        return Value::function("dict.copy", [d](CallArgs&) {
            Value c = Value::object();
            c.obj->items = d.obj->items;
            return c;
        });
    static const char* unsafe[] = {"pop", "popitem", "setdefault", "update", "clear", "fromkeys"};
    for (const char* u : unsafe)
        if (name == u) return Value::undefined("access to attribute '" + name + "' of 'dict' object is unsafe.");
    return Value::undefined();
}

Value list_method(const Value& l, const std::string& name) {
    if (name == "index" || name == "count")
        return Value::function("list." + name, [l, name](CallArgs& a) {
            const Value* x = a.get(0, "value");
            if (!x) throw TemplateError(name + "() takes at least 1 argument");
            int64_t n = 0;
            for (size_t k = 0; k < l.arr->items.size(); ++k) {
                if (!equals(l.arr->items[k], *x)) continue;
                if (name == "index") return Value::integer(int64_t(k));
                ++n;
            }
            if (name == "index") throw TemplateError(repr(*x) + " is not in list");
            return Value::integer(n);
        });
    if (name == "copy") return Value::function("list.copy", [l](CallArgs&) { return Value::array(l.arr->items); });
    static const char* unsafe[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
    for (const char* u : unsafe)
        if (name == u) return Value::undefined("access to attribute '" + name + "' of '" + type_name(l) + "' object is unsafe.");
    return Value::undefined();
}

}  // namespace

std::string py_strip(const std::string& s, const Value* chars, bool left, bool right) {
    std::vector<uint32_t> set;
    const bool ws = !chars || chars->is_none() || chars->is_undefined();
    if (!ws) {
        if (!chars->is_string()) throw TemplateError("strip arg must be None or str");
        set = code_points(chars->s);
    }
    auto strip_it = [&](uint32_t c) { return ws ? is_py_space(c) : std::find(set.begin(), set.end(), c) != set.end(); };
    const std::vector<size_t> off = cp_offsets(s);
    size_t a = 0, b = off.size() - 1;
    size_t n;
    if (left)
        while (a < b && strip_it(cp_at(s, off[a], &n))) ++a;
    if (right)
        while (b > a && strip_it(cp_at(s, off[b - 1], &n))) --b;
    return s.substr(off[a], off[b] - off[a]);
}

std::string py_lower(const std::string& s) { return map_case(s, to_lower); }
std::string py_upper(const std::string& s) { return map_case(s, to_upper); }

std::vector<std::string> py_splitlines(const std::string& s) {
    std::vector<std::string> lines;
    size_t start = 0, at = 0;
    while (at < s.size()) {
        size_t n;
        const uint32_t c = cp_at(s, at, &n);
        const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
                         c == 0x2028 || c == 0x2029;
        if (brk) {
            lines.push_back(s.substr(start, at - start));
            at += n;
            if (c == '\r' && at < s.size() && s[at] == '\n') ++at;
            start = at;
        } else {
            at += n;
        }
    }
    if (start < s.size()) lines.push_back(s.substr(start));
    return lines;
}

Value bound_method(const Value& obj, const std::string& name) {
    if (!name.empty() && name[0] == '_') return Value::undefined();  // no dunder methods: dict keys only
    switch (obj.kind) {
        case Kind::String: return str_method(obj.s, name);
        case Kind::Object: return obj.obj->is_namespace ? Value::undefined() : dict_method(obj, name);
        case Kind::Array: return list_method(obj, name);
        default: return Value::undefined();
    }
}

Value percent_format(const std::string& fmt, const Value& args) {
    std::vector<Value> vals = args.is_array() && args.arr->tuple ? args.arr->items : std::vector<Value>{args};
    size_t next = 0;
    std::string out;
    for (size_t k = 0; k < fmt.size(); ++k) {
        if (fmt[k] != '%') {
            out += fmt[k];
            continue;
        }
        if (++k >= fmt.size()) throw TemplateError("incomplete format");
        const char c = fmt[k];
        if (c == '%') {
            out += '%';
            continue;
        }
        if (next >= vals.size()) throw TemplateError("not enough arguments for format string");
        const Value& v = vals[next++];
        if (c == 's') {
            out += to_str(v);
        } else if (c == 'r') {
            out += repr(v);
        } else if (c == 'd' || c == 'i') {
            if (!v.is_number()) throw TemplateError("%d format: a real number is required, not " + type_name(v));
            out += std::to_string(v.kind == Kind::Float ? int64_t(v.f) : v.kind == Kind::Bool ? int64_t(v.b) : v.i);
        } else {
            throw TemplateError(std::string("format directive '%") + c + "' is not supported");
        }
    }
    if (next < vals.size()) throw TemplateError("not all arguments converted during string formatting");
    return Value::string(std::move(out));
}

std::string str_format(const std::string& fmt, const CallArgs& args) {
    std::string out;
    size_t auto_index = 0;
    for (size_t k = 0; k < fmt.size(); ++k) {
        const char c = fmt[k];
        if (c == '}') {
            if (k + 1 < fmt.size() && fmt[k + 1] == '}') {
                out += '}';
                ++k;
                continue;
            }
            throw TemplateError("Single '}' encountered in format string");
        }
        if (c != '{') {
            out += c;
            continue;
        }
        if (k + 1 < fmt.size() && fmt[k + 1] == '{') {
            out += '{';
            ++k;
            continue;
        }
        const size_t close = fmt.find('}', k);
        if (close == std::string::npos) throw TemplateError("Single '{' encountered in format string");
        std::string field = fmt.substr(k + 1, close - k - 1);
        k = close;
        char conv = 0;
        if (const size_t bang = field.find('!'); bang != std::string::npos) {
            if (bang + 2 != field.size()) throw TemplateError("format conversion '" + field + "' is not supported");
            conv = field[bang + 1];
            field.resize(bang);
        }
        if (field.find(':') != std::string::npos || field.find('.') != std::string::npos || field.find('[') != std::string::npos)
            throw TemplateError("format field '{" + field + "}' is not supported (only {}, {0} and {name})");
        const Value* v;
        if (field.empty()) {
            v = auto_index < args.pos.size() ? &args.pos[auto_index] : nullptr;
            ++auto_index;
        } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
            const size_t idx = std::stoul(field);
            v = idx < args.pos.size() ? &args.pos[idx] : nullptr;
        } else {
            v = nullptr;
            for (const auto& [name, x] : args.kw)
                if (name == field) v = &x;
        }
        if (!v) throw TemplateError("format: no argument for '{" + field + "}'");
        out += conv == 'r' ? repr(*v) : to_str(*v);
    }
    return out;
}

void add_builtin_globals(std::unordered_map<std::string, Value>& g, Evaluator& ev) {
    g["range"] = Value::function("range", [](CallArgs& a) {
        int64_t start = 0, stop, step = 1;
        if (a.pos.size() == 1) {
            stop = arg_int(a, 0, "stop", 0);
        } else if (a.pos.size() == 2 || a.pos.size() == 3) {
            start = arg_int(a, 0, "start", 0);
            stop = arg_int(a, 1, "stop", 0);
            step = arg_int(a, 2, "step", 1);
        } else {
            throw TemplateError("range expected 1 to 3 arguments, got " + std::to_string(a.pos.size()));
        }
        if (step == 0) throw TemplateError("range() arg 3 must not be zero");
        std::vector<Value> items;
        for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
            // jinja2's sandbox refuses ranges longer than MAX_RANGE
            if (items.size() >= 100000) throw TemplateError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
            items.push_back(Value::integer(k));
        }
        return Value::array(std::move(items));
    });
    auto make_dict = [](CallArgs& a, bool ns) {
        Value d = Value::object();
        d.obj->is_namespace = ns;
        if (!a.pos.empty()) {
            if (a.pos.size() > 1 || !a.pos[0].is_object())
                throw TemplateError(std::string(ns ? "namespace" : "dict") + "() takes a single mapping argument");
            d.obj->items = a.pos[0].obj->items;
        }
        for (auto& [k, v] : a.kw) d.obj->set(k, v);
        return d;
    };
    g["namespace"] = Value::function("namespace", [make_dict, &ev](CallArgs& a) {
        Value ns = make_dict(a, true);
        ev.track_namespace(ns.obj);
        return ns;
    });
    g["dict"] = Value::function("dict", [make_dict](CallArgs& a) { return make_dict(a, false); });
    g["joiner"] = Value::function("joiner", [](CallArgs& a) {
        const Value* sep = a.get(0, "sep");
        auto used = std::make_shared<bool>(false);
        const std::string s = sep ? to_str(*sep) : ", ";
        return Value::function("joiner", [used, s](CallArgs&) {
            if (!*used) {
                *used = true;
                return Value::string("");
            }
            return Value::string(s);
        });
    });
}

}  // namespace specdec::io::jinja
