// Built-ins of the Jinja interpreter, as jinja2 3.1 defines them:
//   filters and tests (io/jinja_filters.cpp): trim, length, items, join,
//     default, map/select/selectattr/..., tojson as Hugging Face redefines
//     it (json.dumps with ensure_ascii=False); defined, none, string,
//     mapping, iterable, ...
//   methods and globals (io/jinja_methods.cpp): the str/dict/list methods the
//     sandbox allows (strip, split, startswith, get, items, ...), str.format
//     and %-formatting, range, namespace, dict.
// A name jinja2 does not know is refused when the template is parsed (as
// jinja2 does); one it knows but that is not implemented here is an error
// naming it when it is used.
#pragma once

#include <string>
#include <unordered_map>

#include "io/jinja_value.h"

namespace specdec::io::jinja {

class Evaluator;

Value call_filter(Evaluator& ev, const std::string& name, const Value& v, CallArgs& args);
bool call_test(Evaluator& ev, const std::string& name, const Value& v, CallArgs& args);
bool is_jinja_filter(const std::string& name);
bool is_jinja_test(const std::string& name);

// obj.name as a method bound to obj. Not a method: an Undefined with an empty
// message (the caller then looks for a dict key). A mutating method the
// sandbox refuses (list.append, dict.update, ...): an Undefined that raises
// "access to attribute ... is unsafe" when called.
Value bound_method(const Value& obj, const std::string& name);

// Python's `fmt % args` and str.format for strings.
Value percent_format(const std::string& fmt, const Value& args);
std::string str_format(const std::string& fmt, const CallArgs& args);

// markupsafe.escape: & < > " ' as HTML entities.
std::string html_escape(const std::string& s);

// Python's str methods the filters share.
std::string py_strip(const std::string& s, const Value* chars, bool left, bool right);
std::string py_lower(const std::string& s);
std::string py_upper(const std::string& s);
std::vector<std::string> py_splitlines(const std::string& s);

// jinja2's default globals: range, namespace, dict, joiner. Namespaces are
// registered with `ev` (see Evaluator::track_namespace).
void add_builtin_globals(std::unordered_map<std::string, Value>& globals, Evaluator& ev);

}  // namespace specdec::io::jinja
