// Model-free prompt-lookup proposer: finds the most recent earlier occurrence
// of the history's last n tokens (n from max_n down to min_n) and proposes the
// tokens that followed it as a chain. Drafts are deterministic (q a point mass).
#pragma once

#include "spec/proposer.h"

namespace specdec::spec {

struct NgramOptions {
    int min_n = 1;      // shortest suffix to match
    int max_n = 3;      // longest suffix to match (tried first)
    int max_draft = 5;  // chain length K
};

class NgramProposer final : public Proposer {
public:
    explicit NgramProposer(const NgramOptions& opts);
    void propose(std::span<const ProposeInput> in, std::span<DraftTree> out, Rng& rng) override;

    // The continuation after the most recent earlier match of the suffix, up to
    // max_len tokens; empty when nothing matches. Exposed for tests.
    static std::vector<int32_t> lookup(std::span<const int32_t> h, int min_n, int max_n, int max_len);

private:
    NgramOptions opts_;
};

}  // namespace specdec::spec
