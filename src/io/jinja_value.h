// Values of the Jinja interpreter (io/jinja_*): the Python objects a chat
// template sees (None, bool, int, float, str, list, dict, callables) with
// Python's semantics where output depends on them: str() and repr() for
// printing, json.dumps for tojson, ==/< and truthiness, and strings measured
// and sliced in code points. Lists and dicts are shared by reference, as in
// Python; a namespace() is a dict whose attributes `set` may assign.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "specdec/errors.h"

namespace specdec::io::jinja {

// Every failure of a template (syntax, unsupported construct, a runtime error
// Python's jinja2 would raise, raise_exception, a limit) is one of these.
class TemplateError : public specdec::Error {
public:
    using specdec::Error::Error;
};

struct Value;
struct Array;
struct Object;
struct Function;
struct CallArgs;

enum class Kind { Undefined, None, Bool, Int, Float, String, Array, Object, Function };

struct Value {
    Kind kind = Kind::Undefined;
    bool b = false;
    int64_t i = 0;
    double f = 0;
    std::string s;  // String: UTF-8 text; Undefined: the name that was missing (for errors)
    bool markup = false;  // String: a markupsafe.Markup (from |safe, |e): `+` HTML-escapes plain str into it
    std::shared_ptr<Array> arr;
    std::shared_ptr<Object> obj;
    std::shared_ptr<Function> fn;

    static Value undefined(std::string what = {});
    static Value none();
    static Value boolean(bool v);
    static Value integer(int64_t v);
    static Value number(double v);
    static Value string(std::string v);
    static Value array(std::vector<Value> items = {}, bool tuple = false);
    static Value object();
    static Value function(std::string name, std::function<Value(CallArgs&)> fn);

    bool is_undefined() const { return kind == Kind::Undefined; }
    bool is_none() const { return kind == Kind::None; }
    bool is_string() const { return kind == Kind::String; }
    bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
    bool is_array() const { return kind == Kind::Array; }
    bool is_object() const { return kind == Kind::Object; }
    double as_double() const;
};

struct Array {
    std::vector<Value> items;
    bool tuple = false;      // printed as (a, b)
    bool generator = false;  // what map/select/items/... return in jinja2: always true, no len(), not JSON
};

// A dict in insertion order (JSON objects, dict literals, namespace()). Keys
// are str except in dict literals such as {0: 0, 512: 128}.
struct Object {
    std::vector<std::pair<Value, Value>> items;
    bool is_namespace = false;
    const Value* find(std::string_view key) const;
    const Value* find(const Value& key) const;
    void set(const std::string& key, Value v);
    void set(Value key, Value v);
};

struct CallArgs {
    std::vector<Value> pos;
    std::vector<std::pair<std::string, Value>> kw;
    // Python-style binding: positional index or keyword name, else fallback.
    const Value* get(size_t index, std::string_view name) const;
};

struct Function {
    std::string name;
    std::function<Value(CallArgs&)> call;
};

// Python's bool().
bool truthy(const Value& v);
// Python's str() (Undefined prints as ""), repr(), and type names for errors.
std::string to_str(const Value& v);
std::string repr(const Value& v);
std::string type_name(const Value& v);
// Python ==, and < (throws TemplateError for types Python cannot order).
bool equals(const Value& a, const Value& b);
bool less(const Value& a, const Value& b);

struct JsonOptions {
    bool ensure_ascii = false;
    std::optional<std::string> indent;  // json.dumps(indent=...) as the text of one level
    std::string item_sep = ", ", key_sep = ": ";
    bool sort_keys = false;
};
// Python's json.dumps (the tojson filter as Hugging Face defines it).
std::string to_json(const Value& v, const JsonOptions& opts);

// Python float repr (shortest round trip, "1.0", "1e+16").
std::string float_repr(double d);

// Strings as Python sees them: code points. Invalid UTF-8 bytes count as one
// code point each and are kept as they are.
std::vector<size_t> cp_offsets(std::string_view s);  // start offset of each code point, plus s.size()
size_t cp_length(std::string_view s);
bool is_py_space(uint32_t c);
// Decoded code point at byte offset `at` (a stray byte decodes as itself).
uint32_t cp_at(std::string_view s, size_t at, size_t* len);

}  // namespace specdec::io::jinja
