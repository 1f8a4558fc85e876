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

nlohmann::json record_state(const BenchResult& r, const TurnRecord& t) {
    nlohmann::json j;
    j["config"] = t.config;
    j["config_label"] = r.configs[t.config].label();
    j["conv"] = t.conv;
    j["conv_id"] = r.conversations[t.conv].id;
    j["turn"] = t.turn;
    j["n_prompt"] = t.n_prompt;
    j["n_generated"] = t.n_generated;
    j["prefill_s"] = t.prefill_s;
    j["decode_s"] = t.decode_s;
    j["rep_decode_s"] = t.rep_decode_s;
    j["rounds"] = t.rounds;
    j["emitted"] = t.emitted;
    j["drafted"] = t.drafted;
    j["accepted"] = t.accepted;
    j["mean_accept_len"] = t.mean_accept_len;
    j["draft_s"] = t.draft_s;
    j["tree_s"] = t.tree_s;
    j["verify_s"] = t.verify_s;
    j["commit_s"] = t.commit_s;
    j["has_ssd"] = t.has_ssd;
    j["ssd_hit_rate"] = t.ssd_hit_rate;
    j["stall_s"] = t.stall_s;
    j["finish_reason"] = t.finish_reason;
    j["matches_ar"] = t.matches_ar;
    j["trace_file"] = t.trace_file;
    j["shared_prefill"] = t.shared_prefill;
    j["draft_prefill_s"] = t.draft_prefill_s;
    j["tokens"] = t.tokens;
    j["text"] = t.text;
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
    t.turn = j.at("turn").get<int>();
    t.n_prompt = j.at("n_prompt").get<int>();
    t.n_generated = j.at("n_generated").get<int>();
    t.prefill_s = j.at("prefill_s").get<double>();
    t.decode_s = j.at("decode_s").get<double>();
    t.rep_decode_s = j.at("rep_decode_s").get<std::vector<double>>();
    t.rounds = j.at("rounds").get<int>();
    t.emitted = j.at("emitted").get<int>();
    t.drafted = j.at("drafted").get<int>();
    t.accepted = j.at("accepted").get<int>();
    t.mean_accept_len = j.at("mean_accept_len").get<double>();
    t.draft_s = j.at("draft_s").get<double>();
    t.tree_s = j.at("tree_s").get<double>();
    t.verify_s = j.at("verify_s").get<double>();
    t.commit_s = j.at("commit_s").get<double>();
    t.has_ssd = j.at("has_ssd").get<bool>();
    t.ssd_hit_rate = j.at("ssd_hit_rate").get<double>();
    t.stall_s = j.at("stall_s").get<double>();
    t.finish_reason = j.at("finish_reason").get<std::string>();
    t.matches_ar = j.at("matches_ar").get<int>();
    t.trace_file = j.at("trace_file").get<std::string>();
    t.shared_prefill = j.at("shared_prefill").get<bool>();
    t.draft_prefill_s = j.at("draft_prefill_s").get<double>();
    t.tokens = j.at("tokens").get<std::vector<int32_t>>();
    t.text = j.at("text").get<std::string>();
    return t;
}

}  // namespace specdec::bench
