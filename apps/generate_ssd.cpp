#include "generate_ssd.h"

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "model/layer_list.h"
#include "runtime/engine.h"
#include "sched/ssd_scheduler.h"
#include "ssd_cli_options.h"

namespace specdec::cli {

SsdGenerateOutput generate_ssd(const SsdGenerateOptions& opts, const GenerateRequest& req,
                               const TokenCallback& on_text) {
    const sched::SsdConfig& ssd = opts.ssd;
    ssd.validate();
    // The thread layout. -t T (default: every core) is what both sides share:
    // the draft takes --ssd-draft-threads of it and the target the rest, as
    // specdec bench splits it. Giving the target all T threads plus a draft
    // thread (--ssd-target-threads, more threads than cores) measured slower
    // on the 2-core qwen pair (docs/benchmarks.md).
    // A remote draft side uses no core here: the target takes all of -t.
    const bool remote = !ssd.remote_draft.empty();
    EngineOptions eopts = opts.engine;
    const int total = eopts.threads > 0 ? eopts.threads : (int)std::thread::hardware_concurrency();
    eopts.threads = opts.target_threads > 0 ? opts.target_threads
                                            : std::max(1, total - (remote ? 0 : ssd.draft_threads));
    eopts.draft_branch_slots = ssd.fanout_budget;
    if (remote) eopts.draft.clear(), eopts.draft_layers.clear();
    Engine api(eopts);
    // Draft layers that calibration found slower than AR load no draft; the
    // CLI decodes those with ar before it gets here.
    SPECDEC_CHECK(remote || api.has_draft(), "--method ssd needs a draft model (-d DRAFT) or draft layers");
    runtime::Engine& engine = api.target_engine();

    sched::SsdStats sst;
    SsdGenerateOutput out;
    Result& r = out.result;
    if (remote) {
        const sched::DraftSideFactory link = remote_draft_link(ssd.remote_draft, opts.allow_remote);
        static_cast<GenerateResult&>(r) = sched::generate_ssd_remote(engine, link, req, ssd, &sst, on_text);
        r.draft_model = ssd.remote_draft;
    } else {
        runtime::Engine& draft = *api.draft_engine();
        static_cast<GenerateResult&>(r) = sched::generate_ssd(engine, draft, req, ssd, &sst, on_text);
        r.draft_model = api.draft_path();
        if (!eopts.draft_layers.empty()) r.draft_layers = model::format_layer_list(draft.model().layers_run());
    }
    r.method = "ssd";
    r.speculative = true;
    r.spec = sst.spec;
    out.model_path = api.model_path();
    out.threads = api.threads();

    nlohmann::json& j = out.ssd_stats;
    j["cache_hit_rate"] = sst.hit_rate();
    j["stall_s"] = sst.stall_s;
    j["ssd_k"] = ssd.k;
    j["fanout"] = sched::fanout_name(ssd.fanout);
    j["fanout_budget"] = ssd.fanout_budget;
    j["fanout_last"] = sst.draft.fanout;
    j["saguaro_c"] = ssd.saguaro_c;
    j["backup"] = sched::backup_name(ssd.backup);
    j["cache_lookups_k"] = sst.draft.lookups_k;
    j["cache_hits_k"] = sst.draft.hits_k;
    nlohmann::json rate_k = nlohmann::json::array();  // null where no lookup had that k
    for (size_t k = 0; k < sst.draft.lookups_k.size(); ++k)
        rate_k.push_back(sst.draft.lookups_k[k] > 0
                             ? nlohmann::json((double)sst.draft.hits_k[k] / sst.draft.lookups_k[k])
                             : nlohmann::json(nullptr));
    j["cache_hit_rate_k"] = rate_k;
    j["cache_lookups"] = sst.draft.lookups;
    j["cache_hits"] = sst.draft.hits;
    j["backups"] = {{"jit", sst.draft.jit}, {"ngram", sst.draft.ngram}, {"random", sst.draft.random}};
    j["draft_tree_s"] = sst.draft.tree_s;
    j["draft_over_verify"] = sst.draft_over_verify();
    j["backup_s"] = sst.draft.backup_s;
    j["interrupted_builds"] = sst.draft.interrupted;
    j["glue_reused"] = sst.draft.glue_reused;
    j["acceptance"] = sst.draft.acceptance;
    j["miss_exponent"] = sst.draft.miss_exponent;
    j["tokens_per_round"] = sst.spec.mean_accept_len();
    j["draft_threads"] = remote ? nlohmann::json(nullptr) : nlohmann::json(ssd.draft_threads);  // the server's -t
    j["target_threads"] = engine.pool().size();
    j["draft_nice"] = ssd.draft_nice;
    j["seq_rounds"] = sst.spec.seq_rounds;
    j["emitted"] = sst.spec.emitted;
    if (ssd.vocab_subset_n > 0) j["vocab_subset_n"] = ssd.vocab_subset_n;
    // Rounds the target drafted itself because the draft server failed.
    const sched::SsdFallbackStats& fb = sst.fallback;
    j["fallbacks"] = fb.rounds;
    j["fallback_reasons"] = {{"timeout", fb.timeout},   {"disconnected", fb.disconnected}, {"invalid", fb.invalid},
                             {"error", fb.error},       {"backoff", fb.backoff}};
    j["resyncs"] = fb.resyncs;
    if (remote) {
        j["ssd_draft"] = ssd.remote_draft;
        j["ssd_timeout_ms"] = ssd.link_timeout_ms;
    }
    return out;
}

}  // namespace specdec::cli
