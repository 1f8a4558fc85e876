// Options of speculative decoding, as the CLI and the scheduler see them.
#pragma once

#include <algorithm>
#include <string>

#include "core/error.h"
#include "spec/tree_tensors.h"

namespace specdec::sched {

// Auto: each round's shape (a draft-model chain, a lookup chain or none) is
// chosen by the cost model (spec/adaptive_proposer.h); the draft is optional.
enum class Method { AR, Chain, Tree, NGram, Auto };

inline Method parse_method(const std::string& s) {
    if (s == "ar") return Method::AR;
    if (s == "chain") return Method::Chain;
    if (s == "tree") return Method::Tree;
    if (s == "ngram") return Method::NGram;
    if (s == "auto") return Method::Auto;
    throw Error("unknown method '" + s + "' (expected ar, auto, chain, tree or ngram)");
}
inline const char* method_name(Method m) {
    switch (m) {
        case Method::AR: return "ar";
        case Method::Chain: return "chain";
        case Method::Tree: return "tree";
        case Method::NGram: return "ngram";
        case Method::Auto: return "auto";
    }
    return "?";
}
inline const char* mode_name(spec::ExecMode m) { return m == spec::ExecMode::Reference ? "reference" : "performance"; }
inline spec::ExecMode parse_mode(const std::string& s) {
    if (s == "reference") return spec::ExecMode::Reference;
    if (s == "performance") return spec::ExecMode::Performance;
    throw Error("unknown mode '" + s + "' (expected reference or performance)");
}

struct SpecConfig {
    Method method = Method::AR;
    int draft_k = 5;          // chain length (chain and ngram)
    int tree_topk = 4;
    int tree_depth = 5;
    int tree_budget = 16;     // nodes incl. the root
    int tree_width = 0;       // frontier width (nodes expanded per depth); 0: tree_topk
    float chain_min_prob = 0.0f;  // greedy/top-k chains stop after a draft with q below this (0: off)
    bool tree_sampled = false;  // sampling: draw tree children from q instead of top-k
    int ngram_min = 1;
    int ngram_max = 3;
    // Chain and tree: a sequence whose history ends with an n-gram of at least
    // this many tokens seen earlier gets the lookup chain instead of a draft
    // for that round (spec/lookup_first_proposer.h; 0: off).
    int lookup_min = 0;
    int lookup_k = 0;  // lookup chain length (0: the draft's own: draft_k, or the tree's depth)
    // Auto: the longest lookup chain (the draft chain's limit is draft_k).
    int auto_lookup_max = 8;
    // Auto: how much faster than AR a plan with drafts must be predicted to be
    // taken (spec::AdaptiveOptions::min_gain).
    double auto_min_gain = 0.02;
    int lookup_len() const {
        if (lookup_k > 0) return lookup_k;
        return method == Method::Chain ? draft_k : std::min(tree_depth, tree_budget - 1);
    }
    spec::ExecMode mode = spec::ExecMode::Performance;
    int draft_window = 0;     // 0: the draft sees the whole history
    std::string vocab_subset_path;  // cached subset file (read if present, else built and written)
    int vocab_subset_n = 0;         // 0: no subset
    std::string vocab_corpus_path;  // JSONL prompts to count token frequencies (tools/prompts.py output)
    std::string trace_path;   // "" = no trace
    bool needs_draft() const { return method == Method::Chain || method == Method::Tree; }
};

}  // namespace specdec::sched
