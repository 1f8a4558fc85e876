#include "sched/generation_stats.h"

namespace specdec::sched {

nlohmann::json generation_stats(const Result& r) {
    nlohmann::json j;
    j["method"] = r.method;
    j["n_prompt"] = r.n_prompt;
    j["n_generated"] = r.n_generated;
    j["prefill_s"] = r.prefill_s;
    j["decode_s"] = r.decode_s;
    j["decode_tok_s"] = r.decode_tok_s();
    j["prefill_tok_s"] = r.prefill_tok_s();
    j["finish_reason"] = r.finish_reason;
    j["rounds"] = r.rounds();
    j["mean_accept_len"] = r.mean_accept_len();
    if (!r.speculative) return j;
    const SpecStats& st = r.spec;
    j["drafted"] = st.drafted;
    j["accepted"] = st.accepted;
    j["lookup_rounds"] = st.lookup_rounds;
    j["lookup_drafted"] = st.lookup_drafted;
    j["lookup_accepted"] = st.lookup_accepted;
    j["draft_s"] = st.draft_s;
    j["tree_s"] = st.tree_s;
    j["verify_s"] = st.verify_s;
    j["commit_s"] = st.commit_s;
    if (!r.draft_model.empty()) j["draft_model"] = r.draft_model;
    if (!r.draft_layers.empty()) j["draft_layers"] = r.draft_layers;
    if (r.method == "auto")
        j["auto"] = {{"rounds_none", st.auto_none},
                     {"rounds_lookup", st.auto_lookup},
                     {"rounds_draft", st.auto_draft},
                     {"sibling_drafts", st.auto_sibling_drafts},
                     {"predicted_s", st.auto_predicted_s},
                     {"measured_s", st.auto_measured_s},
                     {"costs_from", st.auto_costs_from},
                     {"calibration_s", st.auto_calibration_s}};
    return j;
}

}  // namespace specdec::sched
