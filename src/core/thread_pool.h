// A fixed pool of worker threads that splits index ranges across cores with no
// per-call thread creation. The calling thread takes part as worker 0, so a pool
// of n threads owns n-1 OS threads. Workers may be pinned to CPUs (SSD runs the
// draft model on its own core).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace specdec {

struct ThreadPoolOptions {
    int n_threads = 1;            // total workers including the caller
    std::vector<int> pin_cpus;    // optional: worker i pinned to pin_cpus[i % size]
};

class ThreadPool {
public:
    explicit ThreadPool(ThreadPoolOptions opts);
    explicit ThreadPool(int n_threads) : ThreadPool(ThreadPoolOptions{n_threads, {}}) {}
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Calls fn(begin, end, worker) over contiguous chunks of [0, n) so that every
    // index is visited once; returns when all chunks are done. Chunks are at
    // least `grain` long. Not re-entrant: fn must not call parallel_for.
    void parallel_for(int64_t n, int64_t grain,
                      const std::function<void(int64_t, int64_t, int)>& fn);

private:
    struct State;
    int n_threads_;
    std::unique_ptr<State> state_;
};

}  // namespace specdec
