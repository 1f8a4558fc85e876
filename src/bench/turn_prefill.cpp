#include "bench/turn_prefill.h"

#include <algorithm>

#include "core/clock.h"
#include "core/error.h"
#include "model/prefill.h"

namespace specdec::bench {

sched::Prefilled TurnPrefill::view() const {
    sched::Prefilled p;
    for (const auto& l : logits) p.logits.push_back(l.data());
    p.draft_ready = draft_ready;
    return p;
}

TurnPrefill prefill_turn(runtime::Engine& target, runtime::Engine* draft,
                         const std::vector<std::vector<int32_t>>& prompts) {
    TurnPrefill tp;
    const int nv = target.config().n_vocab;
    double t0 = now_s();
    for (size_t i = 0; i < prompts.size(); ++i) {
        SPECDEC_CHECK(!prompts[i].empty(), "the prompt is empty after tokenization");
        target.cache().clear((int)i);
        const float* l = target.prefill((int)i, prompts[i]);
        tp.logits.emplace_back(l, l + nv);
    }
    tp.target_s = now_s() - t0;
    if (!draft) return tp;
    // A token outside the draft's vocabulary: each method handles it its own
    // way, so the draft is left to prefill for itself.
    const int dv = draft->config().n_vocab;
    for (const auto& p : prompts)
        if (std::any_of(p.begin(), p.end(), [&](int32_t t) { return t < 0 || t >= dv; })) return tp;
    // On the target's pool: the draft engine's own pool is sized for drafting.
    model::ForwardBatch batch;
    model::ForwardResult result;
    t0 = now_s();
    for (size_t i = 0; i < prompts.size(); ++i) {
        draft->cache().clear((int)i);
        model::prefill_chunked(draft->model(), draft->cache(), target.pool(), (int)i, prompts[i],
                               draft->options().prefill_chunk, batch, result);
    }
    tp.draft_s = now_s() - t0;
    tp.draft_ready = true;
    return tp;
}

}  // namespace specdec::bench
