// How the next token is chosen from the target's logits. The same processed
// distribution is used by plain decoding and by every speculative verifier,
// which is what makes speculation lossless with respect to these settings.
// Processors run in llama.cpp's default order: repetition penalty, top-k,
// top-p, min-p, temperature.
#pragma once

#include <cstdint>

namespace specdec {

struct SamplingParams {
    float temperature = 0.0f;     // 0: greedy (argmax after the penalty)
    int top_k = 0;                // 0: off
    float top_p = 1.0f;           // 1: off
    float min_p = 0.0f;           // 0: off
    float repeat_penalty = 1.0f;  // 1: off
    int repeat_last_n = 64;       // tokens of history the penalty looks at
    uint64_t seed = 0;            // sampled runs: the same seed and method give the same text

    bool greedy() const { return temperature <= 0.0f; }
};

}  // namespace specdec
