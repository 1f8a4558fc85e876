// The recurrent state of a model's recurrent layers (Qwen3.5's gated DeltaNet:
// a convolution window and a matrix per head), per sequence, kept the way the
// KV cache keeps keys and values so that speculation stays lossless:
//   - one committed state per sequence: the state after its committed prefix;
//   - one state per speculative row of the last forward, by the row's rank
//     among its sequence's rows (the same index commit_length / commit_path
//     use), so that a commit keeps the state after its last accepted row and
//     a rejected draft leaves nothing behind;
//   - one checkpoint per sequence: the state at a length saved on purpose
//     (the end of a prompt), the only shorter prefix a truncate can go back to.
// A state is a whole sequence's: every recurrent layer's part, one after the
// other (the model decides the layout). Rows of rank >= spec_rows - 1 share
// the last speculative state, which then holds the newest of them: a long
// chain (a prefill chunk) keeps its last row's state only, enough to commit it
// whole.
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

    float* committed(int seq) { return base(committed_) + (size_t)seq * floats_; }
    // The state written by the row of rank `rank` in the current forward.
    float* spec(int seq, int rank) { return base(spec_) + ((size_t)seq * spec_rows_ + slot(rank)) * floats_; }
    // The forward about to write rank `rank` of `seq` (ranks ascending): where
    // its parent's state is, or an error when a shared tail state no longer
    // holds it (a tree of more than spec_rows rows).
    const float* parent_state(int seq, int parent_rank);
    void wrote(int seq, int rank) { newest_[seq] = rank; }
    // A forward starts writing `seq`'s rows from rank 0.
    void begin_forward(int seq) { newest_[seq] = -1; }

    // The state after speculative row `rank` becomes the committed one.
    void commit_row(int seq, int rank);
    void zero(int seq);
    void save_checkpoint(int seq, int len);
    // Restores the state at `len`: the committed length itself (nothing to do),
    // 0, or the saved checkpoint's; anything else throws specdec::Error.
    void restore(int seq, int len, int committed_len);
    void copy(int src, int dst);

private:
    int slot(int rank) const { return rank < spec_rows_ - 1 ? rank : spec_rows_ - 1; }
    static float* base(const PageBuffer& b) { return static_cast<float*>(b.data()); }
    float* checkpoint(int seq) { return base(checkpoint_) + (size_t)seq * floats_; }

    size_t floats_ = 0;
    int spec_rows_ = 0;
    PageBuffer committed_, spec_, checkpoint_;
    std::vector<int> newest_;          // (n_seq) rank of the newest row in the shared tail state
    std::vector<int> checkpoint_len_;  // (n_seq) -1: none
};

}  // namespace specdec::kv
