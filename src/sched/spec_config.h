// Options of speculative decoding (specdec/decoding.h), and their names.
#pragma once

#include <string>

#include "core/error.h"
#include "spec/tree_tensors.h"
#include "specdec/decoding.h"

namespace specdec::sched {

// The public option types (specdec/decoding.h) are the scheduler's own.
using Method = specdec::Method;
using SpecConfig = specdec::SpecConfig;

inline Method parse_method(const std::string& s) {
    if (s == "ar") return Method::AR;
    if (s == "chain") return Method::Chain;
    if (s == "tree") return Method::Tree;
    if (s == "ngram") return Method::NGram;
    if (s == "auto") return Method::Auto;
    if (s == "ssd") return Method::Ssd;
    throw Error("unknown method '" + s + "' (expected ar, auto, chain, tree, ngram or ssd)");
}
inline const char* method_name(Method m) {
    switch (m) {
        case Method::AR: return "ar";
        case Method::Chain: return "chain";
        case Method::Tree: return "tree";
        case Method::NGram: return "ngram";
        case Method::Auto: return "auto";
        case Method::Ssd: return "ssd";
    }
    return "?";
}
inline const char* mode_name(spec::ExecMode m) { return m == spec::ExecMode::Reference ? "reference" : "performance"; }
inline spec::ExecMode parse_mode(const std::string& s) {
    if (s == "reference") return spec::ExecMode::Reference;
    if (s == "performance") return spec::ExecMode::Performance;
    throw Error("unknown mode '" + s + "' (expected reference or performance)");
}

}  // namespace specdec::sched
