// One gated DeltaNet layer (Qwen3.5's linear attention), for a batch of rows
// that continue one another as ForwardBatch says (chains and trees).
//
// Per row, from the normed input h:
//   x = ssm_in h (q, k, v of every head, side by side), z = ssm_z h,
//   beta = sigmoid(ssm_beta h), decay = exp(softplus(ssm_alpha h + dt_bias) * a)
//   x' = SiLU(causal depthwise convolution of x over the last d_conv rows)
//   q, k: L2-normalised per head; value head h reads q/k head h mod n_k_heads
//   per value head, with S (d_state x d_state, row j for value element j):
//     S = decay * S_parent;  S[j] += beta (v[j] - S[j].k) k;  o[j] = S[j].q / sqrt(d_state)
//   y = rmsnorm(o) * ssm_norm * SiLU(z), per head;  out = ssm_out y
// The convolution window and S are the row's recurrent state, written where
// kv::RecurrentStates placed the row; its parent's state (the committed one for
// a row that starts from the prefix) is only read, unless both share the
// tail state of a chain, which is then updated in place. A row's
// result depends on its ancestors alone, never on the rest of its batch.
#pragma once

#include <cstddef>
#include <vector>

#include "kv/recurrent_states.h"
#include "model/config.h"
#include "model/weights.h"

namespace specdec {
class ThreadPool;
}

namespace specdec::model {

struct RecurrentRow {
    int seq = 0;
    int rank = 0;  // among its sequence's rows in the batch (RecurrentStates places its state)
};

class DeltaNet {
public:
    // h (n, n_embd) normed input; out (n, n_embd) the layer's output before the
    // residual. state_offset: where this layer's part starts in a sequence's
    // state (ModelConfig::ssm_state_floats() floats).
    void forward(const LayerWeights& L, const ModelConfig& c, const float* h, const std::vector<RecurrentRow>& rows,
                 size_t state_offset, kv::RecurrentStates& states, float* out, ThreadPool& pool);

private:
    std::vector<float> x_;      // (n, conv_dim) projections, then the convolved and normalised q, k, v
    std::vector<float> z_;      // (n, value_dim)
    std::vector<float> beta_;   // (n, n_v_heads) logits, then sigmoid
    std::vector<float> decay_;  // (n, n_v_heads) alpha logits, then the decay factor
    std::vector<float> y_;      // (n, value_dim)
    std::vector<float*> dst_;              // (n) each row's state
    std::vector<const float*> src_;        // (n) its parent's
};

}  // namespace specdec::model
