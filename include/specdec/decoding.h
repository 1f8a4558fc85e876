// The decoding method and the shape of its drafts: what `specdec generate
// --method ... --draft-k ...` and a request's "method" choose. Every method is
// lossless: greedy output is token for token that of ar, sampled output
// follows the target distribution.
#pragma once

#include <algorithm>
#include <string>

namespace specdec {

// Auto: each round's shape (a draft-model chain, a lookup chain or none) is
// chosen by the cost model from measured forward times; the draft is optional.
// Ssd: speculative speculative decoding (Saguaro), chains of draft_k from a
// draft model on a thread of its own that pre-builds the next speculation.
enum class Method { AR, Chain, Tree, NGram, Auto, Ssd };

// The methods that cannot run without a drafter: chain and tree (a draft
// model or an EAGLE-3 head) and ssd (a draft model only).
inline bool method_needs_draft(Method m) { return m == Method::Chain || m == Method::Tree || m == Method::Ssd; }

// Which draft-tree arrays are built and checked: reference mode builds every
// table the tree invariants check (and full traces), performance mode only
// what the forward pass and the verifier read.
enum class ExecMode { Reference, Performance };

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
    // Chain, tree and ssd: a sequence whose history ends with an n-gram of at least
    // this many tokens seen earlier gets the lookup chain instead of a draft
    // for that round (0: off).
    int lookup_min = 0;
    int lookup_k = 0;  // lookup chain length (0: the draft's own: draft_k, or the tree's depth)
    // Auto: the longest lookup chain (the draft chain's limit is draft_k).
    int auto_lookup_max = 8;
    // Auto: how much faster than AR a plan with drafts must be predicted to be taken.
    double auto_min_gain = 0.02;
    // Auto: sibling leaves (the draft's second choice) beside a draft chain at
    // up to this many depths, when greedy; -1: up to draft_k; 0: chains only.
    int auto_siblings = -1;
    int lookup_len() const {
        if (lookup_k > 0) return lookup_k;
        return method == Method::Chain || method == Method::Ssd ? draft_k : std::min(tree_depth, tree_budget - 1);
    }
    ExecMode mode = ExecMode::Performance;
    int draft_window = 0;     // 0: the draft sees the whole history
    std::string vocab_subset_path;  // cached subset file (read if present, else built and written)
    int vocab_subset_n = 0;         // 0: no subset
    std::string vocab_corpus_path;  // JSONL prompts to count token frequencies (tools/prompts.py output)
    std::string trace_path;   // "" = no trace; else one JSON line per round
    bool needs_draft() const { return method_needs_draft(method); }
};

}  // namespace specdec
