// Reads a run of tokens into one sequence of the KV cache, in chunks of at most
// `chunk` rows per forward, and commits them. Every decoding method prefills
// through this one function so that their first tokens match bit for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "kv/kv_cache.h"
#include "model/forward_batch.h"
#include "model/transformer.h"

namespace specdec::model {

// Called after each chunk's forward (and commit) with the position of its
// first token, its row count and the forward's result (batch.capture_layers
// decides what `hidden` holds): how a proposer reads target features of the
// prompt from the prefill itself.
using PrefillChunkFn = std::function<void(int pos0, int n, const ForwardResult& result)>;

// Returns the logits of the last token (in `result`, n_vocab floats). Throws
// specdec::Error when the tokens do not fit the sequence's remaining context.
const float* prefill_chunked(Transformer& model, kv::KvCache& cache, ThreadPool& pool, int seq,
                             std::span<const int32_t> tokens, int chunk, ForwardBatch& batch, ForwardResult& result,
                             const PrefillChunkFn& on_chunk = {});

}  // namespace specdec::model
