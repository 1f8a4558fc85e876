// A decoder-only transformer (llama, qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3, smollm3, olmo2)
// over GGUF weights.
// forward() runs a ForwardBatch against a KvCache: it writes each row's keys
// and values into the speculative region of its sequence (slot = committed +
// rank of the row among its sequence's rows) and returns logits for the rows
// that asked. It never changes what is committed; the caller commits.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/config.h"
#include "model/delta_net.h"
#include "model/forward_batch.h"
#include "model/moe_ffn.h"
#include "model/weights.h"

namespace specdec {
class ThreadPool;
}
namespace specdec::io {
class GgufFile;
}

namespace specdec::model {

class Transformer {
public:
    // Keeps a reference to the file (weights are views into its mapping).
    // layer_limit > 0 runs only the first layer_limit layers, then the final norm
    // and the LM head: the model's own shallow copy, a draft that costs no extra
    // weight memory (layer-skipping self-speculation).
    explicit Transformer(const io::GgufFile& file, int layer_limit = 0);
    // Runs exactly `keep_layers` (ascending model layer indices; empty: all),
    // the residual stream passing from one kept layer straight to the next.
    Transformer(const io::GgufFile& file, const std::vector<int>& keep_layers);

    // Layers this instance runs (config().n_layer unless limited).
    int n_layers_run() const { return (int)layers_.size(); }
    // Model layer index of each layer run, ascending. Its KV cache holds these
    // layers only: cache layer i belongs to model layer layers_run()[i].
    const std::vector<int>& layers_run() const { return layers_; }

    const ModelConfig& config() const { return config_; }
    const ModelWeights& weights() const { return weights_; }  // e.g. for a vocabulary-subset LM head
    kv::KvCacheOptions kv_options(int n_ctx, int n_seq) const;

    // Throws specdec::Error on an invalid batch (bad token, sequence, parent)
    // or when a sequence's context would overflow.
    void forward(const ForwardBatch& batch, kv::KvCache& cache, ThreadPool& pool, ForwardResult& out);

private:
    struct RowPlan {
        int seq = 0;
        int slot = 0;                 // where this row's K/V go
        std::vector<int> spec_slots;  // visible speculative slots: ancestors and self
    };
    void place_states();
    void plan_rows(const ForwardBatch& batch, const kv::KvCache& cache);
    // il: model layer (weights, sliding window); cl: its layer in the cache.
    void attention_layer(int il, int cl, const ForwardBatch& batch, kv::KvCache& cache, ThreadPool& pool);
    // The attention block of layer il: self-attention, or (qwen35) the gated
    // DeltaNet; writes the block's output, before the residual, to o_.
    void mixing_block(int il, int cl, const float* block_in, const ForwardBatch& batch, kv::KvCache& cache,
                      ThreadPool& pool);
    // argmax_only LM head over the m normed rows in h_ (vocabulary slices).
    void lm_head_argmax(int m, ThreadPool& pool, ForwardResult& out);

    const io::GgufFile& file_;
    ModelConfig config_;
    ModelWeights weights_;
    std::vector<int> layers_;  // model layers run, ascending
    // Recurrent layers: where each one's part starts in a sequence's state
    // (indexed by model layer), and the floats of the whole state.
    std::vector<size_t> state_offset_;
    size_t state_floats_ = 0;

    // Scratch, sized per call (and shrunk when far larger than the call needs).
    // Shapes in rows n of the batch.
    std::vector<RowPlan> plan_;
    std::vector<float> x_;      // (n, n_embd) residual stream
    std::vector<float> h_;      // (n, n_embd) normed input
    std::vector<float> q_;      // (n, q_dim)
    std::vector<float> k_;      // (n, kv_dim)
    std::vector<float> v_;      // (n, v_dim)
    std::vector<float> att_;    // (n, q_dim)
    std::vector<float> o_;      // (n, n_embd)
    std::vector<float> gate_;   // (min(n, FFN block), n_ff)
    std::vector<float> up_;     // (min(n, FFN block), n_ff)
    MoeFfn moe_;                // MoE layers' FFN and its scratch
    DeltaNet delta_net_;        // recurrent layers and their scratch
    std::vector<RecurrentRow> rec_rows_;  // (n) recurrent layers: each row's sequence, rank and parent
    std::vector<float> q_gate_; // (n, 2 q_dim) attn_out_gate: query and gate per head, as projected
    std::vector<float> gate_q_; // (n, q_dim) attn_out_gate: the gates
    std::vector<float> scores_; // (n_workers, n_ctx)
    std::vector<float> slice_;  // argmax_only: (rows with logits, vocabulary slice)
};

}  // namespace specdec::model
