// What a generation produced: the text and its tokens, why it ended, how long
// the prompt and the decoding took, and, for a speculative method, how the
// speculation went (rounds, accept length, draft against verify time).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace specdec {

// The text half of a result, the same for every decoding method.
struct GenerateResult {
    std::string text;
    std::vector<int32_t> tokens;    // generated ids (end-of-generation token excluded)
    int n_prompt = 0;
    int n_generated = 0;
    double prefill_s = 0;
    double decode_s = 0;
    std::string finish_reason;      // "length", "stop" (EOS or stop string), "cancelled" (the callback)
    double decode_tok_s() const { return decode_s > 0 ? n_generated / decode_s : 0.0; }
    double prefill_tok_s() const { return prefill_s > 0 ? n_prompt / prefill_s : 0.0; }
};

// Counters of the speculative loop. A round is one target forward verifying
// every sequence's draft tree; a sequence-round is one sequence's share.
struct SpecStats {
    int rounds = 0;            // target verify forwards (batched: one per round)
    int seq_rounds = 0;        // sum over rounds of the sequences verified
    int drafted = 0;           // draft nodes proposed (root excluded)
    int accepted = 0;          // draft tokens accepted
    int emitted = 0;           // tokens the rounds produced (accepted + bonus)
    int lookup_rounds = 0;     // sequence-rounds whose tree was a prompt-lookup chain
    int lookup_drafted = 0;    // draft tokens those rounds proposed
    int lookup_accepted = 0;   // draft tokens accepted in those rounds
    double prefill_s = 0;
    double decode_s = 0;
    double draft_s = 0, tree_s = 0, verify_s = 0, commit_s = 0;
    // Auto: sequence-rounds by chosen shape, and the cost model's predicted
    // against the measured seconds of those rounds.
    int auto_none = 0, auto_lookup = 0, auto_draft = 0;
    int auto_sibling_drafts = 0;  // sibling leaves beside auto's draft chains (greedy)
    double auto_predicted_s = 0, auto_measured_s = 0;
    // Where auto's cost curves came from (calibrated, file, process; the
    // target's) and the seconds calibration took (both curves).
    std::string auto_costs_from;
    double auto_calibration_s = 0;
    // Sequence-rounds by how many draft tokens they accepted (index = count):
    // what acceptance at each draft position is computed from.
    std::vector<int> accepted_hist;
    // Tokens per target forward per sequence (tau); AR = 1.
    double mean_accept_len() const { return seq_rounds ? (double)emitted / seq_rounds : 0.0; }
    void count_accepted(int n) {
        if ((int)accepted_hist.size() <= n) accepted_hist.resize(n + 1, 0);
        ++accepted_hist[n];
    }
};

// Adds histogram h into `into` (the longer one's length), e.g. two runs'
// SpecStats::accepted_hist.
inline void add_histogram(std::vector<int>& into, const std::vector<int>& h) {
    if (into.size() < h.size()) into.resize(h.size(), 0);
    for (size_t i = 0; i < h.size(); ++i) into[i] += h[i];
}

// Acceptance at draft position i (1-based, element i - 1): of the
// sequence-rounds that accepted the first i - 1 draft tokens, the share that
// accepted the i-th too, from a SpecStats::accepted_hist. Rounds whose draft
// was shorter than i count as not accepting it.
inline std::vector<double> acceptance_by_position(const std::vector<int>& hist) {
    std::vector<double> out;
    long long at_least = 0;
    for (int c : hist) at_least += c;
    for (size_t i = 1; i < hist.size(); ++i) {
        const long long prev = at_least;
        at_least -= hist[i - 1];
        out.push_back(prev > 0 ? (double)at_least / (double)prev : 0.0);
    }
    return out;
}

struct Result : GenerateResult {
    std::string method;        // the method that ran ("ar" where a self-speculation calibration chose it)
    bool speculative = false;  // the speculative loop ran: `spec` holds its counters
    SpecStats spec;
    std::string draft_model;   // the draft's file, when the method used one
    std::string draft_layers;  // self-speculation: the target layers the draft ran (model/layer_list form)

    // Target forwards after the prefill's, and tokens per forward; plain AR
    // decoding counts one token per forward.
    int rounds() const { return speculative ? spec.rounds : (n_generated > 0 ? n_generated - 1 : 0); }
    double mean_accept_len() const { return speculative ? spec.mean_accept_len() : 1.0; }
};

}  // namespace specdec
