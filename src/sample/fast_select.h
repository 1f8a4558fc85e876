// Selection helpers for hot paths that only need a few candidates out of a
// large vocabulary (draft proposals, rank scores): partial selection instead
// of a full-vocabulary distribution and sort. They never change what
// sample::distribution computes; they are for callers that need less.
#pragma once

#include <cstdint>
#include <span>

namespace specdec::sample {

// The k best ids of logits[0, n), best first, into out (room for k); returns
// how many were found (<= k). Order: larger logit first, ties to the lower id
// (the argmax rule). -inf and NaN are never selected.
int top_k_select(const float* logits, int n, int k, int32_t* out);

// The same over the given ids only (any order; each id < the logits' width).
int top_k_select_ids(const float* logits, std::span<const int32_t> ids, int k, int32_t* out);

// log sum_v exp((logits[v] - mx) * inv_t) over v in [0, n), for mx the
// maximum of the row. Terms below exp(-cut) are skipped (they change the sum
// by at most n * exp(-cut) relative); meant for ranking scores, not sampling.
double log_sum_exp(const float* logits, int n, float mx, float inv_t, float cut = 20.0f);
double log_sum_exp_ids(const float* logits, std::span<const int32_t> ids, float mx, float inv_t,
                       float cut = 20.0f);

}  // namespace specdec::sample
