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
#include <set>
#include <sstream>

#include "bench/bandwidth_probe.h"
#include "bench/checkpoint.h"
#include "bench/sys_info.h"
#include "bench/turn_prefill.h"
#include "core/clock.h"
#include "core/error.h"
#include "runtime/engine.h"
#include "core/thread_pool.h"
#include "model/weights.h"
#include "sched/ssd_scheduler.h"
#include "sched/sync_scheduler.h"
#include "specdec/engine.h"

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

bool is_eagle3_method(const std::string& m) { return m == "eagle3" || m == "eagle3-chain" || m == "eagle3-auto"; }

std::string RunConfig::label() const {
    std::string s = method;
    if (method == "tree" || method == "eagle3")
        s += " b=" + std::to_string(tree_budget) + " d=" + std::to_string(tree_depth);
    if (method == "chain" || method == "eagle3-chain" || method == "ngram" || method == "llamacpp-draft" ||
        method == "llamacpp-eagle3" || method == "auto" || method == "eagle3-auto")
        s += " k=" + std::to_string(draft_k);
    if (lookup_min > 0) s += " +lookup" + std::to_string(lookup_min);
    // Only a margin other than the default is named: labels of runs made
    // before the option existed stay as they were.
    if ((method == "auto" || method == "eagle3-auto") && auto_min_gain != sched::SpecConfig{}.auto_min_gain)
        s += " gain=" + fmt_num(auto_min_gain);
    if (method == "ssd") s += " k=" + std::to_string(ssd_k) + " " + fanout + " C=" + fmt_num(saguaro_c);
    if (method == "ssd" && ssd_remote) s += " remote";
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
    j["lookup_min"] = lookup_min;
    j["ssd_k"] = ssd_k;
    j["fanout"] = fanout;
    j["saguaro_c"] = saguaro_c;
    if (method == "ssd" && ssd_remote) j["ssd_remote"] = true;
    if (method == "auto") j["auto_min_gain"] = auto_min_gain;
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
    if (m == "ar" || m == "ngram" || m == "auto") return true;  // auto drafts with the draft model only if given
    if (m == "chain" || m == "tree") {
        if (o.draft.empty()) {
            if (why) *why = "method '" + m + "' needs a draft model (-d DRAFT or --draft-layers L)";
            return false;
        }
        return true;
    }
    if (is_eagle3_method(m)) {
        if (o.eagle3.empty()) {
            if (why) *why = "method '" + m + "' needs an EAGLE-3 head (--eagle3 HEAD)";
            return false;
        }
        return true;
    }
    if (m == "ssd") {
        if (o.draft.empty()) {
            if (why) *why = "method 'ssd' needs a draft model (-d DRAFT or --draft-layers L)";
            return false;
        }
        return true;
    }
    if (why) *why = "unknown method '" + m + "' (known: ar, auto, chain, tree, ngram, ssd, eagle3, eagle3-chain, eagle3-auto)";
    return false;
}

namespace {

// Loaded through the public API (specdec/engine.h); every run decodes on
// the engines underneath, from prefills shared by the configurations of a turn.
struct Engines {
    std::unique_ptr<Engine> api;
    runtime::Engine* target = nullptr;
    runtime::Engine* draft = nullptr;  // null without need_draft
};

// need_ssd: the draft cache also gets a scratch slot per cached SSD branch
// (KV pages never touched cost nothing).
Engines load_engines(const BenchOptions& o, int threads, int n_seq, bool need_draft, bool need_ssd) {
    EngineOptions eo;
    eo.model = o.target_path;
    eo.ctx = o.n_ctx;
    eo.sequences = n_seq;
    eo.threads = threads;
    if (need_draft) {
        // Self-speculation: the user's --draft-layers (cmd_bench refused an
        // `auto` that has no draft), resolved again by the engine.
        if (!o.draft_layers.empty()) eo.draft_layers = o.draft_layers;
        else eo.draft = o.draft_path;
        if (need_ssd) eo.draft_branch_slots = o.fanout_budget;
    }
    Engines e;
    e.api = std::make_unique<Engine>(eo);
    e.target = &e.api->target_engine();
    e.draft = e.api->draft_engine();
    // The head rides on the target engine; configurations choose between it
    // and the draft model by the draft they pass (run_config).
    if (!o.eagle3.empty()) e.target->load_eagle3(o.eagle3);
    return e;
}

sched::SpecConfig spec_config(const RunConfig& c, const BenchOptions& o);

sched::SsdConfig ssd_config(const RunConfig& c, const BenchOptions& o) {
    sched::SsdConfig s;
    s.k = c.ssd_k;
    s.fanout = sched::parse_fanout(c.fanout);
    s.fanout_budget = o.fanout_budget;
    s.saguaro_c = (float)c.saguaro_c;
    s.backup = sched::parse_backup(o.ssd_backup);
    s.ngram_min = o.ngram_min;
    s.ngram_max = o.ngram_max;
    sched::SpecConfig lookup_cfg = spec_config(c, o);
    lookup_cfg.draft_k = s.k;  // a lookup chain as long as a speculation
    s.lookup = sched::lookup_first_options(lookup_cfg);
    // Same cores as the other methods of the row: the draft side takes its
    // share, the target the rest.
    s.draft_threads = std::max(1, std::min(o.draft_threads, c.threads - 1));
    s.target_threads = std::max(1, c.threads - s.draft_threads);
    s.validate();
    return s;
}

sched::SpecConfig spec_config(const RunConfig& c, const BenchOptions& o) {
    sched::SpecConfig s;
    // (ssd runs through ssd_config; the eagle3 configurations are the head's chain, tree and auto)
    const std::string m = c.method == "eagle3-chain"  ? "chain"
                          : c.method == "eagle3"      ? "tree"
                          : c.method == "eagle3-auto" ? "auto"
                                                      : c.method;
    s.method = sched::parse_method(m);
    s.draft_k = c.draft_k > 0 ? c.draft_k : s.draft_k;
    s.tree_budget = c.tree_budget > 0 ? c.tree_budget : s.tree_budget;
    s.tree_depth = c.tree_depth > 0 ? c.tree_depth : s.tree_depth;
    s.tree_topk = c.tree_topk > 0 ? c.tree_topk : s.tree_topk;
    s.tree_width = o.tree_width;
    s.lookup_min = c.lookup_min;
    if (m == "auto") s.auto_min_gain = c.auto_min_gain;
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
        // Prompt lookup first applies to the draft-model, head and ssd methods only.
        const std::vector<int> lookups =
            m == "chain" || m == "tree" || m == "ssd" || is_eagle3_method(m) ? o.lookup_min : std::vector<int>{0};
        // The method's own configurations, each then run with every lookup setting.
        std::vector<RunConfig> shapes;
        RunConfig c = base;
        c.method = m;
        if (m == "tree" || m == "eagle3") {
            for (int b : o.tree_budget)
                for (int d : o.tree_depth)
                    for (int k : o.tree_topk) {
                        c.tree_budget = b;
                        c.tree_depth = d;
                        c.tree_topk = k;
                        shapes.push_back(c);
                    }
        } else if (m == "auto" || m == "eagle3-auto") {
            // One configuration per margin (--auto-min-gain): the cost model
            // picks each round's shape, up to the longest draft chain the sweep offers.
            c.draft_k = o.draft_k.empty() ? 0 : *std::max_element(o.draft_k.begin(), o.draft_k.end());
            for (double g : o.auto_min_gain) {
                c.auto_min_gain = g;
                shapes.push_back(c);
            }
        } else if (m == "ssd") {
            c.ssd_remote = !o.ssd_remote_addr.empty();
            for (int k : o.ssd_k)
                for (const auto& f : o.fanout)
                    for (double cc : o.saguaro_c) {
                        c.ssd_k = k;
                        c.fanout = f;
                        c.saguaro_c = cc;
                        shapes.push_back(c);
                    }
        } else {
            for (int k : o.draft_k) {
                c.draft_k = k;
                shapes.push_back(c);
            }
        }
        for (RunConfig& s : shapes)
            for (int lm : lookups) {
                s.lookup_min = lm;
                out.push_back(s);
            }
    }
    return out;
}

}  // namespace

nlohmann::json run_fingerprint(const BenchResult& r) {
    nlohmann::json opts = r.meta.value("options", nlohmann::json::object());
    // What does not change a record: where it goes, how it is shown, and which
    // slice of the run this process does.
    for (const char* k : {"out_dir", "llamacpp", "llamacpp_spec", "plots", "trace_dir", "resume", "shard", "stop_after", "quiet"})
        opts.erase(k);
    std::string prompts;
    for (const auto& c : r.conversations) prompts += nlohmann::json{{"id", c.id}, {"set", c.set}, {"turns", c.turns}}.dump() + "\n";
    nlohmann::json fp;
    fp["options"] = opts;
    fp["target_sha256"] = r.meta.contains("target") ? r.meta["target"].value("sha256", "") : "";
    fp["draft_sha256"] =
        r.meta.contains("draft") && r.meta["draft"].is_object() ? r.meta["draft"].value("sha256", "") : "";
    // Only with a head: runs without one keep their fingerprints.
    if (r.meta.contains("eagle3") && r.meta["eagle3"].is_object())
        fp["eagle3_sha256"] = r.meta["eagle3"].value("sha256", "");
    fp["prompts_sha256"] = sha256_hex(prompts);
    fp["conversations"] = r.conversations.size();
    return fp;
}

namespace {

// The request of one conversation turn: earlier turns with the reference answers.
runtime::GenerateRequest turn_request(const BenchOptions& o, const Conversation& c,
                                      const std::vector<std::string>& answers, int turn, double temp) {
    runtime::GenerateRequest req;
    req.max_tokens = o.n_predict;
    req.ignore_eos = o.ignore_eos;
    req.sampling.temperature = (float)temp;
    req.sampling.seed = o.seed;
    if (o.chat) {
        if (!o.system.empty()) req.messages.push_back({"system", o.system});
        for (int j = 0; j < turn; ++j) {
            req.messages.push_back({"user", c.turns[j]});
            req.messages.push_back({"assistant", answers[j]});
        }
        req.messages.push_back({"user", c.turns[turn]});
    } else {
        std::string p;
        for (int j = 0; j < turn; ++j) p += c.turns[j] + "\n\n" + answers[j] + "\n\n";
        req.prompt = p + c.turns[turn];
    }
    return req;
}

// What one run of a configuration on a batch of requests produced.
struct RunOutput {
    std::vector<runtime::GenerateResult> res;
    sched::SpecStats st;
    sched::SsdStats sst;
};

RunOutput run_config(Engines& eng, const RunConfig& cfg, const BenchOptions& o,
                     const std::vector<runtime::GenerateRequest>& reqs, const std::string& trace,
                     const sched::Prefilled* pre) {
    RunOutput out;
    const bool is_ar = cfg.method == "ar";
    // No draft model: the scheduler drafts from the target's EAGLE-3 head.
    runtime::Engine* draft = is_eagle3_method(cfg.method) ? nullptr : eng.draft;
    if (cfg.method == "ssd") {
        // No round trace in SSD (its stats carry hits and stalls instead).
        const sched::SsdConfig ssd = ssd_config(cfg, o);
        if (cfg.ssd_remote) {
            // The remote draft side reads the prompt itself (no shared prefill).
            SPECDEC_CHECK(reqs.size() == 1, "ssd with --ssd-draft runs batch 1 only");
            out.res.push_back(sched::generate_ssd_remote(*eng.target, o.ssd_remote, reqs[0], ssd, &out.sst));
        } else if (reqs.size() == 1)
            out.res.push_back(sched::generate_ssd(*eng.target, *eng.draft, reqs[0], ssd, &out.sst, {}, pre));
        else out.res = sched::generate_ssd_batch(*eng.target, *eng.draft, reqs, ssd, &out.sst, pre);
        out.st = out.sst.spec;
        return out;
    }
    sched::SpecConfig sc = spec_config(cfg, o);
    if (reqs.size() > 1) {
        out.res = sched::generate_speculative_batch(*eng.target, draft, reqs, sc, &out.st, pre);
        return out;
    }
    if (is_ar && trace.empty()) {
        if (pre) {
            const auto prompt = runtime::tokenize_request(*eng.target, reqs[0]);
            out.res.push_back(runtime::generate_ar_prefilled(*eng.target, reqs[0], prompt, pre->logits.at(0)));
        } else {
            out.res.push_back(runtime::generate_ar(*eng.target, reqs[0]));
        }
        const auto& g = out.res.back();
        out.st.rounds = out.st.seq_rounds = out.st.emitted =
            std::max(0, g.n_generated - 1 + (g.finish_reason == "stop" ? 1 : 0));
        out.st.prefill_s = g.prefill_s;
        out.st.decode_s = g.decode_s;
        return out;
    }
    sc.trace_path = trace;
    out.res.push_back(sched::generate_speculative(*eng.target, draft, reqs[0], sc, &out.st, {}, pre));
    return out;
}

std::string fmt_key_num(double v) {
    std::ostringstream ss;
    ss << v;
    return ss.str();
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
    SPECDEC_CHECK(o.order == "turn" || o.order == "config", "--order must be turn or config, got '", o.order, "'");
    SPECDEC_CHECK(o.shard_n >= 1 && o.shard_i >= 0 && o.shard_i < o.shard_n, "--shard: bad shard ", o.shard_i + 1,
                  "/", o.shard_n);
    const bool paired = o.order == "turn";
    const bool share = paired && o.shared_prefill;
    const auto uses = [&](const char* m) { return std::find(methods.begin(), methods.end(), m) != methods.end(); };
    const bool need_ssd = uses("ssd");
    const bool need_draft = uses("chain") || uses("tree") || need_ssd || (uses("auto") && !o.draft.empty());
    const int max_batch = *std::max_element(o.batch.begin(), o.batch.end());
    const int n_conv = (int)r.conversations.size();
    r.prompt_tokens.assign(n_conv, {});
    r.fingerprint = run_fingerprint(r);
    Checkpoint ckpt(o.out_dir, o.shard_i, o.shard_n, r.fingerprint, o.resume);
    const auto in_shard = [&](int c) { return c % o.shard_n == o.shard_i; };

    // Work units of this shard still to run, for the progress display and its ETA.
    int max_turns = 0;
    int n_turn_items = 0;
    for (int c = 0; c < n_conv; ++c) {
        const int nt = o.max_turns > 0 ? std::min<int>(o.max_turns, (int)r.conversations[c].turns.size())
                                       : (int)r.conversations[c].turns.size();
        max_turns = std::max(max_turns, nt);
        if (in_shard(c)) n_turn_items += nt;
    }
    const int per_group = (int)group_configs(o, methods, 0, 0, 1).size();
    const int n_groups = (int)(o.threads.size() * o.temp.size() * o.batch.size());
    Progress prog(per_group * n_groups * (n_turn_items * o.reps + o.warmup), o.quiet);
    if (ckpt.size() > 0) prog.note("specdec bench: resuming " + ckpt.path() + " (" + std::to_string(ckpt.size()) + " units done)");

    // Reference transcript: the first AR pass decides the assistant answers of
    // earlier turns (every method then sees the same prompt) and which turns
    // are skipped because their prompt does not fit.
    std::vector<std::vector<std::string>> answers(n_conv);
    std::vector<int> skip_from(n_conv, -1);
    bool reference_done = false;
    // AR tokens per (group, conv, turn) to check lossless greedy output.
    std::map<std::tuple<int, double, int, int, int>, std::vector<int32_t>> ar_tokens;
    int units_started = 0;

    for (int threads_opt : o.threads) {
        if (r.stopped) break;
        Engines eng = load_engines(o, threads_opt, max_batch, need_draft, need_ssd);
        const int threads = (int)eng.target->pool().size();
        // The machine's read ceiling at this thread count, measured in the
        // same run as the tok/s it qualifies (machines of one kind differ
        // 2-3x between sessions), and the bytes one target step reads: the
        // report says how close AR decode came to the ceiling.
        {
            const BandwidthProbe bw = probe_read_bandwidth(eng.target->pool());
            r.meta["read_bandwidth"][std::to_string(threads)] = {{"bytes_per_s", bw.bytes_per_s},
                                                                 {"buffer_bytes", bw.buffer_bytes}};
            r.meta["target_bytes_per_token"] =
                model::weight_bytes_per_token(eng.target->model().weights(), eng.target->model().config());
            char line[96];
            std::snprintf(line, sizeof line, "specdec bench: read bandwidth at %d threads %.1f GB/s", threads,
                          bw.bytes_per_s / 1e9);
            prog.note(line);
        }
        if (r.eog_tokens.empty()) {
            for (int t = 0; t < eng.target->tokenizer().n_vocab(); ++t)
                if (eng.target->tokenizer().is_end_of_generation(t)) r.eog_tokens.push_back(t);
        }
        const int max_prompt = o.max_prompt_tokens > 0 ? std::min(o.max_prompt_tokens, eng.target->n_ctx() - o.n_predict - 72)
                                                       : eng.target->n_ctx() - o.n_predict - 72;
        for (double temp : o.temp) {
            for (int batch : o.batch) {
                if (r.stopped) break;
                const std::vector<RunConfig> group = group_configs(o, methods, threads, temp, batch);
                const int ci0 = (int)r.configs.size();
                for (const auto& c : group) r.configs.push_back(c);
                // Paired: one pass over the turns running every configuration;
                // config order: one pass per configuration (AR first).
                std::vector<std::vector<int>> passes;
                if (paired) {
                    passes.emplace_back();
                    for (int k = 0; k < (int)group.size(); ++k) passes[0].push_back(ci0 + k);
                } else {
                    for (int k = 0; k < (int)group.size(); ++k) passes.push_back({ci0 + k});
                }
                const std::string group_key = "t=" + std::to_string(threads_opt) + " T=" + fmt_key_num(temp) +
                                              " B=" + std::to_string(batch);
                for (const auto& pass : passes) {
                    if (r.stopped) break;
                    bool warmed = false;
                    std::string pass_key;
                    for (int ci : pass) pass_key += (pass_key.empty() ? "" : "+") + r.configs[ci].label();
                    if (paired) pass_key = "paired";
                    for (int turn = 0; turn < max_turns && !r.stopped; ++turn) {
                        std::vector<int> items;
                        for (int c = 0; c < n_conv; ++c) {
                            const int nt = (int)r.conversations[c].turns.size();
                            if (!in_shard(c) || turn >= nt || (o.max_turns > 0 && turn >= o.max_turns)) continue;
                            if (skip_from[c] >= 0 && turn >= skip_from[c]) continue;
                            items.push_back(c);
                        }
                        // Reference pass: tokenize and check the fit.
                        if (!reference_done) {
                            std::vector<int> kept;
                            for (int c : items) {
                                const auto toks = runtime::tokenize_request(
                                    *eng.target, turn_request(o, r.conversations[c], answers[c], turn, temp));
                                if ((int)toks.size() > max_prompt) {
                                    skip_from[c] = turn;
                                    const int left = (int)r.conversations[c].turns.size() - turn;
                                    // In the checkpoint too, so a merged report lists other shards' skips.
                                    const std::string skip_key = "skipped | " + r.conversations[c].id + " | turn " +
                                                                 std::to_string(turn);
                                    if (!ckpt.find(skip_key))
                                        ckpt.append({{"unit", skip_key},
                                                     {"records", nlohmann::json::array()},
                                                     {"skipped",
                                                      {{"conv", r.conversations[c].id},
                                                       {"turn", turn},
                                                       {"prompt_tokens", toks.size()},
                                                       {"reason", "prompt longer than " + std::to_string(max_prompt) +
                                                                      " tokens (context " +
                                                                      std::to_string(eng.target->n_ctx()) + ", -n " +
                                                                      std::to_string(o.n_predict) + ")"}}}});
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
                            std::string unit = group_key + " | " + pass_key + " | turn " + std::to_string(turn) + " |";
                            for (size_t k = b0; k < b1; ++k) unit += " " + r.conversations[items[k]].id;
                            const int n_items = (int)(b1 - b0);
                            if (const nlohmann::json* done = ckpt.find(unit)) {
                                // Done in an earlier session: its AR answers and tokens are
                                // what later turns and greedy checks need.
                                for (const auto& js : (*done)["records"]) {
                                    const TurnRecord t = record_from_state(r, js);
                                    if (r.configs[t.config].method != "ar") continue;
                                    ar_tokens[std::make_tuple(threads, temp, batch, t.conv, t.turn)] = t.tokens;
                                    if (!reference_done) {
                                        if ((int)answers[t.conv].size() <= turn) answers[t.conv].resize(turn + 1);
                                        answers[t.conv][turn] = t.text;
                                    }
                                }
                                ++r.units_resumed;
                                prog.add_total(-(int)pass.size() * o.reps * n_items);
                                continue;
                            }
                            if (o.stop_after > 0 && units_started >= o.stop_after) {
                                r.stopped = true;
                                break;
                            }
                            ++units_started;
                            std::vector<runtime::GenerateRequest> reqs;
                            std::vector<std::vector<int32_t>> prompts;
                            for (size_t k = b0; k < b1; ++k) {
                                reqs.push_back(turn_request(o, r.conversations[items[k]], answers[items[k]], turn, temp));
                                prompts.push_back(runtime::tokenize_request(*eng.target, reqs.back()));
                            }
                            // Warm-up before the first unit this session runs: the first turn
                            // of the first conversations, not recorded.
                            if (!warmed) {
                                warmed = true;
                                for (int ci : pass)
                                    for (int w = 0; w < o.warmup; ++w) {
                                        std::vector<runtime::GenerateRequest> wr;
                                        for (int k = 0; k < std::min(batch, n_conv); ++k)
                                            wr.push_back(turn_request(o, r.conversations[k], answers[k], 0, temp));
                                        const RunOutput out = run_config(eng, r.configs[ci], o, wr, "", nullptr);
                                        prog.step(r.configs[ci].label() + " warm-up", out.res[0].decode_tok_s());
                                    }
                            }
                            TurnPrefill tp;
                            sched::Prefilled pre;
                            if (share) {
                                tp = prefill_turn(*eng.target, eng.draft, prompts);
                                pre = tp.view();
                            }
                            nlohmann::json line;
                            line["unit"] = unit;
                            line["records"] = nlohmann::json::array();
                            line["prompt_tokens"] = prompts;
                            // Provenance: a run resumed over several sessions says
                            // which build and how loaded a machine made each unit.
                            line["git_revision"] = r.meta.value("git_revision", "unknown");
                            line["started_at"] = utc_now();
                            line["load_average"] = load_average();
                            for (int ci : pass) {
                                const RunConfig& cfg = r.configs[ci];
                                const bool is_ar = cfg.method == "ar";
                                // An EAGLE-3 head needs the prompt's target features, which the
                                // shared prefill does not keep: those configurations prefill
                                // themselves (auto drafts with the head when there is no -d).
                                const bool shared =
                                    share && !is_eagle3_method(cfg.method) &&
                                    !(cfg.method == "auto" && !eng.draft && eng.target->eagle3());
                                std::vector<double> dec, pre_s;
                                RunOutput out;
                                std::string trace;
                                for (int rep = 0; rep < o.reps; ++rep) {
                                    const bool last = rep + 1 == o.reps;
                                    trace.clear();
                                    if (last && !o.trace_dir.empty() && !is_ar && cfg.method != "ssd" && n_items == 1) {
                                        fs::create_directories(o.trace_dir);
                                        trace = (fs::path(o.trace_dir) /
                                                 safe_name(cfg.label() + "_" + r.conversations[items[b0]].id + "_t" +
                                                           std::to_string(turn) + ".jsonl"))
                                                    .string();
                                    }
                                    out = run_config(eng, cfg, o, reqs, trace, shared ? &pre : nullptr);
                                    dec.push_back(out.st.decode_s > 0 ? out.st.decode_s : out.res[0].decode_s);
                                    pre_s.push_back(out.st.prefill_s > 0 ? out.st.prefill_s : out.res[0].prefill_s);
                                    int gen = 0;
                                    for (const auto& g : out.res) gen += g.n_generated;
                                    prog.step(cfg.label() + " | " + r.conversations[items[b0]].id + " turn " +
                                                  std::to_string(turn + 1),
                                              dec.back() > 0 ? gen / dec.back() : 0.0);
                                }
                                const double dmed = percentile(dec, 50);
                                for (size_t k = 0; k < out.res.size(); ++k) {
                                    const int c = items[b0 + k];
                                    const auto& g = out.res[k];
                                    TurnRecord tr;
                                    tr.config = ci;
                                    tr.conv = c;
                                    tr.turn = turn;
                                    tr.n_prompt = g.n_prompt;
                                    tr.n_generated = g.n_generated;
                                    tr.shared_prefill = shared;
                                    tr.prefill_s = shared ? tp.target_s : percentile(pre_s, 50);
                                    tr.draft_prefill_s = shared ? tp.draft_s : 0.0;
                                    tr.decode_s = dmed;
                                    tr.rep_decode_s = dec;
                                    const sched::SpecStats& st = out.st;
                                    tr.rounds = st.rounds;
                                    tr.emitted = st.emitted;
                                    tr.drafted = st.drafted;
                                    tr.accepted = st.accepted;
                                    tr.lookup_rounds = st.lookup_rounds;
                                    tr.accepted_hist = st.accepted_hist;
                                    tr.auto_none = st.auto_none;
                                    tr.auto_draft = st.auto_draft;
                                    tr.mean_accept_len = is_ar ? 1.0 : st.mean_accept_len();
                                    tr.draft_s = st.draft_s;
                                    tr.tree_s = st.tree_s;
                                    tr.verify_s = st.verify_s;
                                    tr.commit_s = st.commit_s;
                                    if (cfg.method == "ssd") {
                                        tr.has_ssd = true;
                                        tr.ssd_hit_rate = out.sst.hit_rate();
                                        tr.stall_s = out.sst.stall_s;
                                    }
                                    tr.finish_reason = g.finish_reason;
                                    tr.trace_file = trace;
                                    tr.tokens = g.tokens;
                                    tr.text = g.text;
                                    const auto key = std::make_tuple(threads, temp, batch, c, turn);
                                    if (is_ar) ar_tokens[key] = g.tokens;
                                    else if (temp == 0 && ar_tokens.count(key))
                                        tr.matches_ar = ar_tokens[key] == g.tokens ? 1 : 0;
                                    if (!reference_done && is_ar) {
                                        if ((int)answers[c].size() <= turn) answers[c].resize(turn + 1);
                                        answers[c][turn] = g.text;
                                    }
                                    line["records"].push_back(record_state(r, tr));
                                }
                            }
                            ckpt.append(line);
                            ++r.units_run;
                        }
                    }
                    reference_done = true;
                }
            }
        }
    }
    prog.finish();
    if (r.stopped)
        prog.note("specdec bench: stopped after " + std::to_string(r.units_run) + " units (--stop-after); rerun with "
                  "--resume to go on");

    // The report: every record of every checkpoint (this run's, earlier
    // sessions', other shards'), in configuration, turn, conversation order.
    r.records.clear();
    r.skipped = nlohmann::json::array();
    std::map<std::pair<std::string, int>, int> batch_ids;
    std::map<std::string, int> revisions;  // units per build that made them
    std::string first_at, last_at;
    std::vector<double> load_1m;
    for (const auto& line : Checkpoint::load_all(o.out_dir, r.fingerprint)) {
        const std::string unit = line["unit"].get<std::string>();
        if (line.contains("records")) {
            ++revisions[line.value("git_revision", "unrecorded")];
            const std::string at = line.value("started_at", "");
            if (!at.empty() && (first_at.empty() || at < first_at)) first_at = at;
            if (at > last_at) last_at = at;
            const std::string load = line.value("load_average", "unknown");
            if (load != "unknown") load_1m.push_back(std::atof(load.c_str()));
        }
        if (line.contains("skipped")) r.skipped.push_back(line["skipped"]);
        for (const auto& js : line["records"]) {
            TurnRecord t = record_from_state(r, js);
            const auto bk = std::make_pair(unit, t.config);
            if (!batch_ids.count(bk)) batch_ids[bk] = (int)batch_ids.size();
            t.batch_id = batch_ids[bk];
            r.records.push_back(std::move(t));
        }
        // Prompt tokens of the unit's conversations (in the order of its first
        // configuration's records), so other shards' turns reach the llama.cpp input.
        int k = 0;
        std::vector<int> seen;
        for (const auto& js : line["records"]) {
            const int c = js["conv"].get<int>(), turn = js["turn"].get<int>();
            if (std::find(seen.begin(), seen.end(), c) != seen.end()) continue;
            seen.push_back(c);
            if ((int)r.prompt_tokens[c].size() <= turn && k < (int)line["prompt_tokens"].size()) {
                r.prompt_tokens[c].resize(turn + 1);
                r.prompt_tokens[c][turn] = line["prompt_tokens"][k].get<std::vector<int32_t>>();
            }
            ++k;
        }
    }
    nlohmann::json prov{{"git_revisions", revisions}, {"first_unit_at", first_at}, {"last_unit_at", last_at}};
    if (!load_1m.empty())
        prov["load_average_1m"] = {{"min", *std::min_element(load_1m.begin(), load_1m.end())},
                                   {"p50", percentile(load_1m, 50)},
                                   {"max", *std::max_element(load_1m.begin(), load_1m.end())}};
    r.meta["provenance"] = prov;
    std::stable_sort(r.records.begin(), r.records.end(), [](const TurnRecord& a, const TurnRecord& b) {
        return std::make_tuple(a.config, a.turn, a.conv) < std::make_tuple(b.config, b.turn, b.conv);
    });
}

const std::vector<std::string>& llamacpp_spec_types() {
    static const std::vector<std::string> types = {"draft-simple",  "draft-eagle3", "ngram-simple", "ngram-map-k",
                                                   "ngram-map-k4v", "ngram-mod",    "ngram-cache"};
    return types;
}

std::string llamacpp_spec_method(const std::string& spec_type) {
    if (spec_type == "draft-simple") return "llamacpp-draft";
    if (spec_type == "draft-eagle3") return "llamacpp-eagle3";
    return "llamacpp-" + spec_type;
}

bool is_llamacpp_spec_method(const std::string& method) {
    for (const auto& t : llamacpp_spec_types())
        if (method == llamacpp_spec_method(t)) return true;
    return false;
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
                       {"reps", o.reps},
                       {"forward_sizes", o.forward_sizes},
                       {"forward_reps", std::max(1, o.micro_reps)}};
    } else {
        for (const auto& c : r.configs)
            if (!c.external && std::find(threads.begin(), threads.end(), c.threads) == threads.end())
                threads.push_back(c.threads);
        nlohmann::json turns = nlohmann::json::array();
        // This shard's turns (the other shards run theirs).
        for (size_t c = 0; c < r.prompt_tokens.size(); ++c)
            for (size_t t = 0; t < r.prompt_tokens[c].size(); ++t)
                if ((int)c % o.shard_n == o.shard_i && !r.prompt_tokens[c][t].empty())
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
        // llama.cpp's own speculative types, by its own example, built by
        // tools/build_llamacpp.sh (SPECDEC_LLAMACPP_SPEC_BIN names
        // another build). draft-simple uses the same draft GGUF and K as
        // chain, so it runs only with a draft model (llama.cpp has no
        // layer-skipping draft: not with --draft-layers). draft-eagle3 drafts
        // with the same EAGLE-3 head as eagle3-chain (converted to llama.cpp's
        // eagle3 GGUF when it is a directory), chains of the same K, so it
        // runs only with --eagle3.
        nlohmann::json spec_methods = nlohmann::json::array();
        for (const auto& t : o.llamacpp_spec) {
            if (t == "draft-simple") {
                if (o.draft.empty() || !o.draft_layers.empty()) continue;
                in["draft_model"] = o.draft_path;
                in["draft_num_pred_tokens"] = o.draft_k.front();
            }
            if (t == "draft-eagle3") {
                if (o.eagle3.empty()) continue;
                in["eagle3_head"] = o.eagle3;
                in["eagle3_gguf"] = (dir / "llamacpp_eagle3_head.gguf").string();
                in["eagle3_num_pred_tokens"] = o.draft_k.front();
            }
            spec_methods.push_back(llamacpp_spec_method(t));
        }
        in["spec_methods"] = spec_methods;
        const char* bin = std::getenv("SPECDEC_LLAMACPP_SPEC_BIN");
        in["spec_bin"] = bin && *bin ? std::string(bin) : root + "/build/llamacpp/cmake/bin/llama-speculative-simple";
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
    // Prompt sets: finished llama.cpp records go to a checkpoint of their own,
    // so a stopped baseline run resumes too (kept aside when not resuming).
    const std::string ckpt_name = "llamacpp_" + Checkpoint::file_name(o.shard_i, o.shard_n);
    if (r.micro.empty()) {
        const fs::path ck = dir / ckpt_name;
        if (!o.resume && fs::exists(ck)) fs::rename(ck, ck.string() + ".bak");
        cmd += " --checkpoint " + shell_quote(ck.string());
    }
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
    // What llama.cpp could not run: the draft baseline without its example
    // binary, turns whose prompt ids do not survive the example's text prompt.
    if (j.contains("unavailable"))
        for (const auto& [m, why] : j["unavailable"].items()) r.unavailable[m] = why;
    if (j.contains("skipped"))
        for (const auto& s : j["skipped"]) {
            const int c = s["conv"].get<int>(), t = s["turn"].get<int>();
            r.skipped.push_back({{"conv", r.conversations.at(c).id},
                                 {"turn", t},
                                 {"prompt_tokens", r.prompt_tokens.at(c).at(t).size()},
                                 {"reason", s["method"].get<std::string>() + " t=" + s["threads"].dump() +
                                                " T=" + s["temp"].dump() + ": " + s["reason"].get<std::string>()}});
        }
    // The records of every shard's llama.cpp checkpoint, grouped as runs.
    std::vector<nlohmann::json> runs;
    {
        std::vector<std::string> files;
        for (const auto& e : fs::directory_iterator(dir)) {
            const std::string n = e.path().filename().string();
            if (n.rfind("llamacpp_checkpoint", 0) == 0 && n.size() > 6 && n.substr(n.size() - 6) == ".jsonl")
                files.push_back(e.path().string());
        }
        std::sort(files.begin(), files.end());
        std::map<std::string, size_t> run_of;
        std::set<std::string> seen;
        for (const auto& path : files) {
            std::ifstream in(path);
            std::string line;
            while (std::getline(in, line)) {
                const auto l = nlohmann::json::parse(line, nullptr, false);
                if (l.is_discarded() || !l.contains("rec")) continue;  // a torn last line
                nlohmann::json head = l;
                head.erase("rec");
                const std::string rk = head.dump();
                const std::string key = rk + "/" + l["rec"]["conv"].dump() + "/" + l["rec"]["turn"].dump();
                if (!seen.insert(key).second) continue;
                if (!run_of.count(rk)) {
                    run_of[rk] = runs.size();
                    head["records"] = nlohmann::json::array();
                    runs.push_back(head);
                }
                runs[run_of[rk]]["records"].push_back(l["rec"]);
            }
        }
    }
    int bid = 1 << 30;
    for (const auto& run : runs) {
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
            // Generated ids and, for prompt lookup and the draft model, whether
            // greedy output equals llama.cpp AR's (records of older script
            // versions have neither).
            if (t.contains("tokens")) tr.tokens = t["tokens"].get<std::vector<int32_t>>();
            if (t.contains("matches_llamacpp_ar") && t["matches_llamacpp_ar"].is_boolean())
                tr.matches_ar = t["matches_llamacpp_ar"].get<bool>() ? 1 : 0;
            if (is_llamacpp_spec_method(c.method)) {  // as llama-speculative-simple prints them
                tr.drafted = t.value("drafted", 0);
                tr.accepted = t.value("accepted", 0);
            }
            r.records.push_back(tr);
        }
    }
}

}  // namespace specdec::bench
