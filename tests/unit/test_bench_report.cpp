#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "bench/bench_options.h"
#include "bench/bench_report.h"
#include "bench/checkpoint.h"
#include "bench/prompt_set.h"
#include "bench/sys_info.h"
#include "core/error.h"

using namespace specdec;
using namespace specdec::bench;

TEST(BenchOptions, ParsesCommaLists) {
    EXPECT_EQ(parse_int_list("1, 2,4", "x"), (std::vector<int>{1, 2, 4}));
    EXPECT_EQ(parse_double_list("0,0.7", "x"), (std::vector<double>{0.0, 0.7}));
    EXPECT_EQ(parse_string_list("ar,tree,,ngram"), (std::vector<std::string>{"ar", "tree", "ngram"}));
    EXPECT_THROW(parse_int_list("1,x", "--batch"), Error);
    EXPECT_THROW(parse_int_list("", "--batch"), Error);
    EXPECT_THROW(parse_double_list("0.5q", "--temp"), Error);
}

TEST(BenchOptions, PercentileMatchesNumpyLinear) {
    EXPECT_DOUBLE_EQ(percentile({}, 50), 0.0);
    EXPECT_DOUBLE_EQ(percentile({3.0}, 99), 3.0);
    EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
    EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 90), 4.6);
    EXPECT_NEAR(percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 99), 9.91, 1e-12);
    EXPECT_DOUBLE_EQ(mean({1, 2, 6}), 3.0);
}

TEST(BenchSysInfo, Sha256KnownVectors) {
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    EXPECT_GT(peak_rss_bytes(), 0u);
}

TEST(BenchReport, SpeedupIsPerTurnRatioToAr) {
    BenchResult r;
    r.conversations = {{"c0", "humaneval", {"a"}}, {"c1", "humaneval", {"b"}}};
    RunConfig ar;
    ar.method = "ar";
    ar.threads = 2;
    RunConfig tree = ar;
    tree.method = "tree";
    tree.tree_budget = 16;
    tree.tree_depth = 5;
    r.configs = {ar, tree};
    auto rec = [](int cfg, int conv, int bid, int gen, double dec, int rounds, int emitted) {
        TurnRecord t;
        t.config = cfg;
        t.conv = conv;
        t.batch_id = bid;
        t.n_generated = gen;
        t.decode_s = dec;
        t.rounds = rounds;
        t.emitted = emitted;
        t.mean_accept_len = rounds ? (double)emitted / rounds : 0;
        return t;
    };
    r.records = {rec(0, 0, 0, 10, 1.0, 9, 9), rec(0, 1, 1, 20, 1.0, 19, 19), rec(1, 0, 2, 10, 0.5, 3, 9),
                 rec(1, 1, 3, 20, 0.25, 5, 19)};
    // Tree records split their decode time; the tree and mask build is a few
    // microseconds per round, which must still show as measured.
    for (int i : {2, 3}) {
        r.records[i].draft_s = 0.25 * r.records[i].decode_s;
        r.records[i].verify_s = 0.75 * r.records[i].decode_s - 2e-5;
        r.records[i].tree_s = 1e-5;
        r.records[i].commit_s = 1e-5;
    }
    compute_speedups(r);
    EXPECT_DOUBLE_EQ(r.records[2].speedup, 2.0);
    EXPECT_DOUBLE_EQ(r.records[3].speedup, 4.0);
    const auto s = summarize(r);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_DOUBLE_EQ(s[1]["speedup_mean"].get<double>(), 3.0);
    EXPECT_DOUBLE_EQ(s[1]["speedup_p50"].get<double>(), 3.0);
    EXPECT_DOUBLE_EQ(s[1]["decode_tok_s"].get<double>(), 30 / 0.75);
    EXPECT_DOUBLE_EQ(s[1]["mean_accept_len"].get<double>(), 28.0 / 8.0);
    EXPECT_DOUBLE_EQ(s[0]["mean_accept_len"].get<double>(), 1.0);
    const std::string md = markdown(r);
    EXPECT_NE(md.find("| tree b=16 d=5 t=2 |"), std::string::npos);
    // draft 25 %, tree+mask and commit measured but below 0.05 %, verify 75 %
    EXPECT_NE(md.find("| 25.0 | <0.1 | 75.0 | <0.1 |"), std::string::npos) << md;
    // AR neither drafts nor builds trees: exact zeros stay 0.0
    EXPECT_NE(md.find("| 0.0 | 0.0 | 100.0 | 0.0 |"), std::string::npos) << md;
}

TEST(BenchReport, SsdRecordsCarryHitRateAndStall) {
    BenchResult r;
    r.conversations = {{"c0", "humaneval", {"a"}}, {"c1", "humaneval", {"b"}}};
    RunConfig ar;
    ar.method = "ar";
    ar.threads = 2;
    RunConfig ssd = ar;
    ssd.method = "ssd";
    ssd.ssd_k = 4;
    ssd.fanout = "uniform";
    ssd.saguaro_c = 0.5;
    r.configs = {ar, ssd};
    int bid = 0;
    auto rec = [&bid](int cfg, int conv, int gen, double dec, bool has_ssd, double hit, double stall) {
        TurnRecord t;
        t.config = cfg;
        t.conv = conv;
        t.batch_id = bid++;  // hit rate and stall are batch-level figures
        t.n_generated = gen;
        t.decode_s = dec;
        t.rounds = 4;
        t.emitted = 8;
        t.has_ssd = has_ssd;
        t.ssd_hit_rate = hit;
        t.stall_s = stall;
        return t;
    };
    r.records = {rec(0, 0, 10, 1.0, false, 0, 0), rec(0, 1, 10, 1.0, false, 0, 0), rec(1, 0, 10, 0.5, true, 0.25, 0.1),
                 rec(1, 1, 10, 0.5, true, 0.75, 0.3)};
    compute_speedups(r);
    const auto s = summarize(r);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_TRUE(s[0]["ssd_hit_rate"].is_null());
    EXPECT_TRUE(s[0]["stall_s"].is_null());
    EXPECT_DOUBLE_EQ(s[1]["ssd_hit_rate"].get<double>(), 0.5);
    EXPECT_DOUBLE_EQ(s[1]["stall_s"].get<double>(), 0.4);
    EXPECT_DOUBLE_EQ(s[1]["speedup_mean"].get<double>(), 2.0);
    EXPECT_EQ(r.configs[1].label(), "ssd k=4 uniform C=0.5 t=2");
    EXPECT_EQ(s[1]["fanout"].get<std::string>(), "uniform");
    const std::string md = markdown(r);
    // hit 0.50, stall 0.4 s of 1.0 s decode = 40.0 %
    EXPECT_NE(md.find("| ssd k=4 uniform C=0.5 t=2 |"), std::string::npos);
    EXPECT_NE(md.find("| 0.50 | 40.0 |"), std::string::npos);
}

TEST(BenchPrompts, LoadsJsonlWithLimitAndRejectsBadLines) {
    const std::string path = ::testing::TempDir() + "bench_prompts.jsonl";
    {
        std::FILE* f = std::fopen(path.c_str(), "w");
        ASSERT_NE(f, nullptr);
        std::fputs("{\"id\": \"a\", \"set\": \"humaneval\", \"turns\": [\"x\"]}\n\n"
                   "{\"id\": 7, \"turns\": [\"y\", \"z\"]}\n{\"id\": \"c\", \"turns\": [\"w\"]}\n",
                   f);
        std::fclose(f);
    }
    const auto all = load_prompts_jsonl(path);
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[0].set, "humaneval");
    EXPECT_EQ(all[1].id, "7");
    EXPECT_EQ(all[1].turns, (std::vector<std::string>{"y", "z"}));
    EXPECT_EQ(load_prompts_jsonl(path, 2).size(), 2u);
    {
        std::FILE* f = std::fopen(path.c_str(), "w");
        std::fputs("{\"id\": \"a\", \"turns\": []}\n", f);
        std::fclose(f);
    }
    EXPECT_THROW(load_prompts_jsonl(path), Error);
}

namespace {
BenchResult checkpoint_result() {
    BenchResult r;
    r.conversations = {{"c0", "humaneval", {"a"}}, {"c1", "sharegpt", {"b", "c"}}};
    RunConfig ar;
    ar.method = "ar";
    ar.threads = 2;
    RunConfig ssd = ar;
    ssd.method = "ssd";
    ssd.ssd_k = 4;
    ssd.fanout = "geometric";
    ssd.saguaro_c = 1;
    r.configs = {ar, ssd};
    return r;
}

std::string temp_dir(const std::string& name) {
    const auto d = std::filesystem::temp_directory_path() / ("specdec_ckpt_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(d);
    return d.string();
}
}  // namespace

TEST(BenchCheckpoint, RecordRoundTripsExactly) {
    const BenchResult r = checkpoint_result();
    TurnRecord t;
    t.config = 1;
    t.conv = 1;
    t.turn = 1;
    t.n_prompt = 37;
    t.n_generated = 5;
    t.prefill_s = 0.1234567890123;
    t.decode_s = 1.0 / 3.0;
    t.rep_decode_s = {1.0 / 3.0, 0.5};
    t.rounds = 3;
    t.emitted = 5;
    t.drafted = 9;
    t.accepted = 2;
    t.lookup_rounds = 2;
    t.mean_accept_len = 5.0 / 3.0;
    t.draft_s = 0.01;
    t.verify_s = 0.2;
    t.has_ssd = true;
    t.ssd_hit_rate = 0.75;
    t.stall_s = 0.003;
    t.finish_reason = "stop";
    t.matches_ar = 1;
    t.shared_prefill = true;
    t.draft_prefill_s = 0.04;
    t.tokens = {1, 2, 151643};
    t.text = "x \"y\"\n";
    const nlohmann::json j = nlohmann::json::parse(record_state(r, t).dump());
    const TurnRecord u = record_from_state(r, j);
    EXPECT_EQ(record_state(r, u), record_state(r, t));
    EXPECT_EQ(u.decode_s, t.decode_s);  // full precision through the text form
    EXPECT_EQ(u.tokens, t.tokens);
    EXPECT_EQ(u.text, t.text);
    EXPECT_EQ(u.lookup_rounds, 2);
    // Records written before lookup rounds were counted still resume (as 0);
    // a record missing any older field is refused.
    nlohmann::json old = j;
    old.erase("lookup_rounds");
    EXPECT_EQ(record_from_state(r, old).lookup_rounds, 0);
    old.erase("accepted");
    EXPECT_ANY_THROW(record_from_state(r, old));
    // A record of another configuration or conversation is refused.
    nlohmann::json bad = j;
    bad["config_label"] = "tree b=8 d=5 t=2";
    EXPECT_THROW(record_from_state(r, bad), Error);
    bad = j;
    bad["conv_id"] = "other";
    EXPECT_THROW(record_from_state(r, bad), Error);
}

TEST(BenchCheckpoint, ResumeSkipsDoneUnitsAndRefusesOtherOptions) {
    const std::string dir = temp_dir("resume");
    const nlohmann::json fp = {{"options", {{"n_predict", 64}}}, {"target_sha256", "aa"}};
    {
        Checkpoint c(dir, 0, 1, fp, false);
        EXPECT_EQ(c.size(), 0u);
        c.append({{"unit", "u1"}, {"records", nlohmann::json::array()}});
        c.append({{"unit", "u2"}, {"records", nlohmann::json::array()}});
    }
    // A run killed mid-write leaves a torn last line: ignored on resume.
    { std::ofstream(dir + "/checkpoint.jsonl", std::ios::app) << "{\"unit\": \"u3\", \"rec"; }
    {
        Checkpoint c(dir, 0, 1, fp, true);
        EXPECT_EQ(c.size(), 2u);
        EXPECT_NE(c.find("u1"), nullptr);
        EXPECT_EQ(c.find("u3"), nullptr);
        c.append({{"unit", "u3"}, {"records", nlohmann::json::array()}});
    }
    EXPECT_EQ(Checkpoint::load_all(dir, fp).size(), 3u);
    // Other options: a clear refusal naming what differs.
    nlohmann::json other = fp;
    other["options"]["n_predict"] = 128;
    try {
        Checkpoint c(dir, 0, 1, other, true);
        FAIL() << "resumed with other options";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("n_predict"), std::string::npos) << e.what();
    }
    EXPECT_THROW(Checkpoint::load_all(dir, other), Error);
    // Without --resume the old file is kept aside, not lost.
    {
        Checkpoint c(dir, 0, 1, other, false);
        EXPECT_EQ(c.size(), 0u);
    }
    EXPECT_TRUE(std::filesystem::exists(dir + "/checkpoint.jsonl.bak"));
    std::filesystem::remove_all(dir);
}

TEST(BenchCheckpoint, ShardsHaveTheirOwnFilesAndMerge) {
    const std::string dir = temp_dir("shards");
    const nlohmann::json fp = {{"options", {{"limit", 4}}}};
    EXPECT_EQ(Checkpoint::file_name(0, 1), "checkpoint.jsonl");
    EXPECT_EQ(Checkpoint::file_name(1, 3), "checkpoint-2-of-3.jsonl");
    {
        Checkpoint a(dir, 0, 2, fp, false), b(dir, 1, 2, fp, false);
        a.append({{"unit", "turn 0 c0"}, {"records", nlohmann::json::array()}});
        b.append({{"unit", "turn 0 c1"}, {"records", nlohmann::json::array()}});
        b.append({{"unit", "turn 0 c0"}, {"records", nlohmann::json::array()}});  // a duplicate counts once
    }
    const auto all = Checkpoint::load_all(dir, fp);
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0]["unit"], "turn 0 c0");
    EXPECT_EQ(all[1]["unit"], "turn 0 c1");
    std::filesystem::remove_all(dir);
}
