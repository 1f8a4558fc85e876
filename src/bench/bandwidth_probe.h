// The machine's memory read roofline: how many bytes per second a streaming
// read of a buffer far larger than the caches reaches on 1 and N threads.
// Decode of one row reads every weight once, so tokens/s times the bytes a
// token reads, over this figure, says how close decode is to the limit the
// memory sets (machines of one kind differ by 2-3x from session to session;
// a tok/s figure means little without it).
#pragma once

#include <cstddef>

namespace specdec {
class ThreadPool;
}

namespace specdec::bench {

struct BandwidthProbe {
    size_t buffer_bytes = 0;
    int threads = 0;
    double bytes_per_s = 0;  // best of the repetitions
};

// Reads a buffer of `bytes` (rounded down to 4 KiB pages; each worker its own
// contiguous part, first touched by that worker) `reps` times through the
// pool and returns the fastest pass.
BandwidthProbe probe_read_bandwidth(ThreadPool& pool, size_t bytes = (size_t)1 << 30, int reps = 5);

}  // namespace specdec::bench
