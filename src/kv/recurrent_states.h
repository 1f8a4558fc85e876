// The recurrent state of a model's recurrent layers (Qwen3.5's gated DeltaNet:
// a convolution window and a matrix per head), per sequence, kept the way the
// KV cache keeps keys and values so that speculation stays lossless:
//   - one committed state per sequence: the state after its committed prefix;
//   - the states a forward's rows leave, by the row's rank among its
//     sequence's rows (the index commit_length / commit_path use), so that a
//     commit keeps the state after its last accepted row and a rejected draft
//     leaves nothing behind;
//   - one checkpoint per sequence: the state at a length saved on purpose
//     (the end of a prompt), the only shorter prefix a truncate can go back to.
//
// A state is a whole sequence's (every recurrent layer's part, one after the
// other; the model decides the layout) and large (Qwen3.5 0.8B: 20 MB), so a
// row keeps a state of its own only when it may end a commit or has a branch
// (a row that wants logits, the last row of its sequence in the batch, a row
// with a child other than the next row); up to spec_rows - 1 rows of a
// sequence do. Every other row, and rows past that number, write one shared
// "tail" state, which holds the newest of them: a prefill chunk touches two
// states, not one per row, and can still be committed whole.
// A commit swaps buffers instead of copying the state.
#pragma once

#include <cstddef>
#include <vector>

#include "core/page_buffer.h"

namespace specdec::kv {

class RecurrentStates {
public:
    RecurrentStates() = default;  // no recurrent layers
    RecurrentStates(int n_seq, size_t floats, int spec_rows);

    bool empty() const { return floats_ == 0; }
    size_t floats() const { return floats_; }
    int spec_rows() const { return spec_rows_; }

    float* committed(int seq) { return buffer(seq, committed_slot()); }

    // A forward's rows, in batch order: start_forward for each sequence it
    // touches, then place_row for each row (parent_rank < 0: continues the
    // committed prefix). Throws specdec::Error when a row's parent state would
    // already be overwritten (more rows of a tree than states kept).
    void start_forward(int seq);
    void place_row(int seq, int rank, int parent_rank, bool keep_own);
    // The state row `rank` of the current forward writes, and the one it reads.
    float* row_state(int seq, int rank) { return buffer(seq, rows_[seq][rank].slot); }
    float* parent_state(int seq, int rank);

    // The state after row `rank` of the last forward becomes the committed one.
    void commit_row(int seq, int rank);
    void zero(int seq);
    void save_checkpoint(int seq, int len);
    // Restores the state at `len`: the committed length itself (nothing to do),
    // 0, or the saved checkpoint's; anything else throws specdec::Error.
    void restore(int seq, int len, int committed_len);
    void copy(int src, int dst);

private:
    struct RowPlace {
        int slot = 0;
        int parent = -1;  // parent's rank, or -1
    };
    // Logical slots per sequence: 0 .. spec_rows - 2 rows' own, spec_rows - 1
    // the tail, spec_rows the committed state; phys_ maps them to buffers.
    int tail_slot() const { return spec_rows_ - 1; }
    int committed_slot() const { return spec_rows_; }
    float* buffer(int seq, int slot) {
        return static_cast<float*>(states_.data()) +
               (size_t)phys_[(size_t)seq * (spec_rows_ + 1) + slot] * floats_;
    }
    float* checkpoint(int seq) { return static_cast<float*>(checkpoints_.data()) + (size_t)seq * floats_; }

    size_t floats_ = 0;
    int spec_rows_ = 0;
    PageBuffer states_;       // (n_seq * (spec_rows + 1), floats): page-mapped, untouched ones cost no RAM
    PageBuffer checkpoints_;  // (n_seq, floats)
    std::vector<int> phys_;   // (n_seq, spec_rows + 1) buffer index of each logical slot
    std::vector<std::vector<RowPlace>> rows_;  // (n_seq) the last forward's rows by rank
    std::vector<int> kept_;       // (n_seq) own states handed out in the current forward
    std::vector<int> tail_rank_;  // (n_seq) rank of the row whose state the tail holds, or -1
    std::vector<int> checkpoint_len_;  // (n_seq) -1: none
};

}  // namespace specdec::kv
