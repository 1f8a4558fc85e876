#include "model/prefill.h"

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace specdec::model {

const float* prefill_chunked(Transformer& model, kv::KvCache& cache, ThreadPool& pool, int seq,
                             std::span<const int32_t> tokens, int chunk, ForwardBatch& batch, ForwardResult& result,
                             const PrefillChunkFn& on_chunk) {
    SPECDEC_CHECK(!tokens.empty(), "prefill: no tokens");
    const int start = cache.committed(seq);
    if (start + (int)tokens.size() > cache.n_ctx())
        throw Error(detail::concat("prompt of ", tokens.size(), " tokens does not fit the context of ",
                                   cache.n_ctx(), " tokens (", start,
                                   " already used); use a shorter prompt or a larger --ctx"));
    const size_t step = (size_t)std::max(1, chunk);
    for (size_t off = 0; off < tokens.size(); off += step) {
        const size_t n = std::min(step, tokens.size() - off);
        batch.clear();
        batch.add_chain(std::vector<int32_t>(tokens.begin() + off, tokens.begin() + off + n), start + (int32_t)off,
                        seq, false);
        // Only the last token's logits are returned: earlier chunks skip the
        // LM head (at one row it reads the whole output matrix).
        if (off + n < tokens.size()) batch.want_logits.back() = 0;
        model.forward(batch, cache, pool, result);
        cache.commit_length(seq, (int)n);
        if (on_chunk) on_chunk(start + (int)off, (int)n, result);
    }
    // A recurrent model can come back to the prompt's end (a second answer to
    // the same prompt) only from a saved state.
    cache.checkpoint(seq);
    return result.row_logits(0);
}

}  // namespace specdec::model
