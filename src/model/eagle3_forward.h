// The EAGLE-3 head's forward on the engine's kernels (matmul, rmsnorm, RoPE,
// attention over an fp16 KvCache of one layer).
//
// Per row (a token at a position, with a hidden input g of width H):
//   x   = concat(input_norm(embed(token)), hidden_norm(g))          (2H)
//   att = attention(rope(x Wq), rope(x Wk), x Wv) over the head's cache
//   h   = att Wo + (norm_before_residual ? hidden_norm(g) : g)
//   out = h + down(silu(gate(post_norm(h))) * up(post_norm(h)))     "prenorm"
//   logits = lm_head(norm(out))                        (draft vocabulary)
// g is fc(features) for a row backed by the target's three feature rows,
// or the parent row's prenorm output for a row the head drafted itself.
//
// Rows and slots: a row writes its K/V at slot committed(seq) + slots[i] and
// sees the committed prefix plus the speculative slots listed for it (its
// ancestors and itself, consecutive positions ending at its own). Unlike
// the target's forward, listed slots may have been written by an earlier
// forward of the same draft (a tree level reads the levels before it); the
// caller keeps them apart and commits only rows backed by real features.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_cache.h"
#include "model/eagle3_head.h"

namespace specdec {
class ThreadPool;
}

namespace specdec::model {

struct Eagle3Batch {
    std::vector<int32_t> tokens;      // (n) target ids, embedded with the target's table
    std::vector<int32_t> positions;   // (n) RoPE position
    std::vector<int32_t> seq_ids;     // (n)
    std::vector<int32_t> slots;       // (n) K/V slot past the sequence's committed length
    std::vector<int32_t> vis_begin;   // (n + 1) row i sees vis[vis_begin[i] .. vis_begin[i + 1])
    std::vector<int32_t> vis;         // speculative slots (past committed), ascending position, own last
    std::vector<uint8_t> want_logits; // (n)
    std::vector<float> g;             // (n, H) hidden input

    int size() const { return (int)tokens.size(); }
    void clear();
    // Appends a row seeing `ancestors` (speculative slots, oldest first) and
    // itself; g_row: H floats. Returns the row index.
    int add(int32_t token, int32_t pos, int32_t seq, int32_t slot, std::span<const int32_t> ancestors, bool logits,
            const float* g_row, int H);
};

struct Eagle3Output {
    std::vector<float> prenorm;     // (n, H) the layer's output before `norm`
    std::vector<int> logit_rows;    // batch rows that have logits, ascending
    std::vector<float> logits;      // (logit_rows.size(), draft_vocab)
};

class Eagle3Forward {
public:
    // tok_embd: the target's embedding table (n_vocab rows of H).
    Eagle3Forward(const Eagle3Head& head, const kernels::WeightMatrix& tok_embd);

    const Eagle3Head& head() const { return head_; }
    kv::KvCacheOptions kv_options(int n_ctx, int n_seq) const;
    // g (n, H) = fc(features (n, 3 * target_hidden)).
    void fuse(const float* features, int n, float* g, ThreadPool& pool);
    // Throws specdec::Error on an invalid batch or a full context.
    void forward(const Eagle3Batch& b, kv::KvCache& cache, ThreadPool& pool, Eagle3Output& out);

private:
    const Eagle3Head& head_;
    kernels::WeightMatrix tok_embd_;
    // Scratch, (n, width) per call.
    std::vector<float> x_;     // (n, 2H) normed [embedding; g]
    std::vector<float> q_, k_, v_, att_;
    std::vector<float> h_;     // (n, H) residual stream
    std::vector<float> hn_;    // (n, H) normed
    std::vector<float> gate_, up_;  // (n, n_ff)
    std::vector<float> scores_;     // (workers, n_q * n_ctx)
};

}  // namespace specdec::model
