// The LM head restricted to a subset of the vocabulary (a draft with a
// vocabulary subset, spec/vocab_subset.h): the output-matrix rows of the
// subset ids are gathered once into a compact matrix, so a draft row's logits
// cost size()/n_vocab of the full head (the qwen 0.5B head is 151936 x 896,
// about a third of its weights). The rows go through the same final norm and
// the same matmul kernel as the full head, whose outputs do not depend on the
// other rows, so logit j equals the full head's logit of ids()[j] exactly.
//
// Use: run the forward with no logits requested and the last run layer
// captured (hidden_layer()), then logits() on the captured residual stream.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/matmul.h"
#include "model/transformer.h"

namespace specdec {
class ThreadPool;
}

namespace specdec::model {

class LmHeadSubset {
public:
    // ids: vocabulary ids of the model, strictly ascending (column j <-> ids[j]).
    LmHeadSubset(const Transformer& model, std::vector<int32_t> ids);

    int size() const { return (int)ids_.size(); }
    const std::vector<int32_t>& ids() const { return ids_; }
    size_t bytes() const { return (size_t)w_.n_out * w_.row_bytes; }

    // Layer whose output (the residual stream entering the final norm) the
    // forward must capture: the last layer the model runs.
    int hidden_layer() const { return hidden_layer_; }

    // out (rows.size(), size()) = head(final_norm(hidden[row])) for each row of
    // `hidden` (n rows of n_embd, as captured by the forward).
    void logits(const float* hidden, std::span<const int> rows, ThreadPool& pool, std::vector<float>& out);

    // A forward of `batch` whose logits come from this head: the model runs
    // with no full head and the last layer captured, then logits() fills `out`
    // for the rows that want them, so `out` reads as a full-head result with
    // size() columns (logit_rows, n_vocab set). `batch` is left as it came.
    void forward(Transformer& model, ForwardBatch& batch, kv::KvCache& cache, ThreadPool& pool,
                 ForwardResult& out);

private:
    struct FreeAligned {
        void operator()(uint8_t* p) const;
    };
    const Transformer& model_;
    std::vector<int32_t> ids_;
    std::unique_ptr<uint8_t, FreeAligned> data_;  // (size(), row_bytes), 64-byte aligned
    kernels::WeightMatrix w_;
    int hidden_layer_ = 0;
    std::vector<float> h_;  // (rows, n_embd) normed rows
    std::vector<int> want_rows_;  // forward(): rows asking for logits
};

}  // namespace specdec::model
