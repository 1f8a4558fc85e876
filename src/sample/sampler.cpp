#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_set>

#include "core/error.h"

namespace specdec::sample {

void validate(const SamplingParams& p) {
    SPECDEC_CHECK(std::isfinite(p.temperature) && p.temperature >= 0.0f, "temperature must be >= 0, got ",
                  p.temperature);
    SPECDEC_CHECK(p.top_k >= 0, "top-k must be >= 0, got ", p.top_k);
    SPECDEC_CHECK(p.top_p > 0.0f && p.top_p <= 1.0f, "top-p must be in (0, 1], got ", p.top_p);
    SPECDEC_CHECK(p.min_p >= 0.0f && p.min_p <= 1.0f, "min-p must be in [0, 1], got ", p.min_p);
    SPECDEC_CHECK(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0.0f, "repeat penalty must be > 0, got ",
                  p.repeat_penalty);
    SPECDEC_CHECK(p.repeat_last_n >= 0, "repeat-last-n must be >= 0");
}

void apply_repetition_penalty(float* logits, int n_vocab, std::span<const int32_t> history,
                              const SamplingParams& p) {
    if (p.repeat_penalty == 1.0f || p.repeat_last_n == 0 || history.empty()) return;
    const size_t n = std::min(history.size(), (size_t)p.repeat_last_n);
    std::unordered_set<int32_t> seen;
    for (size_t i = history.size() - n; i < history.size(); ++i) {
        const int32_t t = history[i];
        if (t < 0 || t >= n_vocab || !seen.insert(t).second) continue;
        logits[t] = logits[t] > 0 ? logits[t] / p.repeat_penalty : logits[t] * p.repeat_penalty;
    }
}

int32_t argmax(const float* logits, int n_vocab) {
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; ++i)
        if (logits[i] > logits[best]) best = i;
    return best;
}

void distribution(const float* logits_in, int n_vocab, std::span<const int32_t> history, const SamplingParams& p,
                  std::vector<float>& probs) {
    probs.assign(logits_in, logits_in + n_vocab);
    apply_repetition_penalty(probs.data(), n_vocab, history, p);
    if (p.greedy()) {
        const int32_t best = argmax(probs.data(), n_vocab);
        std::fill(probs.begin(), probs.end(), 0.0f);
        probs[best] = 1.0f;
        return;
    }
    // Candidates sorted by logit (descending, ties by id) when a truncation needs an order.
    std::vector<int32_t> idx(n_vocab);
    std::iota(idx.begin(), idx.end(), 0);
    size_t keep = (size_t)n_vocab;
    const bool need_sort = p.top_k > 0 || p.top_p < 1.0f || p.min_p > 0.0f;
    auto by_logit = [&](int32_t a, int32_t b) { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); };
    if (need_sort) {
        if (p.top_k > 0 && p.top_k < n_vocab) {
            keep = (size_t)p.top_k;
            std::partial_sort(idx.begin(), idx.begin() + keep, idx.end(), by_logit);
        } else {
            std::sort(idx.begin(), idx.end(), by_logit);
        }
        const float mx = probs[idx[0]];
        if (p.top_p < 1.0f) {
            // Softmax over the kept candidates (no temperature, as llama.cpp), cut at top_p mass.
            double sum = 0;
            for (size_t j = 0; j < keep; ++j) sum += std::exp((double)probs[idx[j]] - mx);
            double cum = 0;
            for (size_t j = 0; j < keep; ++j) {
                cum += std::exp((double)probs[idx[j]] - mx) / sum;
                if (cum >= p.top_p) {
                    keep = j + 1;
                    break;
                }
            }
        }
        if (p.min_p > 0.0f) {
            const double thresh = mx + std::log((double)p.min_p);
            size_t j = 1;
            while (j < keep && probs[idx[j]] >= thresh) ++j;
            keep = j;
        }
    }
    // Temperature and softmax over the kept set; everything else gets 0.
    std::vector<float> kept(keep);
    float mx = -std::numeric_limits<float>::infinity();
    for (size_t j = 0; j < keep; ++j) mx = std::max(mx, probs[idx[j]]);
    double sum = 0;
    for (size_t j = 0; j < keep; ++j) {
        kept[j] = (float)std::exp(((double)probs[idx[j]] - mx) / p.temperature);
        sum += kept[j];
    }
    std::fill(probs.begin(), probs.end(), 0.0f);
    for (size_t j = 0; j < keep; ++j) probs[idx[j]] = (float)(kept[j] / sum);
}

int32_t sample_from(std::span<const float> probs, Rng& rng) {
    const double u = rng.uniform();
    double cum = 0;
    int32_t last_nonzero = 0;
    for (size_t i = 0; i < probs.size(); ++i) {
        if (probs[i] <= 0) continue;
        cum += probs[i];
        last_nonzero = (int32_t)i;
        if (u < cum) return (int32_t)i;
    }
    return last_nonzero;  // rounding left u above the total: take the last candidate
}

int32_t sample_token(const float* logits, int n_vocab, std::span<const int32_t> history, const SamplingParams& p,
                     Rng& rng, std::vector<float>& scratch) {
    if (p.greedy()) {
        if (p.repeat_penalty == 1.0f) return argmax(logits, n_vocab);
        scratch.assign(logits, logits + n_vocab);
        apply_repetition_penalty(scratch.data(), n_vocab, history, p);
        return argmax(scratch.data(), n_vocab);
    }
    distribution(logits, n_vocab, history, p, scratch);
    return sample_from(scratch, rng);
}

}  // namespace specdec::sample
