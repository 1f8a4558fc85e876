#include "bench/bench_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "bench/sys_info.h"
#include "core/clock.h"
#include "core/error.h"
#include "runtime/engine.h"
#include "core/thread_pool.h"
#include "sched/ssd_scheduler.h"
#include "sched/sync_scheduler.h"

namespace specdec::bench {
namespace fs = std::filesystem;

namespace {
std::string fmt_dur(double s) {
    char b[32];
    if (s >= 3600) std::snprintf(b, sizeof b, "%dh%02dm", (int)(s / 3600), (int)std::fmod(s / 60, 60));
    else if (s >= 60) std::snprintf(b, sizeof b, "%dm%02ds", (int)(s / 60), (int)std::fmod(s, 60));
    else std::snprintf(b, sizeof b, "%.0fs", s);
    return b;
}
std::string fmt_num(double v) {
    std::ostringstream ss;
    ss << v;
    return ss.str();
}
}  // namespace

std::string RunConfig::label() const {
    std::string s = method;
    if (method == "tree") s += " b=" + std::to_string(tree_budget) + " d=" + std::to_string(tree_depth);
    if (method == "chain" || method == "ngram") s += " k=" + std::to_string(draft_k);
    if (method == "ssd") s += " k=" + std::to_string(ssd_k) + " " + fanout + " C=" + fmt_num(saguaro_c);
    if (batch != 1) s += " B=" + std::to_string(batch);
    if (temp != 0) s += " T=" + fmt_num(temp);
    s += " t=" + std::to_string(threads);
    return s;
}

nlohmann::json RunConfig::to_json() const {
    nlohmann::json j;
    j["method"] = method;
    j["label"] = label();
    j["tree_budget"] = tree_budget;
    j["tree_depth"] = tree_depth;
    j["tree_topk"] = tree_topk;
    j["draft_k"] = draft_k;
    j["ssd_k"] = ssd_k;
    j["fanout"] = fanout;
    j["saguaro_c"] = saguaro_c;
    j["batch"] = batch;
    j["temp"] = temp;
    j["threads"] = threads;
    j["external"] = external;
    return j;
}

Progress::Progress(int total, bool quiet) : total_(total), quiet_(quiet), tty_(isatty(2) != 0), t0_(now_s()) {}

void Progress::step(const std::string& what, double tok_s) {
    ++done_;
    if (quiet_) return;
    const double el = now_s() - t0_;
    const double eta = done_ > 0 && total_ > done_ ? el / done_ * (total_ - done_) : 0.0;
    char b[512];
    std::snprintf(b, sizeof b, "[%d/%d] %s | %.1f tok/s | %s elapsed, ETA %s", done_, total_, what.c_str(), tok_s,
                  fmt_dur(el).c_str(), fmt_dur(eta).c_str());
    if (tty_) std::fprintf(stderr, "\r\033[K%s", b);
    else std::fprintf(stderr, "%s\n", b);
    std::fflush(stderr);
}

void Progress::note(const std::string& msg) {
    if (quiet_) return;
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "%s\n", msg.c_str());
}

void Progress::finish() {
    if (!quiet_ && tty_) std::fprintf(stderr, "\n");
}

bool method_available(const std::string& m, const BenchOptions& o, std::string* why) {
    if (m == "ar" || m == "ngram") return true;
    if (m == "chain" || m == "tree") {
        if (o.draft.empty()) {
            if (why) *why = "method '" + m + "' needs a draft model (-d DRAFT)";
            return false;
        }
        return true;
    }
    if (m == "ssd") {
        if (o.draft.empty()) {
            if (why) *why = "method 'ssd' needs a draft model (-d DRAFT)";
            return false;
        }
        return true;
    }
    if (why) *why = "unknown method '" + m + "' (known: ar, chain, tree, ngram, ssd)";
    return false;
}

namespace {

struct Engines {
    std::unique_ptr<runtime::Engine> target, draft;
};

// need_ssd: the draft cache also gets a scratch slot per cached SSD branch
// (KV pages never touched cost nothing).
Engines load_engines(const BenchOptions& o, int threads, int n_seq, bool need_draft, bool need_ssd) {
    Engines e;
    runtime::EngineOptions eo;
    eo.model_path = o.target_path;
    eo.n_ctx = o.n_ctx;
    eo.n_seq = n_seq;
    eo.n_threads = threads;
    e.target = runtime::Engine::load(eo);
    if (need_draft) {
        runtime::EngineOptions d = eo;
        d.model_path = o.draft_path;
        d.n_ctx = e.target->n_ctx();
        d.n_threads = 1;  // chain/tree: the draft runs on the target's pool; ssd: on its worker's own
        if (need_ssd) d.n_seq = n_seq * (1 + o.fanout_budget);
        e.draft = runtime::Engine::load(d);
    }
    return e;
}

sched::SsdConfig ssd_config(const RunConfig& c, const BenchOptions& o) {
    sched::SsdConfig s;
    s.k = c.ssd_k;
    s.fanout = sched::parse_fanout(c.fanout);
    s.fanout_budget = o.fanout_budget;
    s.saguaro_c = (float)c.saguaro_c;
    s.backup = sched::parse_backup(o.ssd_backup);
    s.ngram_min = o.ngram_min;
    s.ngram_max = o.ngram_max;
    // Same cores as the other methods of the row: the draft side takes its
    // share, the target the rest.
    s.draft_threads = std::max(1, std::min(o.draft_threads, c.threads - 1));
    s.target_threads = std::max(1, c.threads - s.draft_threads);
    s.validate();
    return s;
}

sched::SpecConfig spec_config(const RunConfig& c, const BenchOptions& o) {
    sched::SpecConfig s;
    s.method = sched::parse_method(c.method == "ssd" ? "chain" : c.method);
    s.draft_k = c.draft_k > 0 ? c.draft_k : s.draft_k;
    s.tree_budget = c.tree_budget > 0 ? c.tree_budget : s.tree_budget;
    s.tree_depth = c.tree_depth > 0 ? c.tree_depth : s.tree_depth;
    s.tree_topk = c.tree_topk > 0 ? c.tree_topk : s.tree_topk;
    s.tree_width = o.tree_width;
    s.ngram_min = o.ngram_min;
    s.ngram_max = o.ngram_max;
    s.mode = sched::parse_mode(o.mode);
    s.vocab_subset_n = o.vocab_subset;
    s.vocab_subset_path = o.vocab_subset_file;
    s.vocab_corpus_path = o.vocab_corpus;
    return s;
}

std::string safe_name(std::string s) {
    for (char& ch : s)
        if (!std::isalnum((unsigned char)ch) && ch != '-' && ch != '.') ch = '_';
    return s;
}

// The configurations of one (threads, temp, batch) group, AR first.
std::vector<RunConfig> group_configs(const BenchOptions& o, const std::vector<std::string>& methods, int threads,
                                     double temp, int batch) {
    std::vector<RunConfig> out;
    RunConfig base;
    base.threads = threads;
    base.temp = temp;
    base.batch = batch;
    RunConfig ar = base;
    ar.method = "ar";
    out.push_back(ar);
    for (const auto& m : methods) {
        if (m == "ar") continue;
        if (m == "tree") {
            for (int b : o.tree_budget)
                for (int d : o.tree_depth)
                    for (int k : o.tree_topk) {
                        RunConfig c = base;
                        c.method = m;
                        c.tree_budget = b;
                        c.tree_depth = d;
                        c.tree_topk = k;
                        out.push_back(c);
                    }
        } else if (m == "ssd") {
            for (int k : o.ssd_k)
                for (const auto& f : o.fanout)
                    for (double cc : o.saguaro_c) {
                        RunConfig c = base;
                        c.method = m;
                        c.ssd_k = k;
                        c.fanout = f;
                        c.saguaro_c = cc;
                        out.push_back(c);
                    }
        } else {
            for (int k : o.draft_k) {
                RunConfig c = base;
                c.method = m;
                c.draft_k = k;
                out.push_back(c);
            }
        }
    }
    return out;
}

}  // namespace

void run_sweep(BenchResult& r) {
    const BenchOptions& o = r.opts;
    std::vector<std::string> methods;
    for (const auto& m : o.methods) {
        std::string why;
        if (method_available(m, o, &why)) {
            if (std::find(methods.begin(), methods.end(), m) == methods.end()) methods.push_back(m);
        } else {
            r.unavailable[m] = why;
        }
    }
    const auto uses = [&](const char* m) { return std::find(methods.begin(), methods.end(), m) != methods.end(); };
    const bool need_ssd = uses("ssd");
    const bool need_draft = uses("chain") || uses("tree") || need_ssd;
    const int max_batch = *std::max_element(o.batch.begin(), o.batch.end());
    const int n_conv = (int)r.conversations.size();
    r.prompt_tokens.assign(n_conv, {});

    // Work units for the progress display.
    int max_turns = 0;
    int n_turn_items = 0;
    for (const auto& c : r.conversations) {
        const int nt = o.max_turns > 0 ? std::min<int>(o.max_turns, (int)c.turns.size()) : (int)c.turns.size();
        max_turns = std::max(max_turns, nt);
        n_turn_items += nt;
    }
    const int per_group = (int)group_configs(o, methods, 0, 0, 1).size();
    const int n_groups = (int)(o.threads.size() * o.temp.size() * o.batch.size());
    Progress prog(per_group * n_groups * (n_turn_items * o.reps + o.warmup), o.quiet);

    // Reference transcript: the first AR pass decides the assistant answers of
    // earlier turns (every method then sees the same prompt) and which turns
    // are skipped because their prompt does not fit.
    std::vector<std::vector<std::string>> answers(n_conv);
    std::vector<int> skip_from(n_conv, -1);
    bool reference_done = false;
    // AR tokens per (group, conv, turn) to check lossless greedy output.
    std::map<std::tuple<int, double, int, int, int>, std::vector<int32_t>> ar_tokens;
    int batch_seq = 0;

    for (int threads_opt : o.threads) {
        Engines eng = load_engines(o, threads_opt, max_batch, need_draft, need_ssd);
        const int threads = (int)eng.target->pool().size();
        if (r.eog_tokens.empty()) {
            for (int t = 0; t < eng.target->tokenizer().n_vocab(); ++t)
                if (eng.target->tokenizer().is_end_of_generation(t)) r.eog_tokens.push_back(t);
        }
        const int max_prompt = o.max_prompt_tokens > 0 ? std::min(o.max_prompt_tokens, eng.target->n_ctx() - o.n_predict - 72)
                                                       : eng.target->n_ctx() - o.n_predict - 72;
        for (double temp : o.temp) {
            for (int batch : o.batch) {
                for (RunConfig cfg : group_configs(o, methods, threads, temp, batch)) {
                    const int ci = (int)r.configs.size();
                    r.configs.push_back(cfg);
                    const bool is_ar = cfg.method == "ar";
                    const bool is_ssd = cfg.method == "ssd";
                    sched::SpecConfig sc = spec_config(cfg, o);
                    const sched::SsdConfig ssd = is_ssd ? ssd_config(cfg, o) : sched::SsdConfig{};
                    sched::SsdStats sst;
                    auto make_req = [&](int conv, int turn) {
                        runtime::GenerateRequest req;
                        const auto& c = r.conversations[conv];
                        req.max_tokens = o.n_predict;
                        req.ignore_eos = o.ignore_eos;
                        req.sampling.temperature = (float)temp;
                        req.sampling.seed = o.seed;
                        if (o.chat) {
                            if (!o.system.empty()) req.messages.push_back({"system", o.system});
                            for (int j = 0; j < turn; ++j) {
                                req.messages.push_back({"user", c.turns[j]});
                                req.messages.push_back({"assistant", answers[conv][j]});
                            }
                            req.messages.push_back({"user", c.turns[turn]});
                        } else {
                            std::string p;
                            for (int j = 0; j < turn; ++j) p += c.turns[j] + "\n\n" + answers[conv][j] + "\n\n";
                            req.prompt = p + c.turns[turn];
                        }
                        return req;
                    };
                    auto run_one = [&](const std::vector<runtime::GenerateRequest>& reqs, const std::string& trace,
                                       sched::SpecStats& st) {
                        std::vector<runtime::GenerateResult> res;
                        st = sched::SpecStats{};
                        sst = sched::SsdStats{};
                        if (is_ssd) {
                            // No round trace in SSD (its stats carry hits and stalls instead).
                            if (reqs.size() == 1) res.push_back(sched::generate_ssd(*eng.target, *eng.draft, reqs[0], ssd, &sst));
                            else res = sched::generate_ssd_batch(*eng.target, *eng.draft, reqs, ssd, &sst);
                            st = sst.spec;
                        } else if (reqs.size() == 1) {
                            if (is_ar && trace.empty()) {
                                res.push_back(runtime::generate_ar(*eng.target, reqs[0]));
                                const auto& g = res.back();
                                st.rounds = st.seq_rounds = st.emitted =
                                    std::max(0, g.n_generated - 1 + (g.finish_reason == "stop" ? 1 : 0));
                                st.prefill_s = g.prefill_s;
                                st.decode_s = g.decode_s;
                            } else {
                                sched::SpecConfig s2 = sc;
                                s2.trace_path = trace;
                                res.push_back(sched::generate_speculative(*eng.target, eng.draft.get(), reqs[0], s2, &st));
                            }
                        } else {
                            res = sched::generate_speculative_batch(*eng.target, eng.draft.get(), reqs, sc, &st);
                        }
                        return res;
                    };

                    // Warm-up: the first turn of the first conversations, not recorded.
                    for (int w = 0; w < o.warmup && n_conv > 0; ++w) {
                        std::vector<runtime::GenerateRequest> reqs;
                        for (int k = 0; k < std::min(batch, n_conv); ++k) reqs.push_back(make_req(k, 0));
                        sched::SpecStats st;
                        const auto res = run_one(reqs, "", st);
                        prog.step(cfg.label() + " warm-up", res[0].decode_tok_s());
                    }

                    for (int turn = 0; turn < max_turns; ++turn) {
                        std::vector<int> items;
                        for (int c = 0; c < n_conv; ++c) {
                            const int nt = (int)r.conversations[c].turns.size();
                            if (turn >= nt || (o.max_turns > 0 && turn >= o.max_turns)) continue;
                            if (skip_from[c] >= 0 && turn >= skip_from[c]) continue;
                            items.push_back(c);
                        }
                        // Reference pass: tokenize and check the fit.
                        if (!reference_done) {
                            std::vector<int> kept;
                            for (int c : items) {
                                const auto toks = runtime::tokenize_request(*eng.target, make_req(c, turn));
                                if ((int)toks.size() > max_prompt) {
                                    skip_from[c] = turn;
                                    const int left = (int)r.conversations[c].turns.size() - turn;
                                    r.skipped.push_back({{"conv", r.conversations[c].id},
                                                         {"turn", turn},
                                                         {"prompt_tokens", toks.size()},
                                                         {"reason", "prompt longer than " + std::to_string(max_prompt) +
                                                                        " tokens (context " +
                                                                        std::to_string(eng.target->n_ctx()) + ", -n " +
                                                                        std::to_string(o.n_predict) + ")"}});
                                    prog.add_total(-o.reps * left * per_group * n_groups);
                                    continue;
                                }
                                r.prompt_tokens[c].push_back(toks);
                                kept.push_back(c);
                            }
                            items = kept;
                        }
                        for (size_t b0 = 0; b0 < items.size(); b0 += batch) {
                            const size_t b1 = std::min(items.size(), b0 + batch);
                            std::vector<runtime::GenerateRequest> reqs;
                            for (size_t k = b0; k < b1; ++k) reqs.push_back(make_req(items[k], turn));
                            std::vector<double> dec, pre;
                            std::vector<runtime::GenerateResult> res;
                            sched::SpecStats st;
                            std::string trace;
                            for (int rep = 0; rep < o.reps; ++rep) {
                                const bool last = rep + 1 == o.reps;
                                trace.clear();
                                if (last && !o.trace_dir.empty() && !is_ar && !is_ssd && reqs.size() == 1) {
                                    fs::create_directories(o.trace_dir);
                                    trace = (fs::path(o.trace_dir) /
                                             safe_name(cfg.label() + "_" + r.conversations[items[b0]].id + "_t" +
                                                       std::to_string(turn) + ".jsonl"))
                                                .string();
                                }
                                res = run_one(reqs, trace, st);
                                dec.push_back(st.decode_s > 0 ? st.decode_s : res[0].decode_s);
                                pre.push_back(st.prefill_s > 0 ? st.prefill_s : res[0].prefill_s);
                                int gen = 0;
                                for (const auto& g : res) gen += g.n_generated;
                                prog.step(cfg.label() + " | " + r.conversations[items[b0]].id + " turn " +
                                              std::to_string(turn + 1),
                                          dec.back() > 0 ? gen / dec.back() : 0.0);
                            }
                            const double dmed = percentile(dec, 50), pmed = percentile(pre, 50);
                            const int bid = batch_seq++;
                            for (size_t k = 0; k < res.size(); ++k) {
                                const int c = items[b0 + k];
                                TurnRecord tr;
                                tr.config = ci;
                                tr.conv = c;
                                tr.turn = turn;
                                tr.batch_id = bid;
                                tr.n_prompt = res[k].n_prompt;
                                tr.n_generated = res[k].n_generated;
                                tr.prefill_s = pmed;
                                tr.decode_s = dmed;
                                tr.rep_decode_s = dec;
                                tr.rounds = st.rounds;
                                tr.emitted = st.emitted;
                                tr.drafted = st.drafted;
                                tr.accepted = st.accepted;
                                tr.mean_accept_len = is_ar ? 1.0 : st.mean_accept_len();
                                tr.draft_s = st.draft_s;
                                tr.tree_s = st.tree_s;
                                tr.verify_s = st.verify_s;
                                tr.commit_s = st.commit_s;
                                if (is_ssd) {
                                    tr.has_ssd = true;
                                    tr.ssd_hit_rate = sst.hit_rate();
                                    tr.stall_s = sst.stall_s;
                                }
                                tr.finish_reason = res[k].finish_reason;
                                tr.trace_file = trace;
                                const auto key = std::make_tuple(threads, temp, batch, c, turn);
                                if (is_ar) ar_tokens[key] = res[k].tokens;
                                else if (temp == 0 && ar_tokens.count(key))
                                    tr.matches_ar = ar_tokens[key] == res[k].tokens ? 1 : 0;
                                if (!reference_done) {
                                    if ((int)answers[c].size() <= turn) answers[c].resize(turn + 1);
                                    answers[c][turn] = res[k].text;
                                }
                                r.records.push_back(tr);
                            }
                        }
                    }
                    reference_done = true;
                }
            }
        }
    }
    prog.finish();
}

void run_llamacpp(BenchResult& r, const std::string& root) {
    const BenchOptions& o = r.opts;
    const fs::path dir(o.out_dir);
    const std::string in_path = (dir / "llamacpp_input.json").string();
    const std::string out_path = (dir / "llamacpp.json").string();
    nlohmann::json in;
    in["model"] = o.target_path;
    std::vector<int> threads;
    if (!r.micro.empty()) {
        for (const auto& m : r.micro) threads.push_back(m["threads"].get<int>());
        in["micro"] = {{"tokens", r.meta["micro_tokens"]},
                       {"prefill", o.micro_prefill},
                       {"decode", o.micro_decode},
                       {"reps", o.reps}};
    } else {
        for (const auto& c : r.configs)
            if (!c.external && std::find(threads.begin(), threads.end(), c.threads) == threads.end())
                threads.push_back(c.threads);
        nlohmann::json turns = nlohmann::json::array();
        for (size_t c = 0; c < r.prompt_tokens.size(); ++c)
            for (size_t t = 0; t < r.prompt_tokens[c].size(); ++t)
                turns.push_back({{"conv", c}, {"turn", t}, {"tokens", r.prompt_tokens[c][t]}});
        in["turns"] = turns;
        in["n_predict"] = o.n_predict;
        in["temps"] = o.temp;
        in["ignore_eos"] = o.ignore_eos;
        in["eog"] = r.eog_tokens;
        in["seed"] = o.seed;
        in["warmup"] = o.warmup;
        in["reps"] = o.reps;
        in["pld_num_pred_tokens"] = o.draft_k.front();
        in["pld_max_ngram_size"] = o.ngram_max;
    }
    in["threads"] = threads;
    in["n_ctx"] = o.n_ctx;
    {
        std::ofstream f(in_path);
        SPECDEC_CHECK(f.good(), "cannot write ", in_path);
        f << in.dump() << "\n";
    }
    std::string cmd = shell_quote(python_exe(root)) + " " + shell_quote(root + "/tools/bench_llamacpp.py") +
                      " --input " + shell_quote(in_path) + " --out " + shell_quote(out_path);
    if (o.quiet) cmd += " --quiet";
    const int rc = std::system(cmd.c_str());
    if (rc != 0) {
        r.llamacpp = {{"error", "tools/bench_llamacpp.py failed (exit " + std::to_string(rc) + "): " + cmd}};
        std::fprintf(stderr, "specdec bench: llama.cpp baseline failed: %s\n", cmd.c_str());
        return;
    }
    std::ifstream f(out_path);
    const auto j = nlohmann::json::parse(f, nullptr, false);
    SPECDEC_CHECK(!j.is_discarded(), "cannot parse ", out_path);
    r.llamacpp = j;
    if (!j.contains("runs")) return;
    int bid = 1 << 30;
    for (const auto& run : j["runs"]) {
        RunConfig c;
        c.method = run["method"].get<std::string>();
        c.threads = run["threads"].get<int>();
        c.temp = run["temp"].get<double>();
        c.external = true;
        if (run.contains("num_pred_tokens")) c.draft_k = run["num_pred_tokens"].get<int>();
        const int ci = (int)r.configs.size();
        r.configs.push_back(c);
        for (const auto& t : run["records"]) {
            TurnRecord tr;
            tr.config = ci;
            tr.conv = t["conv"].get<int>();
            tr.turn = t["turn"].get<int>();
            tr.batch_id = bid++;
            tr.n_prompt = t["n_prompt"].get<int>();
            tr.n_generated = t["n_generated"].get<int>();
            tr.prefill_s = t["prefill_s"].get<double>();
            tr.decode_s = t["decode_s"].get<double>();
            tr.rep_decode_s = t["rep_decode_s"].get<std::vector<double>>();
            tr.finish_reason = t.value("finish_reason", "");
            r.records.push_back(tr);
        }
    }
}

}  // namespace specdec::bench
