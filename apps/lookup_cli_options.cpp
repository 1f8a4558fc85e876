#include "lookup_cli_options.h"

namespace specdec::cli {

void add_lookup_options(CLI::App& app, sched::SpecConfig& spec) {
    app.add_option("--lookup-min", spec.lookup_min,
                   "chain/tree/ssd: use the prompt-lookup continuation instead of drafting when the history ends "
                   "with an earlier n-gram of at least this many tokens (0 = off)")
        ->check(CLI::Range(0, 16));
    app.add_option("--lookup-k", spec.lookup_k,
                   "chain/tree/ssd: lookup chain length (0 = the draft's own: --draft-k, --ssd-k, or the tree's depth)")
        ->check(CLI::Range(0, 64));
}

void add_auto_options(CLI::App& app, sched::SpecConfig& spec) {
    app.add_option("--auto-min-gain", spec.auto_min_gain,
                   "auto: take a draft only when the cost model predicts it this much faster than a plain AR "
                   "step (0.02 = 2 %; higher is safer where drafts barely pay)")
        ->check(CLI::Range(0.0, 1.0));
    app.add_option("--auto-siblings", spec.auto_siblings,
                   "auto, greedy: the cost model may put the draft's second choice beside its chain at up to "
                   "this many depths (a small tree: more verification rows, no more draft steps); -1 (the "
                   "default): up to --draft-k; 0: chains only")
        ->check(CLI::Range(-1, 64));
}

}  // namespace specdec::cli
