// ThreadPool: coverage of every index, chunk sizes, the single-thread path,
// reuse across many short jobs (spin path) and after idling (sleep path),
// exceptions, pinning.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace specdec {
namespace {

void check_cover(ThreadPool& pool, int64_t n, int64_t grain) {
    std::vector<std::atomic<int>> hits((size_t)n);
    std::atomic<int> bad_worker{0}, short_chunks{0};
    pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int w) {
        if (w < 0 || w >= pool.size()) bad_worker++;
        if (e - b < grain && e != n) short_chunks++;
        for (int64_t i = b; i < e; ++i) hits[(size_t)i]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[(size_t)i].load(), 1) << "n=" << n << " i=" << i;
    EXPECT_EQ(bad_worker.load(), 0);
    EXPECT_EQ(short_chunks.load(), 0) << "only the last chunk may be shorter than grain";
}

TEST(ThreadPool, CoversEveryIndexOnce) {
    for (int threads : {1, 2, 3, 5}) {
        ThreadPool pool(threads);
        EXPECT_EQ(pool.size(), threads);
        for (int64_t n : {0, 1, 2, 15, 16, 17, 100, 1000, 4865}) {
            for (int64_t grain : {1, 4, 16, 64}) check_cover(pool, n, grain);
        }
    }
}

TEST(ThreadPool, SingleThreadRunsOnCaller) {
    ThreadPool pool(1);
    const auto me = std::this_thread::get_id();
    int calls = 0;
    pool.parallel_for(1000, 1, [&](int64_t b, int64_t e, int w) {
        EXPECT_EQ(std::this_thread::get_id(), me);
        EXPECT_EQ(w, 0);
        EXPECT_EQ(b, 0);
        EXPECT_EQ(e, 1000);
        ++calls;
    });
    EXPECT_EQ(calls, 1);
}

TEST(ThreadPool, UsesSeveralWorkers) {
    ThreadPool pool(2);
    std::mutex mu;
    std::set<std::thread::id> ids;
    for (int rep = 0; rep < 200 && ids.size() < 2; ++rep) {
        pool.parallel_for(64, 1, [&](int64_t, int64_t, int) {
            std::this_thread::sleep_for(std::chrono::microseconds(50));
            std::lock_guard<std::mutex> lk(mu);
            ids.insert(std::this_thread::get_id());
        });
    }
    EXPECT_EQ(ids.size(), 2u);
}

TEST(ThreadPool, ManyShortJobsAndIdleGaps) {
    ThreadPool pool(3);
    std::atomic<int64_t> total{0};
    for (int rep = 0; rep < 5000; ++rep) {
        pool.parallel_for(37, 2, [&](int64_t b, int64_t e, int) { total += e - b; });
    }
    EXPECT_EQ(total.load(), 5000 * 37);
    // Let the workers fall asleep, then wake them again.
    for (int rep = 0; rep < 5; ++rep) {
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        check_cover(pool, 333, 8);
    }
}

TEST(ThreadPool, PropagatesExceptionsAndStaysUsable) {
    ThreadPool pool(2);
    EXPECT_THROW(pool.parallel_for(100, 1,
                                   [&](int64_t b, int64_t, int) {
                                       if (b >= 50) throw std::runtime_error("boom");
                                   }),
                 std::runtime_error);
    check_cover(pool, 100, 1);
}

TEST(ThreadPool, PinnedPoolWorks) {
    const unsigned ncpu = std::max(1u, std::thread::hardware_concurrency());
    std::vector<int> cpus;
    for (unsigned i = 0; i < ncpu; ++i) cpus.push_back((int)i);
    // Pinning changes the caller's affinity: do it on a thread of our own.
    std::thread t([&] {
        ThreadPool pool(ThreadPoolOptions{2, cpus});
        check_cover(pool, 1000, 16);
    });
    t.join();
}

TEST(ThreadPool, RejectsZeroThreads) { EXPECT_THROW(ThreadPool(0), std::invalid_argument); }

}  // namespace
}  // namespace specdec
