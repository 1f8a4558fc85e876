// Logits processors and seeded sampling. The same processed distribution is
// used by plain decoding and by every speculative verifier, which is what makes
// speculation lossless with respect to these settings.
//
// Processor order follows llama.cpp's default chain: repetition penalty,
// top-k, top-p, min-p, temperature.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/rng.h"
#include "specdec/sampling.h"

namespace specdec::sample {

// The public settings (specdec/sampling.h) are the sampler's own.
using SamplingParams = specdec::SamplingParams;

// Checks ranges; throws specdec::Error with the offending option.
void validate(const SamplingParams& p);

// Applies the repetition penalty in place (llama.cpp's rule: divide positive
// logits, multiply negative ones, once per distinct token in the window).
void apply_repetition_penalty(float* logits, int n_vocab, std::span<const int32_t> history,
                              const SamplingParams& p);

// Greedy choice: argmax after the penalty; ties go to the lowest id.
int32_t argmax(const float* logits, int n_vocab);

// Full-vocabulary distribution after all processors: probs (n_vocab) sums to 1,
// zero outside the kept set. For greedy params it is a point mass on the argmax.
void distribution(const float* logits, int n_vocab, std::span<const int32_t> history, const SamplingParams& p,
                  std::vector<float>& probs);

// Draws an index from a distribution (sums to ~1) with one uniform.
int32_t sample_from(std::span<const float> probs, Rng& rng);

// Convenience for plain decoding: process and draw one token.
int32_t sample_token(const float* logits, int n_vocab, std::span<const int32_t> history,
                     const SamplingParams& p, Rng& rng, std::vector<float>& scratch);

}  // namespace specdec::sample
