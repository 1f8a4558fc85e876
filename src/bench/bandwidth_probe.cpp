#include "bench/bandwidth_probe.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "core/clock.h"
#include "core/page_buffer.h"
#include "core/thread_pool.h"

namespace specdec::bench {
namespace {

// Sums 64-byte lines with four independent 64-bit lanes each: the compiler
// vectorises it, and the adds are far cheaper than the loads they wait for,
// so the loop runs at whatever rate memory delivers.
uint64_t sum_lines(const uint64_t* p, size_t n_words) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (size_t i = 0; i + 8 <= n_words; i += 8) {
        a0 += p[i];
        a1 += p[i + 1];
        a2 += p[i + 2];
        a3 += p[i + 3];
        a4 += p[i + 4];
        a5 += p[i + 5];
        a6 += p[i + 6];
        a7 += p[i + 7];
    }
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

}  // namespace

BandwidthProbe probe_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
    constexpr size_t kPage = 4096;
    bytes = std::max(kPage, bytes / kPage * kPage);
    const size_t words = bytes / sizeof(uint64_t);
    // In huge pages, as the weights are (io/mapped_file.h): with 4 KiB pages
    // the probe measured the page walks too (20 GB/s where huge-page weights
    // streamed at 22 on the 2026-12-07 Intel VM) and was no ceiling.
    PageBuffer hold(bytes, "the read-bandwidth probe", PageBuffer::Pages::Huge);
    auto* buf = static_cast<uint64_t*>(hold.data());
    const int64_t n_pages = (int64_t)(bytes / kPage);
    const int64_t grain = std::max<int64_t>(1, n_pages / pool.size());
    // First touch by the worker that later reads the page (NUMA-local where it matters).
    pool.parallel_for(n_pages, grain, [&](int64_t b, int64_t e, int) {
        std::memset(reinterpret_cast<uint8_t*>(buf) + (size_t)b * kPage, 1, (size_t)(e - b) * kPage);
    });
    std::atomic<uint64_t> sink{0};
    double best = 0;
    for (int r = 0; r < std::max(1, reps); ++r) {
        const double t0 = now_s();
        pool.parallel_for(n_pages, grain, [&](int64_t b, int64_t e, int) {
            const size_t w0 = (size_t)b * (kPage / sizeof(uint64_t));
            const size_t w1 = std::min(words, (size_t)e * (kPage / sizeof(uint64_t)));
            sink.fetch_add(sum_lines(buf + w0, w1 - w0), std::memory_order_relaxed);
        });
        const double dt = now_s() - t0;
        if (dt > 0) best = std::max(best, (double)bytes / dt);
    }
    return {bytes, pool.size(), best};
}

}  // namespace specdec::bench
