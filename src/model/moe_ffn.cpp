#include "model/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace specdec::model {

void MoeFfn::forward(const LayerWeights& L, const ModelConfig& c, const float* x, int n, float* out,
                     ThreadPool& pool) {
    const int E = c.n_embd, X = c.n_expert, K = c.n_expert_used, F = c.n_ff_exp;

    // Routing, row by row.
    probs_.resize((size_t)n * X);
    chosen_.resize((size_t)n * K);
    weight_.resize((size_t)n * K);
    kernels::matmul(L.router, x, n, probs_.data(), pool);
    std::vector<int> idx(X);
    for (int i = 0; i < n; ++i) {
        float* p = probs_.data() + (size_t)i * X;
        kernels::softmax_ggml(p, X);
        std::iota(idx.begin(), idx.end(), 0);
        // ggml_argsort_top_k: a full descending sort, the first k kept.
        std::sort(idx.begin(), idx.end(), [p](int a, int b) { return p[a] > p[b]; });
        int* ch = chosen_.data() + (size_t)i * K;
        float* w = weight_.data() + (size_t)i * K;
        double sum = 0.0;  // ggml_sum_rows: a double accumulator, rounded once
        for (int j = 0; j < K; ++j) {
            ch[j] = idx[j];
            w[j] = p[idx[j]];
            sum += (double)w[j];
        }
        // Clamped to the smallest normal f16 against a division by zero, as llama.cpp does.
        const float s = std::max((float)sum, 6.103515625e-5f);
        for (int j = 0; j < K; ++j) w[j] /= s;
    }

    // Group the (row, rank) pairs by expert, rows ascending within an expert.
    start_.assign(X + 1, 0);
    for (int t = 0; t < n * K; ++t) ++start_[chosen_[t] + 1];
    for (int e = 0; e < X; ++e) start_[e + 1] += start_[e];
    order_.resize((size_t)n * K);
    {
        std::vector<int> fill(start_.begin(), start_.end() - 1);
        for (int t = 0; t < n * K; ++t) order_[fill[chosen_[t]]++] = t;
    }

    // Each selected expert over the rows that chose it.
    y_.resize((size_t)n * K * E);
    for (int e = 0; e < X; ++e) {
        const int m = start_[e + 1] - start_[e];
        if (m == 0) continue;  // no row chose it: its weights are not touched
        const int* pairs = order_.data() + start_[e];
        xg_.resize((size_t)m * E);
        gate_.resize((size_t)m * F);
        up_.resize((size_t)m * F);
        yg_.resize((size_t)m * E);
        for (int r = 0; r < m; ++r)
            std::memcpy(xg_.data() + (size_t)r * E, x + (size_t)(pairs[r] / K) * E, sizeof(float) * E);
        const kernels::WeightMatrix gate = L.gate_exps.expert(e), up = L.up_exps.expert(e);
        const kernels::WeightMatrix down = L.down_exps.expert(e);
        const kernels::WeightMatrix* ws[] = {&gate, &up};
        float* ys[] = {gate_.data(), up_.data()};
        kernels::matmul_group(ws, ys, 2, xg_.data(), m, pool);
        for (int r = 0; r < m; ++r)
            kernels::silu_mul(gate_.data() + (size_t)r * F, up_.data() + (size_t)r * F, gate_.data() + (size_t)r * F, F);
        kernels::matmul(down, gate_.data(), m, yg_.data(), pool);
        for (int r = 0; r < m; ++r)
            std::memcpy(y_.data() + (size_t)pairs[r] * E, yg_.data() + (size_t)r * E, sizeof(float) * E);
    }

    // out = sum over ranks of weight * expert output: ggml_mul, then the adds
    // of the rank views left to right.
    for (int i = 0; i < n; ++i) {
        float* o = out + (size_t)i * E;
        const float* w = weight_.data() + (size_t)i * K;
        const float* y = y_.data() + (size_t)i * K * E;
        for (int d = 0; d < E; ++d) o[d] = y[d] * w[0];
        for (int j = 1; j < K; ++j)
            for (int d = 0; d < E; ++d) o[d] += y[(size_t)j * E + d] * w[j];
    }
    if (L.shexp_gate.data) shared_expert(L, c, x, n, out, pool);
}

void MoeFfn::shared_expert(const LayerWeights& L, const ModelConfig& c, const float* x, int n, float* out,
                           ThreadPool& pool) {
    // qwen35moe: out += down(silu(gate x) * up x) * sigmoid(shexp_gate . x),
    // the product first, then the add (ggml_mul, then ggml_add).
    const int E = c.n_embd, F = c.n_ff_shexp;
    gate_.resize((size_t)n * F);
    up_.resize((size_t)n * F);
    yg_.resize((size_t)n * E);
    probs_.resize(n);  // routing is done: its scratch holds the gate logits
    const kernels::WeightMatrix* ws[] = {&L.w_gate_shexp, &L.w_up_shexp, &L.shexp_gate};
    float* ys[] = {gate_.data(), up_.data(), probs_.data()};
    kernels::matmul_group(ws, ys, 3, x, n, pool);
    for (int i = 0; i < n; ++i)
        kernels::silu_mul(gate_.data() + (size_t)i * F, up_.data() + (size_t)i * F, gate_.data() + (size_t)i * F, F);
    kernels::matmul(L.w_down_shexp, gate_.data(), n, yg_.data(), pool);
    for (int i = 0; i < n; ++i) {
        const float g = 1.0f / (1.0f + std::exp(-probs_[i]));
        float* o = out + (size_t)i * E;
        const float* y = yg_.data() + (size_t)i * E;
        for (int d = 0; d < E; ++d) o[d] += y[d] * g;
    }
}

}  // namespace specdec::model
