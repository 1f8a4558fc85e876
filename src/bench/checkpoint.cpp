#include "bench/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace specdec::bench {
namespace fs = std::filesystem;

namespace {
// "options.n_predict: 64 here, 128 in the checkpoint; ..." for a clear refusal.
std::string describe_difference(const nlohmann::json& want, const nlohmann::json& have) {
    std::string out;
    const nlohmann::json patch = nlohmann::json::diff(have, want);
    for (const auto& op : patch) {
        if (out.size() > 600) {
            out += "; ...";
            break;
        }
        const std::string path = op.value("path", "");
        const nlohmann::json::json_pointer ptr(path);
        out += (out.empty() ? "" : "; ") + path + ": " + (want.contains(ptr) ? want[ptr].dump() : "(absent)") +
               " now, " + (have.contains(ptr) ? have[ptr].dump() : "(absent)") + " in the checkpoint";
    }
    return out;
}

// Reads a checkpoint file: its header, then unit lines. A torn last line (the
// run was killed mid-write) is ignored; a bad line elsewhere is an error.
std::vector<nlohmann::json> read_lines(const std::string& path, nlohmann::json& header) {
    std::ifstream in(path);
    SPECDEC_CHECK(in.good(), "cannot read ", path);
    std::vector<std::string> raw;
    std::string line;
    while (std::getline(in, line))
        if (!line.empty()) raw.push_back(line);
    std::vector<nlohmann::json> out;
    header = nullptr;
    for (size_t i = 0; i < raw.size(); ++i) {
        auto j = nlohmann::json::parse(raw[i], nullptr, false);
        if (j.is_discarded() || !j.is_object()) {
            SPECDEC_CHECK(i + 1 == raw.size(), path, ": line ", i + 1, " is not a JSON object");
            break;  // torn last line
        }
        if (i == 0) {
            SPECDEC_CHECK(j.contains("fingerprint"), path, ": the first line is not a checkpoint header");
            header = j["fingerprint"];
            continue;
        }
        SPECDEC_CHECK(j.contains("unit") && j["unit"].is_string(), path, ": line ", i + 1, " has no unit key");
        out.push_back(std::move(j));
    }
    SPECDEC_CHECK(!header.is_null(), path, " is empty (no checkpoint header)");
    return out;
}

void check_fingerprint(const std::string& path, const nlohmann::json& want, const nlohmann::json& have) {
    if (want == have) return;
    throw Error(path + " was written by a run with other options or models (" + describe_difference(want, have) +
                "): resume with the same options, or use another -o directory");
}
}  // namespace

std::string Checkpoint::file_name(int shard_i, int shard_n) {
    if (shard_n <= 1) return "checkpoint.jsonl";
    return "checkpoint-" + std::to_string(shard_i + 1) + "-of-" + std::to_string(shard_n) + ".jsonl";
}

Checkpoint::Checkpoint(const std::string& out_dir, int shard_i, int shard_n, const nlohmann::json& fingerprint,
                       bool resume)
    : path_((fs::path(out_dir) / file_name(shard_i, shard_n)).string()) {
    fs::create_directories(out_dir);
    if (resume && fs::exists(path_)) {
        nlohmann::json header;
        const auto lines = read_lines(path_, header);
        check_fingerprint(path_, fingerprint, header);
        for (const auto& l : lines) units_.emplace(l["unit"].get<std::string>(), l);
        // Rewrite without a torn tail so appends start on a fresh line.
        std::ofstream f(path_, std::ios::trunc);
        f << nlohmann::json{{"fingerprint", fingerprint}}.dump() << "\n";
        for (const auto& l : lines) f << l.dump() << "\n";
        SPECDEC_CHECK(f.good(), "cannot write ", path_);
        return;
    }
    if (fs::exists(path_)) fs::rename(path_, path_ + ".bak");  // never silently lose a long run
    std::ofstream f(path_, std::ios::trunc);
    f << nlohmann::json{{"fingerprint", fingerprint}}.dump() << "\n";
    SPECDEC_CHECK(f.good(), "cannot write ", path_);
}

const nlohmann::json* Checkpoint::find(const std::string& unit) const {
    const auto it = units_.find(unit);
    return it == units_.end() ? nullptr : &it->second;
}

void Checkpoint::append(const nlohmann::json& line) {
    SPECDEC_CHECK(line.contains("unit"), "checkpoint line without a unit key");
    std::ofstream f(path_, std::ios::app);
    f << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    f.flush();
    SPECDEC_CHECK(f.good(), "cannot append to ", path_);
    units_[line["unit"].get<std::string>()] = line;
}

std::vector<nlohmann::json> Checkpoint::load_all(const std::string& out_dir, const nlohmann::json& fingerprint) {
    std::vector<std::string> files;
    if (fs::is_directory(out_dir))
        for (const auto& e : fs::directory_iterator(out_dir)) {
            const std::string n = e.path().filename().string();
            if (n.rfind("checkpoint", 0) == 0 && n.size() > 6 && n.substr(n.size() - 6) == ".jsonl")
                files.push_back(e.path().string());
        }
    std::sort(files.begin(), files.end());
    std::vector<nlohmann::json> out;
    std::map<std::string, bool> seen;
    for (const auto& f : files) {
        nlohmann::json header;
        const auto lines = read_lines(f, header);
        check_fingerprint(f, fingerprint, header);
        for (const auto& l : lines)
            if (!seen[l["unit"].get<std::string>()]) {
                seen[l["unit"].get<std::string>()] = true;
                out.push_back(l);
            }
    }
    return out;
}

// A record's stored fields, each under its member's name (batch_id and
// speedup are recomputed when the report is rebuilt from the records).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TurnRecord, config, conv, turn, n_prompt, n_generated, prefill_s, decode_s,
                                   rep_decode_s, rounds, emitted, drafted, accepted, mean_accept_len, draft_s,
                                   tree_s, verify_s, commit_s, has_ssd, ssd_hit_rate, stall_s, finish_reason,
                                   matches_ar, trace_file, shared_prefill, draft_prefill_s, tokens, text)

nlohmann::json record_state(const BenchResult& r, const TurnRecord& t) {
    nlohmann::json j = t;
    j["lookup_rounds"] = t.lookup_rounds;
    j["accepted_hist"] = t.accepted_hist;
    j["auto_none"] = t.auto_none;
    j["auto_draft"] = t.auto_draft;
    j["config_label"] = r.configs[t.config].label();
    j["conv_id"] = r.conversations[t.conv].id;
    return j;
}

TurnRecord record_from_state(const BenchResult& r, const nlohmann::json& j) {
    TurnRecord t;
    t.config = j.at("config").get<int>();
    t.conv = j.at("conv").get<int>();
    SPECDEC_CHECK(t.config >= 0 && t.config < (int)r.configs.size() &&
                      r.configs[t.config].label() == j.at("config_label").get<std::string>(),
                  "checkpoint record of configuration '", j.at("config_label").get<std::string>(),
                  "' does not match this run's configurations");
    SPECDEC_CHECK(t.conv >= 0 && t.conv < (int)r.conversations.size() &&
                      r.conversations[t.conv].id == j.at("conv_id").get<std::string>(),
                  "checkpoint record of conversation '", j.at("conv_id").get<std::string>(),
                  "' does not match this run's prompts");
    j.get_to(t);
    // Added after checkpoints of the full protocol had been written: records
    // without it are from runs that had no lookup rounds to count.
    t.lookup_rounds = j.value("lookup_rounds", 0);
    t.accepted_hist = j.value("accepted_hist", std::vector<int>{});
    t.auto_none = j.value("auto_none", 0);
    t.auto_draft = j.value("auto_draft", 0);
    return t;
}

}  // namespace specdec::bench
