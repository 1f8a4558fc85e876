// Key/value cache of one model for a fixed number of sequences.
//
// Each sequence owns n_ctx slots per layer. Slots [0, committed) hold the
// committed prefix, which is never written while a speculation is verified.
// A forward pass writes its rows into the speculative region that starts at
// `committed`; the caller then keeps what was accepted:
//   - commit_length(n): the first n speculative entries (a chain),
//   - commit_path(idx): the entries at the given increasing speculative indices,
//     gathered into the slots right after the prefix (a tree path).
// Whatever is not committed is dead: it is overwritten by the next forward and
// never visible, because attention only reads [0, committed) plus the rows of
// its own batch.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/page_buffer.h"
#include "kv/recurrent_states.h"

namespace specdec::kv {

struct KvCacheOptions {
    int n_layer = 0;
    int kv_dim = 0;   // n_head_kv * head_dim, same for K and V
    int n_ctx = 0;    // slots per sequence
    int n_seq = 1;
    // Models with recurrent layers (qwen35): floats of one sequence's state
    // over all of them, and how many speculative rows keep a state of their
    // own (kv/recurrent_states.h). 0: none.
    size_t recurrent_floats = 0;
    int recurrent_spec_rows = 0;
};

class KvCache {
public:
    explicit KvCache(const KvCacheOptions& opts);
    KvCache(KvCache&&) = default;
    KvCache& operator=(KvCache&&) = default;

    int n_ctx() const { return opts_.n_ctx; }
    int n_seq() const { return opts_.n_seq; }
    int n_layer() const { return opts_.n_layer; }
    int kv_dim() const { return opts_.kv_dim; }
    int committed(int seq) const { return committed_[seq]; }

    // fp16 storage of one slot: kv_dim values. Shape of a layer: (n_ctx, kv_dim).
    uint16_t* k(int layer, int seq, int slot) { return k_base() + offset(layer, seq, slot); }
    uint16_t* v(int layer, int seq, int slot) { return v_base() + offset(layer, seq, slot); }
    const uint16_t* k(int layer, int seq, int slot) const { return k_base() + offset(layer, seq, slot); }
    const uint16_t* v(int layer, int seq, int slot) const { return v_base() + offset(layer, seq, slot); }
    // Token position whose key is stored in a slot (RoPE and sliding windows use it).
    int32_t pos(int seq, int slot) const { return pos_[(size_t)seq * opts_.n_ctx + slot]; }
    void set_pos(int seq, int slot, int32_t p) { pos_[(size_t)seq * opts_.n_ctx + slot] = p; }

    void commit_length(int seq, int n);
    void commit_path(int seq, std::span<const int> spec_indices);
    // Drops committed entries from `len` on (rollback to a shorter prefix).
    // With recurrent layers only to 0, to the committed length, or to the
    // length of the last checkpoint (a recurrent state has no history).
    void truncate(int seq, int len);
    void clear(int seq) { truncate(seq, 0); }
    // Explicit, costed copy of one sequence's committed prefix into another.
    void copy_sequence(int src, int dst);
    // Explicit, costed copy of entries [from, from + n) of src's committed
    // prefix into dst, whose committed length must be `from` (it shares the
    // entries before it with src); they are committed in dst, positions
    // included. Not for models with recurrent layers (a state has no ranges).
    void copy_range(int src, int dst, int from, int n);
    // Remembers the committed recurrent state, so that a later truncate can
    // come back to this length (prefill calls it at the end of a prompt).
    // Nothing to do without recurrent layers.
    void checkpoint(int seq);

    // The recurrent layers' states (empty() when the model has none).
    RecurrentStates& recurrent() { return rec_; }

    size_t bytes() const { return 2 * elems() * sizeof(uint16_t); }
    // Of those, the bytes in RAM: pages written at least once (the buffers
    // start untouched and are never freed, so this only grows), by mincore.
    // What a process's RSS holds of its KV cache, told apart from its heap.
    size_t resident_bytes() const;

private:
    size_t elems() const { return (size_t)opts_.n_layer * opts_.n_seq * opts_.n_ctx * opts_.kv_dim; }
    size_t offset(int layer, int seq, int slot) const {
        return (((size_t)layer * opts_.n_seq + seq) * opts_.n_ctx + slot) * opts_.kv_dim;
    }
    void move_slot(int seq, int from, int to);
    // K, V and positions of slots [from, from + n) from src to dst (no commit).
    void copy_entries(int src, int dst, int from, int n);

    KvCacheOptions opts_;
    uint16_t* k_base() const { return static_cast<uint16_t*>(k_.data()); }
    uint16_t* v_base() const { return static_cast<uint16_t*>(v_.data()); }
    // (n_layer, n_seq, n_ctx, kv_dim) fp16, page-mapped: untouched slots cost no RAM.
    PageBuffer k_, v_;
    std::vector<int32_t> pos_;            // (n_seq, n_ctx)
    std::vector<int> committed_;          // (n_seq)
    RecurrentStates rec_;
};

}  // namespace specdec::kv
