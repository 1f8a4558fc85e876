#include "kv/recurrent_states.h"

#include <cstring>

#include "core/error.h"

namespace specdec::kv {

RecurrentStates::RecurrentStates(int n_seq, size_t floats, int spec_rows) : floats_(floats), spec_rows_(spec_rows) {
    SPECDEC_CHECK(n_seq > 0 && floats > 0 && spec_rows >= 2, "invalid recurrent state dimensions");
    // Page-mapped like the KV cache: a sequence that is never used costs no RAM.
    committed_ = PageBuffer((size_t)n_seq * floats * sizeof(float), "the recurrent states");
    spec_ = PageBuffer((size_t)n_seq * spec_rows * floats * sizeof(float), "the speculative recurrent states");
    checkpoint_ = PageBuffer((size_t)n_seq * floats * sizeof(float), "the recurrent state checkpoints");
    newest_.assign(n_seq, -1);
    checkpoint_len_.assign(n_seq, -1);
}

const float* RecurrentStates::parent_state(int seq, int parent_rank) {
    if (parent_rank >= spec_rows_ - 1)
        SPECDEC_CHECK(newest_[seq] == parent_rank, "recurrent model: row of rank ", parent_rank + 1,
                      " continues row ", parent_rank, ", whose state is no longer kept (at most ", spec_rows_ - 1,
                      " rows of a tree per sequence, or one chain)");
    return spec(seq, parent_rank);
}

void RecurrentStates::commit_row(int seq, int rank) {
    if (rank >= spec_rows_ - 1)
        SPECDEC_CHECK(newest_[seq] == rank, "recurrent model: cannot commit up to speculative row ", rank,
                      ": its state is not kept (only the last row of a long chain is)");
    std::memcpy(committed(seq), spec(seq, rank), floats_ * sizeof(float));
}

void RecurrentStates::zero(int seq) { std::memset(committed(seq), 0, floats_ * sizeof(float)); }

void RecurrentStates::save_checkpoint(int seq, int len) {
    std::memcpy(checkpoint(seq), committed(seq), floats_ * sizeof(float));
    checkpoint_len_[seq] = len;
}

void RecurrentStates::restore(int seq, int len, int committed_len) {
    if (len == committed_len) return;
    if (len == 0) {
        zero(seq);
        return;
    }
    SPECDEC_CHECK(len == checkpoint_len_[seq], "recurrent model: cannot go back to ", len, " tokens of ",
                  committed_len, ": its state keeps no history (only the prompt's end, ",
                  checkpoint_len_[seq], ", is saved)");
    std::memcpy(committed(seq), checkpoint(seq), floats_ * sizeof(float));
}

void RecurrentStates::copy(int src, int dst) {
    if (src == dst) return;
    std::memcpy(committed(dst), committed(src), floats_ * sizeof(float));
    std::memcpy(checkpoint(dst), checkpoint(src), floats_ * sizeof(float));
    checkpoint_len_[dst] = checkpoint_len_[src];
}

}  // namespace specdec::kv
