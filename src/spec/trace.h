// Structured traces of speculative decoding: one JSON object per line. The
// first line is a run header (seed, configuration, model hashes), then one line
// per sequence per round: the draft tree (tokens, parents), the accepted path,
// the bonus token and the time each stage took. Reference mode adds the
// accelerator tables (depths, positions, ancestor and path tables).
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sample/sampler.h"
#include "spec/draft_tree.h"
#include "spec/tree_tensors.h"
#include "spec/verifier.h"

namespace specdec::spec {

struct RoundTimes {
    double draft_s = 0;    // proposer (draft forwards included)
    double tree_s = 0;     // tensors, invariants, batch/mask build
    double verify_s = 0;   // target forward + verifier
    double commit_s = 0;   // KV commit and bookkeeping
    // The proposer's prediction of the round's target forward + draft seconds
    // (auto's cost model); < 0 when the proposer makes none.
    double predicted_s = -1;
};

class TraceWriter {
public:
    // Opens (truncates) the file; throws specdec::Error if it cannot.
    explicit TraceWriter(const std::string& path);
    void header(const nlohmann::json& run);
    // `source` says what made the tree (draft_source below).
    void round(int seq, int round, const TreeTensors& tree, const VerifyResult& v, const RoundTimes& t,
               const char* source, bool full_tables);
    // Any other record, one JSON object per line (it names its own "type"):
    // the SSD scheduler's rounds (sched/ssd_trace.h).
    void line(const nlohmann::json& j);

private:
    std::ofstream out_;
};

// What made a tree, as traces name it: "lookup" (a prompt-lookup chain),
// "draft" (a proposer's drafts) or "none" (the root alone: an AR step).
const char* draft_source(const DraftTree& tree);

// A content hash of a file (64-bit, hex), to pin which model a trace came from.
std::string file_hash(const std::string& path);

// Run-header fields every trace records so a run can be reproduced: the
// sampling parameters (seed included), and a model's path and content hash
// under "<role>_model" / "<role>_hash".
void add_sampling_fields(nlohmann::json& header, const sample::SamplingParams& p);
void add_model_fields(nlohmann::json& header, const std::string& role, const std::string& path);

}  // namespace specdec::spec
