#include "model/delta_net.h"

#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace specdec::model {

namespace {

// Dot product with 8 running partial sums in a fixed order: the compiler can
// keep the lanes in vector registers without reassociating anything, and the
// result is the same on every machine and for every batch.
float dot8(const float* a, const float* b, int n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// log(1 + e^x), linear where e^x would dominate (as ggml's softplus).
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x / |x| (ggml's rms_norm with eps / n, then 1 / sqrt(n)), in place.
void l2_normalize(float* x, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += (double)x[i] * x[i];
    const float scale = 1.0f / std::sqrt((float)(sum / n) + eps / n) / std::sqrt((float)n);
    for (int i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace

void DeltaNet::forward(const LayerWeights& L, const ModelConfig& c, const float* h,
                       const std::vector<RecurrentRow>& rows, size_t state_offset, kv::RecurrentStates& states,
                       float* out, ThreadPool& pool) {
    const int n = (int)rows.size();
    const int conv = c.ssm_conv_dim(), key = c.ssm_key_dim(), value = c.ssm_value_dim();
    const int nv = c.ssm_n_v_heads, nk = c.ssm_n_k_heads, ds = c.ssm_d_state, dc = c.ssm_d_conv;
    const size_t window = (size_t)(dc - 1) * conv;  // floats of the convolution window
    x_.resize((size_t)n * conv);
    z_.resize((size_t)n * value);
    beta_.resize((size_t)n * nv);
    decay_.resize((size_t)n * nv);
    y_.resize((size_t)n * value);
    {
        const kernels::WeightMatrix* ws[] = {&L.ssm_in, &L.ssm_z, &L.ssm_beta, &L.ssm_alpha};
        float* ys[] = {x_.data(), z_.data(), beta_.data(), decay_.data()};
        kernels::matmul_group(ws, ys, 4, h, n, pool);
    }

    // Rows in batch order (a parent comes before its children): where each
    // row's state comes from and goes, and the convolution, which is cheap
    // (d_conv multiply-adds per channel) next to the matrices below.
    dst_.resize(n);
    src_.resize(n);
    for (int i = 0; i < n; ++i) {
        const RecurrentRow& r = rows[i];
        src_[i] = states.parent_state(r.seq, r.rank) + state_offset;
        dst_[i] = states.row_state(r.seq, r.rank) + state_offset;
        const float* win = src_[i];  // (dc - 1, conv), oldest row first
        float* xi = x_.data() + (size_t)i * conv;
        float* new_win = dst_[i];
        for (int ch = 0; ch < conv; ++ch) {
            const float* w = L.ssm_conv + (size_t)ch * dc;
            float s = 0.0f;
            for (int j = 0; j < dc - 1; ++j) s += win[(size_t)j * conv + ch] * w[j];
            s += xi[ch] * w[dc - 1];
            // Shift the window (in place when the row overwrites its parent's
            // state: a long chain's shared tail state); ascending j reads j + 1
            // before writing it.
            for (int j = 0; j + 1 < dc - 1; ++j) new_win[(size_t)j * conv + ch] = win[(size_t)(j + 1) * conv + ch];
            new_win[(size_t)(dc - 2) * conv + ch] = xi[ch];
            xi[ch] = silu(s);
        }
        for (int hk = 0; hk < nk; ++hk) {
            l2_normalize(xi + (size_t)hk * ds, ds, c.norm_eps);
            l2_normalize(xi + key + (size_t)hk * ds, ds, c.norm_eps);
        }
        float* bi = beta_.data() + (size_t)i * nv;
        float* gi = decay_.data() + (size_t)i * nv;
        for (int hv = 0; hv < nv; ++hv) {
            bi[hv] = sigmoid(bi[hv]);
            gi[hv] = std::exp(softplus(gi[hv] + L.ssm_dt_bias[hv]) * L.ssm_a[hv]);
        }
    }

    // The delta rule, one value head per work item: a head's matrices depend
    // on the same head's parent rows only, which this item has just computed.
    const float scale = 1.0f / std::sqrt((float)ds);
    pool.parallel_for(nv, 1, [&](int64_t h0, int64_t h1, int) {
        for (int64_t hv = h0; hv < h1; ++hv) {
            const int hk = (int)(hv % nk);
            for (int i = 0; i < n; ++i) {
                const float* xi = x_.data() + (size_t)i * conv;
                const float* q = xi + (size_t)hk * ds;
                const float* k = xi + key + (size_t)hk * ds;
                const float* v = xi + 2 * key + (size_t)hv * ds;
                const float beta = beta_[(size_t)i * nv + hv];
                const float decay = decay_[(size_t)i * nv + hv];
                const float* s_in = src_[i] + window + (size_t)hv * ds * ds;
                float* s_out = dst_[i] + window + (size_t)hv * ds * ds;
                float* o = y_.data() + (size_t)i * value + (size_t)hv * ds;
                for (int j = 0; j < ds; ++j) {
                    const float* a = s_in + (size_t)j * ds;
                    float* sj = s_out + (size_t)j * ds;
                    for (int e = 0; e < ds; ++e) sj[e] = a[e] * decay;
                    const float d = (v[j] - dot8(sj, k, ds)) * beta;
                    for (int e = 0; e < ds; ++e) sj[e] += d * k[e];
                    o[j] = dot8(sj, q, ds) * scale;
                }
                // Gated RMS norm of the head's output.
                kernels::rmsnorm(o, L.ssm_norm, o, ds, c.norm_eps);
                const float* z = z_.data() + (size_t)i * value + (size_t)hv * ds;
                for (int e = 0; e < ds; ++e) o[e] *= silu(z[e]);
            }
        }
    });
    kernels::matmul(L.ssm_out, y_.data(), n, out, pool);
}

}  // namespace specdec::model
