// Reads a run of tokens into one sequence of the KV cache, in chunks of at most
// `chunk` rows per forward, and commits them. Every decoding method prefills
// through this one function so that their first tokens match bit for bit.
#pragma once

#include <cstdint>
#include <span>

#include "kv/kv_cache.h"
#include "model/forward_batch.h"
#include "model/transformer.h"

namespace specdec::model {

// Returns the logits of the last token (in `result`, n_vocab floats). Throws
// specdec::Error when the tokens do not fit the sequence's remaining context.
const float* prefill_chunked(Transformer& model, kv::KvCache& cache, ThreadPool& pool, int seq,
                             std::span<const int32_t> tokens, int chunk, ForwardBatch& batch, ForwardResult& result);

}  // namespace specdec::model
