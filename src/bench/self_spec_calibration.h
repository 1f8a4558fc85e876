// Calibration of layer-skipping self-speculation (`specdec calibrate`): for
// each candidate set of kept layers, greedy self-speculation on a few code and
// chat prompts, each run timed against an AR run of the same prompt just before it; the
// fastest configuration (or "ar" when none beats it) is saved next to the model
// as <model>.selfspec.json, which `generate --draft-layers auto` reads.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sched/spec_config.h"

namespace specdec::bench {

struct CalibrationOptions {
    std::string model_path;
    sched::SpecConfig spec;                  // method (chain or tree) and its shape
    std::vector<std::vector<int>> candidates;  // kept layers per candidate; empty: default_candidates()
    int n_prompts = 2;          // built-in prompts used (code and chat alternate); or from prompts_file
    std::string prompts_file;   // JSONL of {"turns": [...]} (tools/prompts.py); first turns used
    int max_tokens = 48;        // generated per prompt (EOS ignored: equal lengths)
    int n_threads = 0;          // 0: all cores
    int n_ctx = 1024;
};

// Figures of one candidate (or AR) on the prompts of one kind, or on all.
struct KindFigures {
    std::string kind;            // "code", "chat" or "all"
    double mean_accept_len = 0;
    double tok_s = 0;
    double speedup = 0;          // over AR's tok/s on the same prompts
};

struct CalibrationRow {
    std::string layers;          // compact list ("0-14")
    std::vector<KindFigures> kinds;  // per prompt kind present
    int n_layers = 0;
    double mean_accept_len = 0;  // tokens per target forward
    double tok_s = 0;            // decode tok/s over all prompts
    double speedup = 0;          // over AR's tok/s in the same run
    bool identical = true;       // greedy tokens equal AR's (must always hold)
};

struct CalibrationResult {
    std::string model_path;
    int n_layer = 0;
    std::string method;
    int n_threads = 0;
    int n_prompts = 0, max_tokens = 0;
    double ar_tok_s = 0;                 // AR decode tok/s over every AR run (one paired with each speculative run)
    std::vector<KindFigures> ar_kinds;   // AR tok/s per prompt kind
    std::vector<CalibrationRow> rows;
    int chosen = -1;                     // index into rows; -1: AR is fastest
    nlohmann::json to_json() const;
};

// Candidate layer sets for a model of n_layer layers: prefixes of 1/2 and 3/4
// of the depth, all but 3 and all but the last layer, and 3/4 of the depth as
// "skip the middle" (the first layers plus the last two, which the LM head was
// trained to read).
std::vector<std::vector<int>> default_candidates(int n_layer);

// Runs the sweep; progress lines go to `log` (may be empty).
CalibrationResult run_calibration(const CalibrationOptions& opts,
                                  const std::function<void(const std::string&)>& log = {});

// Writes the result plus the model's size and sha256, the date and the load.
void save_calibration(const CalibrationResult& r, const std::string& path);


}  // namespace specdec::bench
