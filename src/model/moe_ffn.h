// The mixture-of-experts FFN of one layer (qwen3moe, qwen35moe), as llama.cpp's
// build_moe_ffn computes it for that architecture: router logits
// (ffn_gate_inp), softmax over the experts, the n_expert_used most probable
// (ggml's descending argsort), their probabilities renormalised to sum 1, and
// the output sum over those experts of weight * down(silu(gate(x)) * up(x)),
// added in rank order; qwen35moe adds a shared expert that every row runs,
// scaled by a sigmoid gate of its own.
//
// Each row is routed on its own, and an expert's matrices are read only when
// some row of the batch selected it: the rows that chose an expert are
// gathered and run through its three matrices together. A row's result does
// not depend on the rows it is batched with (matmul's output for a row does
// not depend on the other rows, and the sum over a row's experts is in its own
// rank order), so a verification batch sees what plain decoding sees.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/weights.h"

namespace specdec {
class ThreadPool;
}

namespace specdec::model {

class MoeFfn {
public:
    // x: (n, n_embd) the normed FFN input; out: (n, n_embd). Not aliased.
    void forward(const LayerWeights& L, const ModelConfig& c, const float* x, int n, float* out, ThreadPool& pool);

private:
    void shared_expert(const LayerWeights& L, const ModelConfig& c, const float* x, int n, float* out, ThreadPool& pool);
    // Scratch, shapes in rows n of the call, k = n_expert_used.
    std::vector<float> probs_;     // (n, n_expert) router probabilities
    std::vector<int> chosen_;      // (n, k) expert ids, most probable first
    std::vector<float> weight_;    // (n, k) their renormalised weights
    std::vector<int> order_;       // (n * k) (row, rank) pairs grouped by expert
    std::vector<int> start_;       // (n_expert + 1) each expert's range in order_
    std::vector<float> xg_;        // (rows of one expert, n_embd) gathered inputs
    std::vector<float> gate_, up_; // (rows of one expert, n_ff_exp)
    std::vector<float> yg_;        // (rows of one expert, n_embd)
    std::vector<float> y_;         // (n, k, n_embd) each row's expert outputs by rank
};

}  // namespace specdec::model
