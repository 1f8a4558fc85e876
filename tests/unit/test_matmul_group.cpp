// matmul_group (Q/K/V, gate/up in one dispatch) against matmul on each matrix:
// bit for bit, with mixed weight types (one shared activation per type, as
// Q4_K/Q6_K layers of a Q4_K_M model have), odd row counts so pool chunks
// straddle matrices, 1 and many tokens, 1 and 2 threads; and bad groups are
// errors.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "quant_test_support.h"

using namespace specdec;
using namespace specdec::kernels;
using specdec::testing::quantize_weights;

TEST(MatmulGroup, BitIdenticalToSeparateMatmuls) {
    std::mt19937 rng(77);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    ThreadPool pool1(1), pool2(2);
    const int64_t n_in = 512;
    const TensorType types[] = {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q4_K, TensorType::Q8_0};
    const int64_t n_outs[] = {48, 17, 33, 40};
    std::vector<std::vector<uint8_t>> data;
    std::vector<WeightMatrix> w;
    for (int i = 0; i < 4; ++i) {
        std::vector<float> wf((size_t)(n_outs[i] * n_in));
        for (auto& v : wf) v = nd(rng);
        data.push_back(quantize_weights(types[i], wf.data(), n_outs[i], n_in));
    }
    for (int i = 0; i < 4; ++i)
        w.push_back(WeightMatrix{types[i], data[i].data(), n_in, n_outs[i], tensor_row_bytes(types[i], n_in)});
    for (int64_t n_tok : {1, 3, 4, 9}) {
        std::vector<float> x((size_t)(n_tok * n_in));
        for (auto& v : x) v = nd(rng);
        for (int count : {1, 2, 3, 4}) {
            for (ThreadPool* pool : {&pool1, &pool2}) {
                const WeightMatrix* ws[4];
                std::vector<std::vector<float>> y(4), want(4);
                float* ys[4];
                for (int i = 0; i < count; ++i) {
                    ws[i] = &w[(size_t)i];
                    y[(size_t)i].assign((size_t)(n_tok * n_outs[i]), -7.0f);
                    want[(size_t)i].resize(y[(size_t)i].size());
                    ys[i] = y[(size_t)i].data();
                    matmul(w[(size_t)i], x.data(), n_tok, want[(size_t)i].data(), *pool);
                }
                matmul_group(ws, ys, count, x.data(), n_tok, *pool);
                for (int i = 0; i < count; ++i)
                    ASSERT_EQ(std::memcmp(y[(size_t)i].data(), want[(size_t)i].data(), y[(size_t)i].size() * 4), 0)
                        << "matrix " << i << " of " << count << " n_tok " << n_tok << " threads " << pool->size();
            }
        }
    }
}

TEST(MatmulGroup, RejectsMismatchedInputsAndCounts) {
    ThreadPool pool(1);
    std::vector<float> wa(64 * 4, 0.5f), wb(32 * 4, 0.5f), x(64, 1.0f), y(16);
    const WeightMatrix a{TensorType::F32, wa.data(), 64, 4, 64 * 4};
    const WeightMatrix b{TensorType::F32, wb.data(), 32, 4, 32 * 4};
    const WeightMatrix* ws[] = {&a, &b, &a, &a, &a};
    float* ys[] = {y.data(), y.data(), y.data(), y.data(), y.data()};
    EXPECT_THROW(matmul_group(ws, ys, 2, x.data(), 1, pool), std::invalid_argument);
    EXPECT_THROW(matmul_group(ws, ys, 0, x.data(), 1, pool), std::invalid_argument);
    EXPECT_THROW(matmul_group(ws, ys, 5, x.data(), 1, pool), std::invalid_argument);
    matmul_group(ws, ys, 1, x.data(), 1, pool);
    EXPECT_EQ(y[0], 32.0f);
}
