// specdec::Engine: the public API over the internal engine. It loads models
// as `specdec generate` always has (the draft with the target's context and
// one thread: chain and tree run it on the target's pool) and picks the
// decoding loop: runtime::generate_ar for plain AR, sched::generate_speculative
// for every other method (and for AR with a trace, which only that loop writes).
#include "specdec/engine.h"

#include "core/error.h"
#include "model/layer_list.h"
#include "runtime/draft_source.h"
#include "runtime/engine.h"
#include "runtime/model_locator.h"
#include "sched/spec_config.h"
#include "sched/ssd_scheduler.h"
#include "sched/sync_scheduler.h"

namespace specdec {

struct Engine::Impl {
    std::unique_ptr<runtime::Engine> target, draft;
    std::string draft_path;
    std::string eagle3_path;
    bool self_spec = false;
    // --draft-layers auto where calibration found no draft faster than AR:
    // there is no draft, and methods that need one decode with ar instead
    // (the output is the same, lossless; AR is what calibration measured fastest).
    bool calibrated_ar = false;
};

Engine::Engine(const EngineOptions& opts) : impl_(std::make_unique<Impl>()) {
    SPECDEC_CHECK(opts.threads >= 0, "threads must be >= 0 (0: all cores), got ", opts.threads);
    SPECDEC_CHECK(opts.ctx >= 0, "ctx must be >= 0 (0: min(model, 4096)), got ", opts.ctx);
    SPECDEC_CHECK(opts.sequences >= 1 && opts.draft_branch_slots >= 0, "sequences must be >= 1 and ",
                  "draft branch slots >= 0, got ", opts.sequences, " and ", opts.draft_branch_slots);
    SPECDEC_CHECK(opts.draft.empty() || opts.draft_layers.empty(),
                  "give either a draft model or self-speculation draft layers, not both");
    SPECDEC_CHECK(opts.eagle3.empty() || (opts.draft.empty() && opts.draft_layers.empty()),
                  "give either an EAGLE-3 head or a draft model (or draft layers), not both");
    runtime::EngineOptions eopts;
    eopts.model_path = runtime::resolve_model(opts.model);
    eopts.n_threads = opts.threads;
    eopts.n_ctx = opts.ctx;
    eopts.n_seq = opts.sequences;
    eopts.chat_template_path = opts.chat_template;
    // Draft layers are resolved (and an `auto` file read) before the target
    // loads, so a bad list or a missing calibration is reported at once.
    runtime::DraftLayers layers;
    impl_->self_spec = !opts.draft_layers.empty();
    if (impl_->self_spec) {
        layers = runtime::resolve_draft_layers(opts.draft_layers, eopts.model_path);
        impl_->calibrated_ar = layers.use_ar;
    }
    impl_->target = runtime::Engine::load(eopts);
    if (!opts.eagle3.empty()) {
        impl_->target->load_eagle3(opts.eagle3);
        impl_->eagle3_path = opts.eagle3;
    }
    if (!opts.draft.empty() || (impl_->self_spec && !layers.use_ar)) {
        runtime::EngineOptions dopts = eopts;
        dopts.model_path = impl_->self_spec ? eopts.model_path : runtime::resolve_model(opts.draft);
        dopts.keep_layers = layers.keep_layers;  // validated against the model when it loads
        dopts.n_ctx = impl_->target->n_ctx();
        // chain/tree: the draft runs on the target's pool (never at the same
        // time); ssd: on its worker's own pool. The engine's pool stays idle.
        dopts.n_threads = 1;
        // Chain and tree use the first `sequences`; SSD each sequence plus its branches.
        dopts.n_seq = opts.sequences * (1 + opts.draft_branch_slots);
        impl_->draft = runtime::Engine::load_draft(*impl_->target, dopts);
        impl_->draft_path = dopts.model_path;
    }
}

Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

std::string Engine::resolve_method(const Request& req) const {
    const std::string method = req.method.empty() ? default_method(req.sampling) : req.method;
    const Method m = sched::parse_method(method);
    SpecConfig probe;
    probe.method = m;
    if (probe.needs_draft() && impl_->calibrated_ar) return "ar";
    SPECDEC_CHECK(m != Method::Ssd || impl_->draft, "method ssd needs a draft model: load the engine with a draft ",
                  "(EngineOptions::draft) or self-speculation layers (EngineOptions::draft_layers); an EAGLE-3 head ",
                  "cannot draft for it");
    SPECDEC_CHECK(!probe.needs_draft() || impl_->draft || !impl_->eagle3_path.empty(), "method ", method,
                  " needs a draft model: load the engine with a draft (EngineOptions::draft), "
                  "self-speculation layers (EngineOptions::draft_layers) or an EAGLE-3 head (EngineOptions::eagle3)");
    return method;
}

Result Engine::generate(const Request& req) {
    Result out;
    out.method = resolve_method(req);
    SpecConfig cfg = req.spec;
    cfg.method = sched::parse_method(out.method);
    out.speculative = cfg.method != Method::AR || !cfg.trace_path.empty();
    // Only the methods that draft with a model get it (auto may run without).
    runtime::Engine* draft = cfg.needs_draft() || cfg.method == Method::Auto ? impl_->draft.get() : nullptr;
    if (cfg.method == Method::Ssd) {
        // SSD with its default options: speculations of draft_k, the draft
        // side on one thread of its own beside the engine's pool.
        sched::SsdConfig sc;
        sc.k = cfg.draft_k;
        sc.ngram_min = cfg.ngram_min;
        sc.ngram_max = cfg.ngram_max;
        sc.lookup = sched::lookup_first_options(cfg);
        sc.trace_path = cfg.trace_path;
        sc.vocab_subset_n = cfg.vocab_subset_n;
        sc.vocab_subset_path = cfg.vocab_subset_path;
        sc.vocab_corpus_path = cfg.vocab_corpus_path;
        sc.validate();
        sched::SsdStats st;
        static_cast<GenerateResult&>(out) = sched::generate_ssd(*impl_->target, *draft, req, sc, &st, req.on_text);
        out.spec = st.spec;
    } else {
        static_cast<GenerateResult&>(out) =
            out.speculative ? sched::generate_speculative(*impl_->target, draft, req, cfg, &out.spec, req.on_text)
                            : runtime::generate_ar(*impl_->target, req, req.on_text);
    }
    // The head drafts for chain, tree and auto when no draft model is loaded.
    if (out.speculative && (cfg.needs_draft() || cfg.method == Method::Auto) && !draft &&
        !impl_->eagle3_path.empty())
        out.draft_model = impl_->eagle3_path;
    if (out.speculative && draft) {
        out.draft_model = impl_->draft_path;
        if (impl_->self_spec) out.draft_layers = model::format_layer_list(draft->model().layers_run());
    }
    return out;
}

std::vector<int32_t> Engine::tokenize(const GenerateRequest& req) const {
    return runtime::tokenize_request(*impl_->target, req);
}

const std::string& Engine::model_path() const { return impl_->target->options().model_path; }
const std::string& Engine::draft_path() const { return impl_->draft_path; }
const std::string& Engine::eagle3_path() const { return impl_->eagle3_path; }
bool Engine::has_draft() const { return impl_->draft != nullptr; }
int Engine::n_ctx() const { return impl_->target->n_ctx(); }
int Engine::threads() const { return (int)impl_->target->pool().size(); }
runtime::Engine& Engine::target_engine() { return *impl_->target; }
runtime::Engine* Engine::draft_engine() { return impl_->draft.get(); }

}  // namespace specdec
