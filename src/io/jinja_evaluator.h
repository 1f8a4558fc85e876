// Jinja evaluator: runs a parsed template (io/jinja_ast) against a context of
// values, with jinja2's semantics under ImmutableSandboxedEnvironment: scoping
// (a for-loop iteration and a macro call each get their own scope, if-blocks
// do not), loop.*, macros with defaults and caller(), namespace() objects, an
// Undefined that prints as "" but raises when used, and the sandbox's refusal
// of mutating methods (list.append and the like raise).
//
// A template is untrusted input (it comes from the model file): evaluation is
// bounded by output size, steps and call depth, so a hostile template ends in
// a TemplateError, never a crash or a hang.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/jinja_ast.h"
#include "io/jinja_value.h"

namespace specdec::io::jinja {

struct Limits {
    size_t max_output = size_t(16) << 20;  // bytes of output and of any one string or list
    uint64_t max_steps = 20'000'000;       // expressions and statements evaluated, plus string bytes / 64
    int max_call_depth = 100;              // nested macro calls
};

struct Scope {
    std::shared_ptr<Scope> parent;
    std::unordered_map<std::string, Value> vars;
    Value* find(const std::string& name);
};

class Evaluator {
public:
    // `globals` holds the functions and the caller's variables (messages,
    // add_generation_prompt, ...); it is the outermost scope.
    Evaluator(const Limits& limits, std::unordered_map<std::string, Value> globals);
    // Breaks the reference cycles a template can make (a macro stored in the
    // scope its closure holds, a namespace holding itself), so nothing leaks.
    ~Evaluator();
    Evaluator(const Evaluator&) = delete;
    Evaluator& operator=(const Evaluator&) = delete;

    // Namespaces are the only mutable containers a template has: the
    // evaluator empties them when it ends.
    void track_namespace(const std::shared_ptr<Object>& ns) { namespaces_.push_back(ns); }

    std::string render(const Body& body);

    // Used by the built-in filters that take a filter or test name (map,
    // select, ...) and by those that call back into templates.
    Value call(const Value& fn, CallArgs& args);
    Value apply_filter(const std::string& name, const Value& target, CallArgs& args);
    bool apply_test(const std::string& name, const Value& v, CallArgs& args);
    // Refuses a value or output over max_output bytes, and charges its size
    // to the step budget.
    void check_size(size_t bytes);
    void step();
    // What `for` iterates: list items, dict keys, str characters; Undefined
    // is empty; anything else raises.
    static std::vector<Value> iterate(const Value& v);

private:
    enum class Flow { Normal, Break, Continue };
    Flow exec_body(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out);
    Flow exec(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
    void exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
    void exec_set(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
    Value make_macro(const Stmt& s, const std::shared_ptr<Scope>& scope);
    Value eval(const Expr& e, const std::shared_ptr<Scope>& scope);
    Value eval_inner(const Expr& e, const std::shared_ptr<Scope>& scope);
    Value eval_binary(const Expr& e, const std::shared_ptr<Scope>& scope);
    Value eval_compare(const Expr& e, const std::shared_ptr<Scope>& scope);
    CallArgs eval_args(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope);
    void append(std::string& out, const std::string& s);
    static void bind_targets(Scope& sc, const std::vector<std::string>& targets, const Value& v);

    Limits limits_;
    std::shared_ptr<Scope> root_;
    uint64_t steps_ = 0;
    int depth_ = 0;
    Value filter_input_;
    std::vector<std::shared_ptr<Scope>> closures_;  // scopes that macros and caller() hold
    std::vector<std::shared_ptr<Object>> namespaces_;  // the rendered body a {% filter %} or {% set x | f %} block filters
};

// Attribute access as jinja2's sandbox does it: `obj.name` (a dict key, or
// a safe method of str/dict/list bound to obj), undefined when missing.
// Accessing anything on an Undefined raises.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: list/str index (negative from the end), dict key, then attribute.
Value get_item(const Value& obj, const Value& key);
// Python's `item in container`.
bool contains(const Value& container, const Value& item);

}  // namespace specdec::io::jinja
