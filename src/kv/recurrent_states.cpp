#include "kv/recurrent_states.h"

#include <cstring>
#include <utility>

#include "core/error.h"

namespace specdec::kv {

RecurrentStates::RecurrentStates(int n_seq, size_t floats, int spec_rows) : floats_(floats), spec_rows_(spec_rows) {
    SPECDEC_CHECK(n_seq > 0 && floats > 0 && spec_rows >= 2, "invalid recurrent state dimensions");
    const size_t per_seq = (size_t)spec_rows + 1;
    states_ = PageBuffer((size_t)n_seq * per_seq * floats * sizeof(float), "the recurrent states");
    checkpoints_ = PageBuffer((size_t)n_seq * floats * sizeof(float), "the recurrent state checkpoints");
    phys_.resize((size_t)n_seq * per_seq);
    for (size_t i = 0; i < phys_.size(); ++i) phys_[i] = (int)i;
    rows_.assign(n_seq, {});
    kept_.assign(n_seq, 0);
    tail_rank_.assign(n_seq, -1);
    checkpoint_len_.assign(n_seq, -1);
}

void RecurrentStates::start_forward(int seq) {
    rows_[seq].clear();
    kept_[seq] = 0;
    tail_rank_[seq] = -1;
}

void RecurrentStates::place_row(int seq, int rank, int parent_rank, bool keep_own) {
    SPECDEC_CHECK(rank == (int)rows_[seq].size(), "recurrent states: rows must be placed in rank order");
    if (parent_rank >= 0 && rows_[seq][parent_rank].slot == tail_slot())
        SPECDEC_CHECK(tail_rank_[seq] == parent_rank, "recurrent model: speculative row ", rank, " continues row ",
                      parent_rank, ", whose state is no longer kept (at most ", spec_rows_ - 1,
                      " rows of a sequence that want logits or branch, per forward)");
    RowPlace p;
    p.parent = parent_rank;
    if (keep_own && kept_[seq] < spec_rows_ - 1) {
        p.slot = kept_[seq]++;
    } else {
        p.slot = tail_slot();
        tail_rank_[seq] = rank;
    }
    rows_[seq].push_back(p);
}

float* RecurrentStates::parent_state(int seq, int rank) {
    const int parent = rows_[seq][rank].parent;
    return parent < 0 ? committed(seq) : row_state(seq, parent);
}

void RecurrentStates::commit_row(int seq, int rank) {
    SPECDEC_CHECK(rank >= 0 && rank < (int)rows_[seq].size(), "recurrent model: no speculative row ", rank,
                  " to commit");
    const int slot = rows_[seq][rank].slot;
    SPECDEC_CHECK(slot != tail_slot() || tail_rank_[seq] == rank, "recurrent model: cannot commit up to speculative row ",
                  rank, ": its state is not kept (a row without logits inside a chain)");
    // The row's buffer becomes the committed one; the old committed buffer is
    // free for the next forward (every row writes its state before it is read).
    const size_t base = (size_t)seq * (spec_rows_ + 1);
    std::swap(phys_[base + committed_slot()], phys_[base + slot]);
    rows_[seq].clear();  // the forward's other rows are dead now
    tail_rank_[seq] = -1;
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
