#include "sample/fast_select.h"

#include <cmath>
#include <limits>

namespace specdec::sample {

namespace {
// A small sorted list of the k best (value, id) pairs seen so far.
struct TopK {
    int k, n = 0;
    int32_t* ids;
    float vals[64];
    float worst = -std::numeric_limits<float>::infinity();  // admission bar once full

    TopK(int k_, int32_t* out) : k(k_ < 64 ? k_ : 64), ids(out) {}
    static bool better(float va, int32_t a, float vb, int32_t b) { return va > vb || (va == vb && a < b); }
    void offer(float v, int32_t id) {
        if (!(v > -std::numeric_limits<float>::infinity())) return;  // -inf, NaN
        if (n == k && !better(v, id, vals[n - 1], ids[n - 1])) return;
        int j = n < k ? n++ : n - 1;
        while (j > 0 && better(v, id, vals[j - 1], ids[j - 1])) {
            vals[j] = vals[j - 1];
            ids[j] = ids[j - 1];
            --j;
        }
        vals[j] = v;
        ids[j] = id;
        if (n == k) worst = vals[n - 1];
    }
};
}  // namespace

int top_k_select(const float* logits, int n, int k, int32_t* out) {
    if (k <= 0) return 0;
    TopK t(k, out);
    for (int32_t v = 0; v < n; ++v) {
        // Ids ascend, so an equal value never beats a kept one: strict > is the bar.
        if (logits[v] > t.worst || t.n < t.k) t.offer(logits[v], v);
    }
    return t.n;
}

int top_k_select_ids(const float* logits, std::span<const int32_t> ids, int k, int32_t* out) {
    if (k <= 0) return 0;
    TopK t(k, out);
    for (int32_t v : ids)
        if (logits[v] >= t.worst || t.n < t.k) t.offer(logits[v], v);
    return t.n;
}

double log_sum_exp(const float* logits, int n, float mx, float inv_t, float cut) {
    const float bar = mx - cut / inv_t;
    double sum = 0;
    for (int v = 0; v < n; ++v)
        if (logits[v] > bar) sum += std::exp((double)(logits[v] - mx) * inv_t);
    return std::log(sum);
}

double log_sum_exp_ids(const float* logits, std::span<const int32_t> ids, float mx, float inv_t, float cut) {
    const float bar = mx - cut / inv_t;
    double sum = 0;
    for (int32_t v : ids)
        if (logits[v] > bar) sum += std::exp((double)(logits[v] - mx) * inv_t);
    return std::log(sum);
}

}  // namespace specdec::sample
