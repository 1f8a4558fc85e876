#include "sched/ssd_trace.h"

#include "spec/trace.h"

namespace specdec::sched {

nlohmann::json ssd_round_json(const SsdRoundRecord& r) {
    nlohmann::json j;
    j["type"] = "ssd_round";
    j["seq"] = r.seq;
    j["round"] = r.round;
    j["batch_round"] = r.batch_round;
    j["prefix_len"] = r.prefix_len;
    j["root"] = r.root;
    j["drafts"] = r.drafts;
    j["source"] = r.from_lookup ? "lookup" : "draft";
    j["lookup"] = r.lookup;
    j["lookup_k"] = r.lookup_k;
    j["hit"] = r.hit;
    j["backup"] = r.hit || r.from_lookup ? nlohmann::json(nullptr) : nlohmann::json(backup_name(r.backup));
    j["fallback"] = r.fallback.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.fallback);
    j["accepted"] = r.accepted;
    j["bonus"] = r.bonus >= 0 ? nlohmann::json(r.bonus) : nlohmann::json(nullptr);
    j["emitted"] = r.emitted;
    j["n_emitted"] = r.emitted.size();
    j["fanout"] = r.fanout;
    j["draft_build_s"] = r.build_s >= 0 ? nlohmann::json(r.build_s) : nlohmann::json(nullptr);
    j["build_interrupted"] = r.build_interrupted;
    j["draft_over_verify"] =
        r.build_s >= 0 && r.verify_s > 0 ? nlohmann::json(r.build_s / r.verify_s) : nlohmann::json(nullptr);
    j["t_backup_s"] = r.backup_s;
    j["t_stall_s"] = r.stall_s;
    j["t_tree_s"] = r.tree_s;
    j["t_verify_s"] = r.verify_s;
    return j;
}

nlohmann::json ssd_run_header(const SsdConfig& cfg, const sample::SamplingParams& p, const runtime::Engine& target,
                              runtime::Engine* draft, int target_threads) {
    nlohmann::json h;
    h["method"] = "ssd";
    spec::add_sampling_fields(h, p);
    h["ssd_k"] = cfg.k;
    h["fanout"] = fanout_name(cfg.fanout);
    h["fanout_budget"] = cfg.fanout_budget;
    h["saguaro_c"] = cfg.saguaro_c;
    h["backup"] = backup_name(cfg.backup);
    h["interrupt"] = cfg.interrupt;
    h["force_miss"] = cfg.force_miss;
    h["target_threads"] = target_threads;
    h["draft_threads"] = cfg.draft_threads;
    h["draft_pin_cpus"] = cfg.draft_pin_cpus;
    h["draft_seed"] = cfg.draft_seed;
    h["vocab_subset_n"] = cfg.vocab_subset_n;
    spec::add_model_fields(h, "target", target.options().model_path);
    if (draft) {
        spec::add_model_fields(h, "draft", draft->options().model_path);
        h["draft_layers_run"] = draft->model().n_layers_run();
    } else {
        h["draft_remote"] = cfg.remote_draft;  // the server's model is its own
        h["timeout_ms"] = cfg.link_timeout_ms;
    }
    return h;
}

}  // namespace specdec::sched
