// Resumable prompt-set runs. Every finished unit of work (one turn of one
// batch of conversations, with the records of every configuration that ran
// on it) is appended to OUT/checkpoint.jsonl (OUT/checkpoint-I-of-N.jsonl for
// shard I of N) as one JSON line the moment it is done, so a stopped run
// loses at most the unit in flight. The first line is the run's fingerprint
// (options, model sha256s, prompts); `--resume` refuses a checkpoint with
// another fingerprint and skips the units it holds. The report is always
// built from the checkpoint records of every shard, so a run stopped and
// resumed reports what an uninterrupted one would (measured times aside).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_runner.h"

namespace specdec::bench {

class Checkpoint {
public:
    // Opens this shard's file: with resume, reads it (refusing another
    // fingerprint); without, an existing file is kept as *.jsonl.bak and a
    // fresh one started.
    Checkpoint(const std::string& out_dir, int shard_i, int shard_n, const nlohmann::json& fingerprint, bool resume);

    // The stored unit line (null if the unit is not done).
    const nlohmann::json* find(const std::string& unit) const;
    size_t size() const { return units_.size(); }
    // Appends {"unit": key, ...} and flushes it to disk.
    void append(const nlohmann::json& line);
    const std::string& path() const { return path_; }

    static std::string file_name(int shard_i, int shard_n);
    // Unit lines of every checkpoint file in out_dir (all shards, sorted by
    // name), checked against the fingerprint; the first line of a unit wins.
    static std::vector<nlohmann::json> load_all(const std::string& out_dir, const nlohmann::json& fingerprint);

private:
    std::string path_;
    std::map<std::string, nlohmann::json> units_;
};

// A record as stored in a unit line (every field, full precision) and back.
// `config_label` and `conv_id` are kept to check the indices on reading.
nlohmann::json record_state(const BenchResult& r, const TurnRecord& t);
TurnRecord record_from_state(const BenchResult& r, const nlohmann::json& j);

}  // namespace specdec::bench
