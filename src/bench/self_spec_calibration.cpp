#include "bench/self_spec_calibration.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "bench/prompt_set.h"
#include "bench/sys_info.h"
#include "core/error.h"
#include "model/layer_list.h"
#include "runtime/engine.h"
#include "sched/sync_scheduler.h"

namespace specdec::bench {
namespace {

struct Prompt {
    std::string kind;  // code: raw completion; chat: one user turn in the chat template
    std::string text;
};

// Alternating code and chat, so any --prompts N >= 2 covers both kinds.
const std::vector<Prompt> kBuiltin{
    {"code",
     "from typing import List\n\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
     "    \"\"\" Check if in given list of numbers, are any two numbers closer to each other than\n"
     "    given threshold.\n    \"\"\"\n"},
    {"chat", "Explain in a few sentences why the sky is blue."},
    {"code", "def quicksort(arr):\n    \"\"\"Sort a list of integers in ascending order.\"\"\"\n"},
    {"chat", "Write a short email inviting a colleague to lunch on Friday."},
    {"code", "class Stack:\n    \"\"\"A last-in first-out stack backed by a Python list.\"\"\"\n\n    def __init__(self):\n"},
    {"chat", "What are three good habits for staying healthy? Answer briefly."},
};

runtime::GenerateRequest make_request(const runtime::Engine& engine, const Prompt& p, int max_tokens) {
    runtime::GenerateRequest r;
    r.max_tokens = max_tokens;
    r.ignore_eos = true;  // every method generates the same number of tokens
    if (p.kind == "chat") {
        r.messages.push_back({"user", p.text});
        try {
            (void)runtime::tokenize_request(engine, r);
            return r;
        } catch (const Error&) {
            r.messages.clear();  // no usable chat template (a base model): plain text
        }
    }
    r.prompt = p.text;
    return r;
}

// Sums over prompts, per kind.
struct Acc {
    double tokens = 0, decode_s = 0, emitted = 0, rounds = 0;
    double tok_s() const { return decode_s > 0 ? tokens / decode_s : 0.0; }
    double tau() const { return rounds > 0 ? emitted / rounds : 1.0; }
};

nlohmann::json kinds_json(const std::vector<KindFigures>& ks, bool spec) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& k : ks) {
        nlohmann::json e{{"tok_s", k.tok_s}};
        if (spec) {
            e["mean_accept_len"] = k.mean_accept_len;
            e["speedup"] = k.speedup;
        }
        j[k.kind] = e;
    }
    return j;
}

}  // namespace

std::vector<std::vector<int>> default_candidates(int n_layer) {
    std::vector<std::vector<int>> out;
    auto add = [&](std::vector<int> v) {
        if (v.empty() || (int)v.size() >= n_layer) return;
        if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(std::move(v));
    };
    // Without a trained early-exit head only deep drafts agree with the target
    // often (measured: smollm2 keeps tau > 1.5 only within ~3 layers of its 30),
    // so the prefixes lean deep: 1/2, 3/4, all but 3, all but 1.
    for (int n : {n_layer / 2, n_layer * 3 / 4, n_layer - 3, n_layer - 1}) add(model::first_layers(std::max(1, n)));
    // Skip the middle instead of the end: 3/4 of the layers, the last two among them.
    const int n = n_layer * 3 / 4;
    if (n >= 3 && n - 2 < n_layer - 2) {
        std::vector<int> v = model::first_layers(n - 2);
        v.push_back(n_layer - 2);
        v.push_back(n_layer - 1);
        add(v);
    }
    return out;
}

CalibrationResult run_calibration(const CalibrationOptions& o, const std::function<void(const std::string&)>& log) {
    auto say = [&](const std::string& s) {
        if (log) log(s);
    };
    SPECDEC_CHECK(o.spec.needs_draft(), "calibrate: the method must be chain or tree");
    SPECDEC_CHECK(o.max_tokens >= 2, "calibrate: generate at least 2 tokens per prompt");
    SPECDEC_CHECK(o.n_prompts >= 1, "calibrate: use at least one prompt");
    runtime::EngineOptions eo;
    eo.model_path = o.model_path;
    eo.n_ctx = o.n_ctx;
    eo.n_threads = o.n_threads;
    auto target = runtime::Engine::load(eo);
    const int n_layer = target->config().n_layer;

    std::vector<Prompt> prompts;
    if (!o.prompts_file.empty()) {
        for (const auto& c : load_prompts_jsonl(o.prompts_file, o.n_prompts))
            prompts.push_back({c.set == "humaneval" ? "code" : "chat", c.turns.at(0)});
    } else {
        SPECDEC_CHECK(o.n_prompts <= (int)kBuiltin.size(), "calibrate: at most ", kBuiltin.size(),
                      " built-in prompts (or give --prompts-file)");
        prompts.assign(kBuiltin.begin(), kBuiltin.begin() + o.n_prompts);
    }
    SPECDEC_CHECK(!prompts.empty(), "calibrate: no prompts");
    std::vector<runtime::GenerateRequest> reqs;
    for (const auto& p : prompts) reqs.push_back(make_request(*target, p, o.max_tokens));

    std::vector<std::vector<int>> cands = o.candidates.empty() ? default_candidates(n_layer) : o.candidates;
    SPECDEC_CHECK(!cands.empty(), "calibrate: no candidate layer sets (the model has ", n_layer, " layers)");
    for (const auto& c : cands) model::validate_layer_list(c, n_layer, o.model_path);

    CalibrationResult res;
    res.model_path = o.model_path;
    res.n_layer = n_layer;
    res.method = sched::method_name(o.spec.method);
    res.n_threads = target->pool().size();
    res.n_prompts = (int)prompts.size();
    res.max_tokens = o.max_tokens;

    // Each speculative run is paired with an AR run of the same prompt just
    // before it, and its speedup is taken against those AR runs only: on a
    // shared machine the load swings within minutes, and a ratio of runs far
    // apart in time measures the load, not the method.
    std::map<std::string, Acc> ar_all;
    for (const auto& layers : cands) {
        CalibrationRow row;
        row.layers = model::format_layer_list(layers);
        row.n_layers = (int)layers.size();
        say("layers " + row.layers + " ...");
        runtime::EngineOptions dopts = eo;
        dopts.keep_layers = layers;
        dopts.n_ctx = target->n_ctx();
        dopts.n_threads = 1;  // the draft runs on the target's pool
        auto draft = runtime::Engine::load(dopts);
        std::map<std::string, Acc> acc, ar;
        for (size_t i = 0; i < reqs.size(); ++i) {
            const auto a = runtime::generate_ar(*target, reqs[i]);
            sched::SpecStats st;
            const auto r = sched::generate_speculative(*target, draft.get(), reqs[i], o.spec, &st);
            row.identical = row.identical && r.tokens == a.tokens;
            for (const std::string& k : {prompts[i].kind, std::string("all")}) {
                acc[k].tokens += r.n_generated;
                acc[k].decode_s += r.decode_s;
                acc[k].emitted += st.emitted;
                acc[k].rounds += st.seq_rounds;
                for (auto* m : {&ar, &ar_all}) {
                    (*m)[k].tokens += a.n_generated;
                    (*m)[k].decode_s += a.decode_s;
                }
            }
        }
        SPECDEC_CHECK(row.identical, "calibrate: layers ", row.layers,
                      " produced tokens different from AR (speculation must be lossless)");
        for (auto& [k, x] : acc) {
            const double ar_tok_s = ar[k].tok_s();
            row.kinds.push_back({k, x.tau(), x.tok_s(), ar_tok_s > 0 ? x.tok_s() / ar_tok_s : 0.0});
        }
        res.rows.push_back(std::move(row));
    }
    for (auto& [k, a] : ar_all) res.ar_kinds.push_back({k, 1.0, a.tok_s(), 1.0});
    res.ar_tok_s = ar_all["all"].tok_s();
    double best = 1.0;
    for (size_t r = 0; r < res.rows.size(); ++r)
        for (const auto& k : res.rows[r].kinds)
            if (k.kind == "all" && k.speedup > best) {
                best = k.speedup;
                res.chosen = (int)r;
            }
    return res;
}

nlohmann::json CalibrationResult::to_json() const {
    nlohmann::json rows_j = nlohmann::json::array();
    for (const auto& r : rows)
        rows_j.push_back({{"layers", r.layers}, {"n_layers", r.n_layers}, {"identical", r.identical},
                          {"figures", kinds_json(r.kinds, true)}});
    nlohmann::json j{{"model", model_path},        {"n_layer", n_layer},       {"method", method},
                     {"threads", n_threads},       {"prompts", n_prompts},     {"max_tokens", max_tokens},
                     {"ar_tok_s", ar_tok_s},       {"ar", kinds_json(ar_kinds, false)},
                     {"candidates", rows_j}};
    if (chosen >= 0) {
        const auto& r = rows[chosen];
        double sp = 0;
        for (const auto& k : r.kinds)
            if (k.kind == "all") sp = k.speedup;
        j["choice"] = {{"draft_layers", r.layers}, {"method", method}, {"speedup", sp}};
    } else {
        j["choice"] = {{"draft_layers", "ar"}, {"method", "ar"}, {"speedup", 1.0},
                       {"why", "no candidate decoded faster than AR"}};
    }
    return j;
}

void save_calibration(const CalibrationResult& r, const std::string& path) {
    nlohmann::json j = r.to_json();
    j["version"] = 1;
    j["model_size"] = file_size(r.model_path);
    j["model_sha256"] = sha256_file(r.model_path);
    j["date"] = utc_now();
    j["load_average"] = load_average();
    j["cpu"] = cpu_model();
    std::ofstream out(path);
    SPECDEC_CHECK(out.good(), "cannot write '", path, "'");
    out << j.dump(2) << "\n";
    SPECDEC_CHECK(out.good(), "cannot write '", path, "'");
}

}  // namespace specdec::bench
