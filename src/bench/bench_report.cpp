#include "bench/bench_report.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <iomanip>
#include <set>
#include <sstream>

#include "core/error.h"
#include "specdec/result.h"

namespace specdec::bench {
namespace fs = std::filesystem;

namespace {
using Key = std::tuple<int, double, int, int, int>;  // threads, temp, batch, conv, turn

std::string f2(double v, int prec = 2) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", prec, v);
    return b;
}
std::string mib(uint64_t b) { return f2((double)b / (1024.0 * 1024.0), 1); }

// A share of the decode time in percent, one decimal. A measured share too
// small to show (tree and mask build, commit: microseconds per round against
// milliseconds of forwards) prints "<0.1", so it does not read as unmeasured.
std::string percent(double part, double whole) {
    if (whole <= 0) return "0";
    const double p = 100.0 * part / whole;
    return (p > 0 && p < 0.05) ? std::string("<0.1") : f2(p, 1);
}

// Per record: its decode tok/s over llama.cpp AR's on the same turn (same
// threads and temperature; batch-1 records only); 0 when there is none.
std::vector<double> llamacpp_ar_speedups(const BenchResult& r) {
    using K = std::tuple<int, double, int, int>;  // threads, temp, conv, turn
    std::map<K, double> ar;
    for (const auto& t : r.records) {
        const RunConfig& c = r.configs[t.config];
        if (c.external && c.method == "llamacpp-ar") ar[{c.threads, c.temp, t.conv, t.turn}] = t.tok_s();
    }
    std::vector<double> out;
    for (const auto& t : r.records) {
        const RunConfig& c = r.configs[t.config];
        const auto it = ar.find({c.threads, c.temp, t.conv, t.turn});
        out.push_back(c.batch == 1 && it != ar.end() && it->second > 0 ? t.tok_s() / it->second : 0.0);
    }
    return out;
}
}  // namespace

void compute_speedups(BenchResult& r) {
    std::map<Key, double> ar;
    for (const auto& t : r.records) {
        const RunConfig& c = r.configs[t.config];
        if (c.method == "ar" && !c.external) ar[{c.threads, c.temp, c.batch, t.conv, t.turn}] = t.tok_s();
    }
    for (auto& t : r.records) {
        const RunConfig& c = r.configs[t.config];
        const auto it = ar.find({c.threads, c.temp, c.external ? 1 : c.batch, t.conv, t.turn});
        t.speedup = it != ar.end() && it->second > 0 ? t.tok_s() / it->second : 0.0;
    }
}

nlohmann::json summarize(const BenchResult& r) {
    nlohmann::json out = nlohmann::json::array();
    const std::vector<double> lsp = llamacpp_ar_speedups(r);
    for (size_t ci = 0; ci < r.configs.size(); ++ci) {
        const RunConfig& c = r.configs[ci];
        std::vector<double> sp, tps;
        std::set<int> batches;
        int n = 0, gen = 0, prompt = 0, rounds = 0, emitted = 0, lookup = 0, matches = 0, compared = 0;
        double dec = 0, pre = 0, draft = 0, tree = 0, verify = 0, commit = 0, stall = 0;
        std::vector<double> hit;
        std::vector<int> hist;  // sequence-rounds by accepted draft tokens
        for (const auto& t : r.records) {
            if (t.config != (int)ci) continue;
            ++n;
            gen += t.n_generated;
            prompt += t.n_prompt;
            tps.push_back(t.tok_s());
            if (t.speedup > 0) sp.push_back(t.speedup);
            if (t.matches_ar >= 0) {
                ++compared;
                matches += t.matches_ar;
            }
            if (!batches.insert(t.batch_id).second) continue;  // batch-level figures once per batch
            dec += t.decode_s;
            pre += t.prefill_s;
            rounds += t.rounds;
            emitted += t.emitted;
            lookup += t.lookup_rounds;
            add_histogram(hist, t.accepted_hist);
            draft += t.draft_s;
            tree += t.tree_s;
            verify += t.verify_s;
            commit += t.commit_s;
            if (t.has_ssd) {
                hit.push_back(t.ssd_hit_rate);
                stall += t.stall_s;
            }
        }
        nlohmann::json s = c.to_json();
        s["config"] = ci;
        s["turns"] = n;
        s["generated_tokens"] = gen;
        s["prompt_tokens"] = prompt;
        s["decode_s"] = dec;
        s["prefill_s"] = pre;
        s["decode_tok_s"] = dec > 0 ? gen / dec : 0.0;
        s["prefill_tok_s"] = pre > 0 ? prompt / pre : 0.0;
        s["turn_tok_s_mean"] = mean(tps);
        s["speedup_mean"] = mean(sp);
        s["speedup_p50"] = percentile(sp, 50);
        s["speedup_p90"] = percentile(sp, 90);
        s["speedup_p99"] = percentile(sp, 99);
        s["speedup_turns"] = sp.size();
        if (!c.external) {
            s["rounds"] = rounds;
            s["emitted"] = emitted;
            s["lookup_rounds"] = lookup;  // sequence-rounds drafted by prompt lookup
            s["accepted_hist"] = hist;
            s["acceptance_by_position"] = acceptance_by_position(hist);
            s["mean_accept_len"] = c.method == "ar" ? 1.0 : (rounds > 0 ? (double)emitted / rounds : 0.0);
            s["time_split_s"] = {{"draft", draft},
                                 {"tree_mask", tree},
                                 {"verify", verify},
                                 {"commit", commit},
                                 {"other", std::max(0.0, dec - draft - tree - verify - commit)}};
            if (c.method == "ar") s["time_split_s"] = {{"draft", 0.0}, {"tree_mask", 0.0}, {"verify", dec},
                                                       {"commit", 0.0}, {"other", 0.0}};
        } else if (is_llamacpp_spec_method(c.method)) {  // llama-speculative-simple's counts (no rounds)
            int drafted = 0, accepted = 0;
            for (const auto& t : r.records)
                if (t.config == (int)ci) drafted += t.drafted, accepted += t.accepted;
            s["drafted"] = drafted;
            s["accepted"] = accepted;
            s["mean_accept_len"] = nullptr;
        } else {
            s["mean_accept_len"] = nullptr;
        }
        // Against llama.cpp AR on the same turns (when it ran).
        std::vector<double> lv;
        for (size_t i = 0; i < r.records.size(); ++i)
            if (r.records[i].config == (int)ci && lsp[i] > 0) lv.push_back(lsp[i]);
        s["speedup_llamacpp_ar_mean"] = mean(lv);
        s["speedup_llamacpp_ar_p50"] = percentile(lv, 50);
        s["speedup_llamacpp_ar_turns"] = lv.size();
        // SSD: mean of the per-turn hit rates; stall time summed like the decode time.
        s["ssd_hit_rate"] = hit.empty() ? nlohmann::json(nullptr) : nlohmann::json(mean(hit));
        s["stall_s"] = hit.empty() ? nlohmann::json(nullptr) : nlohmann::json(stall);
        s["greedy_matches_ar"] = compared ? nlohmann::json(matches) : nlohmann::json(nullptr);
        s["greedy_compared"] = compared;
        out.push_back(s);
    }
    return out;
}

nlohmann::json record_json(const BenchResult& r, const TurnRecord& t) {
    const RunConfig& c = r.configs[t.config];
    const Conversation& cv = r.conversations[t.conv];
    nlohmann::json j;
    j["config"] = t.config;
    j["label"] = c.label();
    j["method"] = c.method;
    j["threads"] = c.threads;
    j["temp"] = c.temp;
    j["batch"] = c.batch;
    j["tree_budget"] = c.tree_budget;
    j["tree_depth"] = c.tree_depth;
    j["draft_k"] = c.draft_k;
    j["conv"] = t.conv;
    j["conv_id"] = cv.id;
    j["set"] = cv.set;
    j["turn"] = t.turn;
    j["batch_id"] = t.batch_id;
    j["prompt_tokens"] = t.n_prompt;
    j["generated_tokens"] = t.n_generated;
    j["prefill_s"] = t.prefill_s;
    j["decode_s"] = t.decode_s;
    j["rep_decode_s"] = t.rep_decode_s;
    j["decode_tok_s"] = t.tok_s();
    j["speedup"] = t.speedup > 0 ? nlohmann::json(t.speedup) : nlohmann::json(nullptr);
    j["finish_reason"] = t.finish_reason;
    if (c.external) {
        for (const char* k : {"rounds", "emitted", "drafted", "accepted", "lookup_rounds", "mean_accept_len",
                              "draft_s", "tree_s", "verify_s", "commit_s"})
            j[k] = nullptr;
        if (is_llamacpp_spec_method(c.method)) {  // as llama-speculative-simple prints them
            j["drafted"] = t.drafted;
            j["accepted"] = t.accepted;
        }
    } else {
        j["rounds"] = t.rounds;
        j["emitted"] = t.emitted;
        j["drafted"] = t.drafted;
        j["accepted"] = t.accepted;
        j["lookup_rounds"] = t.lookup_rounds;
        j["accepted_hist"] = t.accepted_hist;
        if (c.method == "auto") {
            j["auto_none"] = t.auto_none;
            j["auto_draft"] = t.auto_draft;
        }
        j["mean_accept_len"] = t.mean_accept_len;
        j["draft_s"] = t.draft_s;
        j["tree_s"] = t.tree_s;
        j["verify_s"] = c.method == "ar" ? t.decode_s : t.verify_s;
        j["commit_s"] = t.commit_s;
    }
    j["ssd_hit_rate"] = t.has_ssd ? nlohmann::json(t.ssd_hit_rate) : nlohmann::json(nullptr);
    j["stall_s"] = t.has_ssd ? nlohmann::json(t.stall_s) : nlohmann::json(nullptr);
    j["matches_ar"] = t.matches_ar < 0 ? nlohmann::json(nullptr) : nlohmann::json(t.matches_ar == 1);
    j["trace_file"] = t.trace_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.trace_file);
    j["shared_prefill"] = t.shared_prefill;
    j["draft_prefill_s"] = t.shared_prefill ? nlohmann::json(t.draft_prefill_s) : nlohmann::json(nullptr);
    j["tokens"] = t.tokens;
    return j;
}

nlohmann::json to_json(const BenchResult& r) {
    nlohmann::json j;
    j["meta"] = r.meta;
    j["meta"].erase("micro_tokens");
    j["configs"] = nlohmann::json::array();
    for (const auto& c : r.configs) j["configs"].push_back(c.to_json());
    j["summary"] = summarize(r);
    j["records"] = nlohmann::json::array();
    const std::vector<double> lsp = llamacpp_ar_speedups(r);
    for (size_t i = 0; i < r.records.size(); ++i) {
        j["records"].push_back(record_json(r, r.records[i]));
        j["records"].back()["speedup_llamacpp_ar"] = lsp[i] > 0 ? nlohmann::json(lsp[i]) : nlohmann::json(nullptr);
    }
    j["unavailable"] = r.unavailable;
    j["skipped"] = r.skipped;
    j["micro"] = r.micro;
    j["llamacpp"] = r.llamacpp;
    if (j["llamacpp"].is_object()) j["llamacpp"].erase("runs");  // merged into records
    return j;
}

namespace {
std::string csv_field(const nlohmann::json& v) {
    if (v.is_null()) return "";
    if (v.is_string()) {
        std::string s = v.get<std::string>();
        if (s.find_first_of(",\"\n") == std::string::npos) return s;
        std::string q(1, '"');
        for (char ch : s) {
            if (ch == '"') q.push_back('"');
            q.push_back(ch);
        }
        q.push_back('"');
        return q;
    }
    if (v.is_array()) {
        std::string s;
        for (const auto& x : v) {
            if (!s.empty()) s.push_back(';');
            s.append(x.dump());
        }
        return s;
    }
    return v.dump();
}

const std::vector<std::string> kCsvCols = {
    "label",       "method",         "threads",    "temp",        "batch",        "tree_budget",  "tree_depth",
    "draft_k",     "conv_id",        "set",        "turn",        "prompt_tokens", "generated_tokens", "prefill_s",
    "decode_s",    "decode_tok_s",   "speedup",    "rounds",      "emitted",      "drafted",      "accepted",
    "mean_accept_len", "draft_s",    "tree_s",     "verify_s",    "commit_s",     "ssd_hit_rate", "stall_s",
    "finish_reason", "matches_ar",   "rep_decode_s", "speedup_llamacpp_ar", "lookup_rounds"};
}  // namespace

namespace {
// The llama.cpp rows side by side: speedups over specdec AR and over llama.cpp
// AR on the same turns, and the draft model's acceptance. sum: summarize(r).
std::string llamacpp_table(const BenchResult& r, const nlohmann::json& sum) {
    std::ostringstream md;
    bool any = false;
    for (const auto& s : sum) any = any || s["external"].get<bool>();
    if (!any) return "";
    auto sp = [](const nlohmann::json& s, const std::string& k) {
        return s[k + "_turns"].get<size_t>() > 0 ? f2(s[k + "_mean"].get<double>()) + " | " + f2(s[k + "_p50"].get<double>())
                                                 : std::string("n/a | n/a");
    };
    md << "## llama.cpp baselines\n\n";
    md << "| config | turns | gen tokens | decode tok/s | prefill tok/s | x specdec AR mean | p50 | x llama.cpp AR mean | "
          "p50 | drafted | accepted | accept % | greedy == llama.cpp AR |\n";
    md << "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& s : sum) {
        if (!s["external"].get<bool>()) continue;
        md << "| " << s["label"].get<std::string>() << " | " << s["turns"] << " | " << s["generated_tokens"] << " | "
           << f2(s["decode_tok_s"].get<double>()) << " | " << f2(s["prefill_tok_s"].get<double>(), 1) << " | "
           << sp(s, "speedup") << " | " << sp(s, "speedup_llamacpp_ar") << " | ";
        if (s.contains("drafted")) {
            const int d = s["drafted"].get<int>(), a = s["accepted"].get<int>();
            md << d << " | " << a << " | " << (d > 0 ? f2(100.0 * a / d, 1) : "n/a") << " | ";
        } else {
            md << "- | - | - | ";
        }
        md << (s["greedy_matches_ar"].is_null() ? std::string("-")
                                                : std::to_string(s["greedy_matches_ar"].get<int>()) + "/" +
                                                      std::to_string(s["greedy_compared"].get<int>()))
           << " |\n";
    }
    md << "\nllama.cpp on the same GGUF, threads and prompt token ids: `llamacpp-ar` (llama-cpp-python's "
          "Llama.generate), `llamacpp-pld` (its prompt lookup), and llama.cpp's own speculative types by its "
          "llama-speculative-simple example, whose figures are the ones it prints: `llamacpp-draft` (draft-simple, "
          "K drafted tokens, greedy draft; its prefill includes the draft's), `llamacpp-eagle3` (draft-eagle3, "
          "specdec's EAGLE-3 head as llama.cpp's eagle3 GGUF, chains of K) and `llamacpp-ngram-*` (ngram-simple, "
          "ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache, with the settings of llama.cpp's "
          "docs/speculative.md). Speedups are per turn, over specdec AR and over "
          "llama.cpp AR on the same turn. Greedy == llama.cpp AR compares the output with llamacpp-ar's: llama.cpp's "
          "logits depend on the batch, so verifying drafts in batches can change its greedy tokens.\n\n";
    return md.str();
}
}  // namespace

namespace {

// "- memory read ceiling ...": the read probe of each thread count this run
// measured, and how much of it the AR rows' decode read (target bytes a
// step times AR tok/s). Empty when nothing was measured (AR micro-mode only,
// or a report of an older run). summary: summarize(r).
std::string read_ceiling_line(const BenchResult& r, const nlohmann::json& summary) {
    const auto& m = r.meta;
    if (!m.contains("read_bandwidth") || !m["read_bandwidth"].is_object() || m["read_bandwidth"].empty()) return "";
    const double token_bytes = m.value("target_bytes_per_token", 0.0);
    std::ostringstream md;
    md << std::fixed << std::setprecision(1) << "- memory read ceiling (a streaming read of a 1 GiB buffer, best of 5, in this run):";
    bool first = true;
    for (const auto& [threads, bw] : m["read_bandwidth"].items()) {
        const double gbps = bw.value("bytes_per_s", 0.0) / 1e9;
        md << (first ? " " : "; ") << gbps << " GB/s at t=" << threads;
        first = false;
        for (const auto& s : summary) {
            if (s.value("method", "") != "ar" || s.value("external", false) || std::to_string(s.value("threads", 0)) != threads)
                continue;
            const double tok_s = s.value("decode_tok_s", 0.0);
            if (tok_s <= 0 || token_bytes <= 0 || gbps <= 0) continue;
            std::ostringstream temp;  // as the labels write it: T=0, T=0.7
            temp << s.value("temp", 0.0);
            md << " (AR decode at T=" << temp.str() << ", batch " << s.value("batch", 1) << ": "
               << tok_s * token_bytes / 1e9 << " GB/s, " << std::setprecision(0)
               << 100.0 * tok_s * token_bytes / 1e9 / gbps << std::setprecision(1) << " %)";
        }
    }
    if (token_bytes > 0) md << "; one target step reads " << std::setprecision(2) << token_bytes / 1e9 << " GB";
    md << "\n";
    return md.str();
}

}  // namespace

std::string markdown(const BenchResult& r) {
    std::ostringstream md;
    const auto& m = r.meta;
    const nlohmann::json sum = summarize(r);  // one pass over the records for every section below
    md << "# specdec bench\n\n";
    md << "- target: `" << m.value("target", nlohmann::json::object()).value("path", "") << "` (sha256 "
       << m.value("target", nlohmann::json::object()).value("sha256", "").substr(0, 16) << "…)\n";
    if (m.contains("draft") && m["draft"].is_object())
        md << "- draft: `" << m["draft"].value("path", "") << "` (sha256 " << m["draft"].value("sha256", "").substr(0, 16)
           << "…)\n";
    md << "- CPU: " << m.value("cpu_model", "") << " (" << m.value("cpu_count", 0) << " logical CPUs); git "
       << m.value("git_revision", "") << "; " << m.value("date", "") << "\n";
    md << "- command: `" << m.value("command", "") << "`\n";
    md << read_ceiling_line(r, sum);
    if (m.contains("run")) {
        const auto& run = m["run"];
        md << "- order: " << run.value("order", "") << (run.value("shared_prefill", false) ? ", one shared prefill per turn" : "")
           << "; units run now " << run.value("units_run", 0) << ", from the checkpoint " << run.value("units_resumed", 0)
           << (run.value("stopped", false) ? "; **stopped early (--stop-after): partial report, --resume goes on**" : "")
           << "\n";
    }
    if (m.contains("provenance") && !m["provenance"]["git_revisions"].empty()) {
        // A resumed run can hold units from several sessions: say which builds
        // made them and how loaded the machine was.
        const auto& p = m["provenance"];
        md << "- units by git revision:";
        for (const auto& [rev, n] : p["git_revisions"].items()) md << " " << rev.substr(0, 12) << (rev.size() > 40 ? rev.substr(40) : "") << " (" << n.get<int>() << ")";
        md << "; made " << p.value("first_unit_at", "") << " to " << p.value("last_unit_at", "");
        if (p.contains("load_average_1m"))
            md << "; 1-min load average at unit start min " << p["load_average_1m"].value("min", 0.0) << ", p50 "
               << p["load_average_1m"].value("p50", 0.0) << ", max " << p["load_average_1m"].value("max", 0.0);
        md << "\n";
    }
    md << "\n";

    if (!r.micro.empty()) {
        md << "## AR micro-benchmark\n\n";
        std::map<int, nlohmann::json> lc;
        if (r.llamacpp.contains("micro"))
            for (const auto& x : r.llamacpp["micro"]) lc[x["threads"].get<int>()] = x;
        md << "| threads | prefill tok/s | llama.cpp prefill tok/s | ratio | decode tok/s | llama.cpp decode tok/s | "
              "ratio |";
        for (const auto& f : r.micro[0]["forward"])
            if (f["n"].get<int>() != 1) md << " fwd(" << f["n"].get<int>() << ")/fwd(1) |";
        md << " read GB/s | decode GB/s | % of roofline | peak RSS MiB | file+KV MiB |\n|---|---|---|---|---|---|---|";
        for (const auto& f : r.micro[0]["forward"])
            if (f["n"].get<int>() != 1) md << "---|";
        md << "---|---|---|---|---|\n";
        for (const auto& x : r.micro) {
            const int t = x["threads"].get<int>();
            const double p = x["prefill_tok_s"].get<double>(), d = x["decode_tok_s"].get<double>();
            std::string lp = "n/a", ld = "n/a", rp = "n/a", rd = "n/a";
            if (lc.count(t)) {
                const double a = lc[t]["prefill_tok_s"].get<double>(), b = lc[t]["decode_tok_s"].get<double>();
                lp = f2(a, 1), ld = f2(b, 1), rp = f2(p / a), rd = f2(d / b);
            }
            md << "| " << t << " | " << f2(p, 1) << " | " << lp << " | " << rp << " | " << f2(d, 1) << " | " << ld
               << " | " << rd << " |";
            for (const auto& f : x["forward"])
                if (f["n"].get<int>() != 1) md << " " << f2(f["ratio"].get<double>()) << " |";
            const double bw = x.value("read_bw_bytes_s", 0.0);
            const double tb = (double)x.value("weight_bytes_per_token", (uint64_t)0);
            if (bw > 0)
                md << " " << f2(bw / 1e9, 1) << " | " << f2(tb * d / 1e9, 1) << " | "
                   << f2(100.0 * x.value("decode_roofline_fraction", 0.0), 0) << " |";
            else
                md << " n/a | n/a | n/a |";
            md << " " << mib(x["peak_rss_bytes"].get<uint64_t>()) << " | "
               << mib(x["model_file_bytes"].get<uint64_t>() + x["kv_cache_bytes"].get<uint64_t>()) << " |\n";
        }
        // The same forwards on llama.cpp (tools/bench_llamacpp.py), when it ran them.
        std::ostringstream lf_rows;
        for (const auto& x : r.micro) {
            const int t = x["threads"].get<int>();
            if (!lc.count(t) || !lc[t].contains("forward")) continue;
            std::map<int, nlohmann::json> lf;
            for (const auto& f : lc[t]["forward"]) lf[f["n"].get<int>()] = f;
            for (const auto& f : x["forward"]) {
                const int n = f["n"].get<int>();
                if (!lf.count(n)) continue;
                const double a = f["seconds"].get<double>(), b = lf[n]["seconds"].get<double>();
                lf_rows << "| " << t << " | " << n << " | " << f2(1e3 * a) << " | " << f2(1e3 * b) << " | "
                        << f2(b / a) << " | " << f2(f["ratio"].get<double>()) << " | "
                        << f2(lf[n]["ratio"].get<double>()) << " |\n";
            }
        }
        if (!lf_rows.str().empty())
            md << "\nVerification-shaped forwards against llama.cpp (the same N tokens after the same prefix, "
                  "every row with logits; llama.cpp keeps full logits, specdec each row's greedy token):\n\n"
                  "| threads | N | specdec ms | llama.cpp ms | ratio | specdec fwd(N)/fwd(1) | llama.cpp "
                  "fwd(N)/fwd(1) |\n|---|---|---|---|---|---|---|\n"
               << lf_rows.str();
        if (r.micro[0].contains("kernels")) {
            md << "\nKernels (the ISA level whose tiles each weight type ran, per row bucket, chosen by measurement):";
            for (const auto& [t, k] : r.micro[0]["kernels"].items()) md << " " << t << " " << k.get<std::string>() << ";";
            md << "\n";
        }
        md << "\nfwd(N)/fwd(1): time of one forward of N chained rows (the LM head over every row, each row reduced to its greedy token as greedy verification needs, not kept as full logits) after the "
           << r.micro[0]["prefill_tokens"].get<int>()
           << "-token prefix, rolled back with KvCache::truncate, over the time of a 1-row forward. Ratios "
              "specdec/llama.cpp > 1 mean specdec is faster. read GB/s: a streaming read of a 1 GiB buffer on "
              "that many threads (best of 5), measured in the same run; decode GB/s: the weight bytes one "
              "token reads times decode tok/s; % of roofline: the one over the other.\n\n";
    }

    if (!r.configs.empty()) {
        md << "## Summary per configuration\n\n";
        md << "| config | turns | gen tokens | decode tok/s | speedup mean | p50 | p90 | p99 | accept len | "
              "draft % | tree+mask % | verify % | commit % | ssd hit | stall % | greedy == AR |\n";
        md << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
        for (const auto& s : sum) {
            const std::string label = s["label"].get<std::string>();
            md << "| " << label << " | " << s["turns"] << " | " << s["generated_tokens"] << " | "
               << f2(s["decode_tok_s"].get<double>()) << " | ";
            if (s["speedup_turns"].get<size_t>() > 0)
                md << f2(s["speedup_mean"].get<double>()) << " | " << f2(s["speedup_p50"].get<double>()) << " | "
                   << f2(s["speedup_p90"].get<double>()) << " | " << f2(s["speedup_p99"].get<double>()) << " | ";
            else
                md << "n/a | n/a | n/a | n/a | ";
            md << (s["mean_accept_len"].is_null() ? std::string("n/a") : f2(s["mean_accept_len"].get<double>()))
               << " | ";
            if (s.contains("time_split_s")) {
                const double d = s["decode_s"].get<double>();
                for (const char* k : {"draft", "tree_mask", "verify", "commit"})
                    md << percent(s["time_split_s"][k].get<double>(), d) << " | ";
            } else {
                md << "n/a | n/a | n/a | n/a | ";
            }
            if (s["ssd_hit_rate"].is_null()) {
                md << "- | - | ";
            } else {
                const double d = s["decode_s"].get<double>();
                md << f2(s["ssd_hit_rate"].get<double>()) << " | "
                   << percent(s["stall_s"].get<double>(), d) << " | ";
            }
            md << (s["greedy_matches_ar"].is_null()
                       ? std::string("-")
                       : std::to_string(s["greedy_matches_ar"].get<int>()) + "/" +
                             std::to_string(s["greedy_compared"].get<int>()))
               << " |\n";
        }
        md << "\nSpeedup: per turn, the configuration's decode tok/s over the AR baseline's on the same turn "
              "(same threads, temperature and batch; llama.cpp rows: over specdec AR, and their greedy == AR is against "
              "llama.cpp AR's tokens). Decode tok/s = "
              "generated tokens / decode time (prefill excluded). Accept length = tokens per target forward. "
              "SSD: draft % is the target's stall waiting for the draft side; ssd hit is the speculation-cache "
              "hit rate (mean over turns); its threads are split, the draft side taking --ssd-draft-threads.\n\n";
        // Acceptance at each draft position, for the configurations that drafted.
        bool any = false;
        for (const auto& s : sum)
            if (s.contains("acceptance_by_position") && !s["acceptance_by_position"].empty()) any = true;
        if (any) {
            md << "### Acceptance by draft position\n\n| config | rounds | position 1 | 2 | 3 | 4 | 5 | 6 |\n"
                  "|---|---|---|---|---|---|---|---|\n";
            for (const auto& s : sum) {
                if (!s.contains("acceptance_by_position") || s["acceptance_by_position"].empty()) continue;
                const auto a = s["acceptance_by_position"].get<std::vector<double>>();
                int rounds = 0;
                for (int c : s["accepted_hist"].get<std::vector<int>>()) rounds += c;
                md << "| " << s["label"].get<std::string>() << " | " << rounds << " | ";
                for (size_t i = 0; i < 6; ++i) md << (i < a.size() ? f2(a[i]) : std::string("-")) << " | ";
                md << "\n";
            }
            md << "\nPosition i: of the sequence-rounds that accepted the first i - 1 draft tokens, the share that "
                  "accepted the i-th too (a round whose draft was shorter counts as not accepting it). Trees: "
                  "position = depth on the accepted path.\n\n";
        }
    }
    md << llamacpp_table(r, sum);
    if (!r.unavailable.empty()) {
        md << "## Not measured\n\n";
        for (auto it = r.unavailable.begin(); it != r.unavailable.end(); ++it)
            md << "- `" << it.key() << "`: " << it.value().get<std::string>() << "\n";
        md << "\n";
    }
    if (r.llamacpp.contains("error")) md << "llama.cpp baseline: " << r.llamacpp["error"].get<std::string>() << "\n\n";
    if (!r.skipped.empty()) {
        md << "## Skipped turns\n\n";
        for (const auto& s : r.skipped)
            md << "- " << s["conv"].get<std::string>() << " turn " << s["turn"].get<int>() + 1 << " ("
               << s["prompt_tokens"] << " tokens): " << s["reason"].get<std::string>() << "\n";
        md << "\n";
    }
    return md.str();
}

void write_reports(const BenchResult& r) {
    const fs::path dir(r.opts.out_dir);
    fs::create_directories(dir);
    const nlohmann::json j = to_json(r);
    {
        std::ofstream f(dir / "bench.json");
        SPECDEC_CHECK(f.good(), "cannot write ", (dir / "bench.json").string());
        f << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    {
        std::ofstream f(dir / "bench.csv");
        for (size_t i = 0; i < kCsvCols.size(); ++i) f << (i ? "," : "") << kCsvCols[i];
        f << "\n";
        for (const auto& rec : j["records"]) {
            for (size_t i = 0; i < kCsvCols.size(); ++i) f << (i ? "," : "") << csv_field(rec[kCsvCols[i]]);
            f << "\n";
        }
    }
    {
        std::ofstream f(dir / "bench.md");
        f << markdown(r);
    }
}

}  // namespace specdec::bench
