#include "model/lm_head_subset.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "core/error.h"
#include "kernels/ops.h"

namespace specdec::model {

void LmHeadSubset::FreeAligned::operator()(uint8_t* p) const { ::operator delete(p, std::align_val_t(64)); }

LmHeadSubset::LmHeadSubset(const Transformer& model, std::vector<int32_t> ids) : model_(model), ids_(std::move(ids)) {
    const ModelConfig& c = model.config();
    const kernels::WeightMatrix& full = model.weights().output;
    SPECDEC_CHECK(!ids_.empty(), "LM head subset: no ids");
    SPECDEC_CHECK(full.n_out == c.n_vocab && full.n_in == c.n_embd, "LM head subset: unexpected output matrix shape");
    for (size_t j = 0; j < ids_.size(); ++j) {
        SPECDEC_CHECK(ids_[j] >= 0 && ids_[j] < c.n_vocab, "LM head subset: id ", ids_[j], " outside the vocabulary (",
                      c.n_vocab, ")");
        SPECDEC_CHECK(j == 0 || ids_[j] > ids_[j - 1], "LM head subset: ids must be strictly ascending");
    }
    // The forward's capture ids are the layers it runs: a layer-limited model
    // runs layers [0, n), so its last is n - 1.
    hidden_layer_ = model.n_layers_run() - 1;
    const size_t bytes = ids_.size() * full.row_bytes;
    data_.reset(static_cast<uint8_t*>(::operator new(bytes, std::align_val_t(64))));
    const auto* src = static_cast<const uint8_t*>(full.data);
    for (size_t j = 0; j < ids_.size(); ++j)
        std::memcpy(data_.get() + j * full.row_bytes, src + (size_t)ids_[j] * full.row_bytes, full.row_bytes);
    w_ = full;
    w_.data = data_.get();
    w_.n_out = (int64_t)ids_.size();
}

void LmHeadSubset::logits(const float* hidden, std::span<const int> rows, ThreadPool& pool, std::vector<float>& out) {
    const ModelConfig& c = model_.config();
    const int E = c.n_embd;
    const int m = (int)rows.size();
    out.resize((size_t)m * ids_.size());
    if (m == 0) return;
    h_.resize((size_t)m * E);
    // Exactly what Transformer::forward does for its logit rows, with the compact matrix.
    for (int k = 0; k < m; ++k)
        kernels::rmsnorm(hidden + (size_t)rows[k] * E, model_.weights().output_norm, h_.data() + (size_t)k * E, E,
                         c.norm_eps);
    kernels::matmul(w_, h_.data(), m, out.data(), pool);
    if (c.final_softcap > 0.0f) kernels::softcap_inplace(out.data(), c.final_softcap, (int64_t)out.size());
}

void LmHeadSubset::forward(Transformer& model, ForwardBatch& batch, kv::KvCache& cache, ThreadPool& pool,
                           ForwardResult& out) {
    want_rows_.clear();
    for (int i = 0; i < batch.size(); ++i)
        if (batch.want_logits[i]) want_rows_.push_back(i);
    std::fill(batch.want_logits.begin(), batch.want_logits.end(), 0);
    batch.capture_layers.clear();
    if (!want_rows_.empty()) batch.capture_layers.push_back(hidden_layer_);
    model.forward(batch, cache, pool, out);
    if (!want_rows_.empty()) logits(out.hidden[0].data(), want_rows_, pool, out.logits);
    for (int i : want_rows_) batch.want_logits[i] = 1;
    batch.capture_layers.clear();
    out.logit_rows = want_rows_;
    out.n_vocab = size();
}

}  // namespace specdec::model
