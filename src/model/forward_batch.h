// The forward contract every decoding strategy uses: a batch of rows, each a
// token at a position in a sequence, optionally continuing another row of the
// same batch (its parent). Row i sees the committed prefix of its sequence plus
// its ancestors in the batch and itself; rows of other sequences and sibling
// branches are invisible. A chain (prefill, AR, draft chains) is parent = i-1;
// a row whose parent is itself hangs directly off the committed prefix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specdec::model {

struct ForwardBatch {
    std::vector<int32_t> tokens;       // (n)
    std::vector<int32_t> positions;    // (n) RoPE position of each row
    std::vector<int32_t> seq_ids;      // (n)
    std::vector<int32_t> parents;      // (n) index of the parent row (< i), or i itself for none
    std::vector<uint8_t> want_logits;  // (n) 1: return logits for this row
    std::vector<int> capture_layers;   // layers whose output hidden state is returned
    // Greedy-only rows: a row that wants logits gets its greedy token and that
    // token's logit (ForwardResult::argmax / max_logit) instead of its n_vocab
    // logits. The LM head then runs over slices of the vocabulary, so a
    // 64-row greedy verification on a 262144-token vocabulary holds a few MiB
    // of logits instead of 64. Same LM head work; the token is sample::argmax's.
    bool argmax_only = false;

    int size() const { return (int)tokens.size(); }
    void clear() {
        tokens.clear();
        positions.clear();
        seq_ids.clear();
        parents.clear();
        want_logits.clear();
    }
    // Appends a row; parent < 0 means "no parent in this batch".
    int add(int32_t token, int32_t pos, int32_t seq, int32_t parent, bool logits) {
        const int i = size();
        tokens.push_back(token);
        positions.push_back(pos);
        seq_ids.push_back(seq);
        parents.push_back(parent < 0 ? i : parent);
        want_logits.push_back(logits ? 1 : 0);
        return i;
    }
    // Appends a chain of tokens for one sequence starting at position pos0; the
    // first row hangs off the prefix, logits for the last row only (or all).
    void add_chain(const std::vector<int32_t>& toks, int32_t pos0, int32_t seq, bool all_logits) {
        for (size_t j = 0; j < toks.size(); ++j) {
            const int i = size();
            add(toks[j], pos0 + (int32_t)j, seq, j == 0 ? -1 : i - 1, all_logits || j + 1 == toks.size());
        }
    }
};

struct ForwardResult {
    std::vector<int> logit_rows;             // batch rows that have logits, ascending
    std::vector<float> logits;               // (logit_rows.size(), n_vocab); empty when argmax_only
    std::vector<int32_t> argmax;             // argmax_only: (logit_rows.size()) greedy token per row
    std::vector<float> max_logit;            // argmax_only: (logit_rows.size()) its logit
    std::vector<std::vector<float>> hidden;  // per captured layer: (n, n_embd)
    int n_vocab = 0;
    const float* row_logits(size_t k) const { return logits.data() + k * (size_t)n_vocab; }
};

}  // namespace specdec::model
