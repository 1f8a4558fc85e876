#include "spec/ngram_proposer.h"

#include <algorithm>

#include "core/error.h"

namespace specdec::spec {

NgramProposer::NgramProposer(const NgramOptions& opts) : opts_(opts) {
    SPECDEC_CHECK(opts.min_n >= 1 && opts.max_n >= opts.min_n, "ngram: need 1 <= min_n <= max_n");
    SPECDEC_CHECK(opts.max_draft >= 1, "ngram: max_draft must be >= 1");
}

std::vector<int32_t> NgramProposer::lookup(std::span<const int32_t> h, int min_n, int max_n, int max_len) {
    const int H = (int)h.size();
    for (int n = std::min(max_n, H - 1); n >= min_n; --n) {
        const int32_t* suffix = h.data() + H - n;
        // Most recent match first: recent text predicts the next tokens best.
        for (int start = H - n - 1; start >= 0; --start) {
            if (!std::equal(suffix, suffix + n, h.data() + start)) continue;
            const int from = start + n;
            const int len = std::min(max_len, H - from);
            if (len <= 0) continue;
            return {h.begin() + from, h.begin() + from + len};
        }
    }
    return {};
}

void NgramProposer::propose(std::span<const ProposeInput> in, std::span<DraftTree> out, Rng&) {
    for (size_t i = 0; i < in.size(); ++i) {
        const int room = std::min(opts_.max_draft, in[i].max_nodes - 1);
        std::vector<int32_t> cont;
        if (room > 0) cont = lookup(in[i].history, opts_.min_n, opts_.max_n, room);
        out[i].assign_chain(in[i].history.back(), cont);
        out[i].from_lookup = !cont.empty();  // a root alone is an AR step
    }
}

}  // namespace specdec::spec
