#include "spec/trace.h"

#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace specdec::spec {

TraceWriter::TraceWriter(const std::string& path) : out_(path, std::ios::trunc) {
    SPECDEC_CHECK(out_.good(), "cannot open trace file ", path);
}

void TraceWriter::header(const nlohmann::json& run) {
    nlohmann::json j = run;
    j["type"] = "header";
    out_ << j.dump() << "\n";
    out_.flush();
}

const char* draft_source(const DraftTree& tree) {
    if (tree.from_lookup) return "lookup";
    return tree.size() > 1 ? "draft" : "none";
}

void TraceWriter::round(int seq, int round, const TreeTensors& t, const VerifyResult& v, const RoundTimes& times,
                        const char* source, bool full_tables) {
    nlohmann::json j;
    j["type"] = "round";
    j["seq"] = seq;
    j["round"] = round;
    j["source"] = source;
    j["prefix_len"] = t.prefix_len;
    j["tokens"] = t.tokens;
    j["parents"] = t.parent;
    j["accepted_path"] = v.path;
    j["accepted_tokens"] = std::vector<int32_t>(v.emitted.begin(), v.emitted.end() - 1);
    j["bonus"] = v.emitted.back();
    j["t_draft_s"] = times.draft_s;
    j["t_tree_s"] = times.tree_s;
    j["t_verify_s"] = times.verify_s;
    j["t_commit_s"] = times.commit_s;
    if (times.predicted_s >= 0) j["t_predicted_s"] = times.predicted_s;
    if (full_tables) {
        j["depth"] = t.depth;
        j["position"] = t.position;
        j["max_depth"] = t.max_depth;
        j["ancestors"] = t.anc;
        j["leaves"] = t.leaves;
        j["paths"] = t.paths;
    }
    out_ << j.dump() << "\n";
}

void TraceWriter::line(const nlohmann::json& j) { out_ << j.dump() << "\n"; }

std::string file_hash(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    SPECDEC_CHECK(f, "cannot read ", path, " to hash it");
    // Word-wise multiply-xorshift: fast enough to hash a model per traced run.
    uint64_t h = 0x9e3779b97f4a7c15ull;
    std::vector<uint64_t> buf(1 << 16);
    size_t n;
    uint64_t total = 0;
    while ((n = std::fread(buf.data(), 1, buf.size() * 8, f)) > 0) {
        if (n % 8) std::memset(reinterpret_cast<char*>(buf.data()) + n, 0, 8 - n % 8);
        for (size_t i = 0; i < (n + 7) / 8; ++i) {
            h ^= buf[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
            h *= 0xbf58476d1ce4e5b9ull;
            h ^= h >> 31;
        }
        total += n;
    }
    std::fclose(f);
    h ^= total;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    return hex;
}

void add_sampling_fields(nlohmann::json& h, const sample::SamplingParams& p) {
    h["seed"] = p.seed;
    h["temperature"] = p.temperature;
    h["top_k"] = p.top_k;
    h["top_p"] = p.top_p;
    h["min_p"] = p.min_p;
    h["repeat_penalty"] = p.repeat_penalty;
}

void add_model_fields(nlohmann::json& h, const std::string& role, const std::string& path) {
    h[role + "_model"] = path;
    h[role + "_hash"] = file_hash(path);
}

}  // namespace specdec::spec
