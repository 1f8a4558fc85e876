// Persistent worker pool. A job is published by bumping a generation counter;
// workers spin on it for a short while (a forward pass issues matmuls every
// ~100 us, far less than a futex sleep/wake round trip) and then sleep on a
// condition variable so an idle pool costs no CPU.
#include "core/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace specdec {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// How long a waiting thread spins before sleeping. Long enough to bridge the
// gap between consecutive matmuls of one forward pass, short enough that an
// idle pool quickly stops burning a core (this machine is often shared).
constexpr auto kSpin = std::chrono::microseconds(300);

void pin_current_thread(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    // Best effort: a CPU outside our cgroup's set is not worth failing for.
    (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// Spins until pred() holds or kSpin passes; returns pred()'s last value.
template <class Pred>
bool spin_until(Pred pred) {
    const auto start = std::chrono::steady_clock::now();
    for (uint32_t i = 1;; ++i) {
        if (pred()) return true;
        cpu_relax();
        // After a short pure spin, yield between polls: when the machine has
        // more runnable threads than cores, the thread we wait for may be the
        // one our spinning keeps off the CPU.
        if (i > 256) std::this_thread::yield();
        if ((i & 63u) == 0 && std::chrono::steady_clock::now() - start > kSpin) return pred();
    }
}

}  // namespace

struct ThreadPool::State {
    std::vector<std::thread> threads;

    // The current job, written by the caller before it bumps `gen`.
    const std::function<void(int64_t, int64_t, int)>* fn = nullptr;
    int64_t n = 0;
    int64_t chunk = 1;

    alignas(64) std::atomic<int64_t> next{0};     // start of the next unclaimed chunk
    alignas(64) std::atomic<uint64_t> gen{0};     // job generation; workers wait for a change
    alignas(64) std::atomic<int> pending{0};      // workers not yet done with this job
    alignas(64) std::atomic<int> sleepers{0};     // workers asleep (or about to be) on wake_cv
    std::atomic<bool> caller_sleeping{false};
    std::atomic<bool> stop{false};

    std::mutex mu;
    std::condition_variable wake_cv;  // workers: new job or stop
    std::condition_variable done_cv;  // caller: pending reached 0

    std::mutex err_mu;
    std::exception_ptr error;

    // Claims chunks until none are left. Dynamic claiming balances the load
    // when a core is shared with other processes.
    void run_chunks(int worker) {
        for (;;) {
            const int64_t b = next.fetch_add(chunk, std::memory_order_relaxed);
            if (b >= n) return;
            const int64_t e = std::min(n, b + chunk);
            try {
                (*fn)(b, e, worker);
            } catch (...) {
                std::lock_guard<std::mutex> lk(err_mu);
                if (!error) error = std::current_exception();
            }
        }
    }

    void worker_loop(int worker) {
        uint64_t seen = 0;
        for (;;) {
            // Wait for a new generation: spin first, then sleep.
            auto changed = [&] { return gen.load(std::memory_order_acquire) != seen; };
            if (!spin_until(changed)) {
                std::unique_lock<std::mutex> lk(mu);
                // seq_cst increment pairs with the caller's seq_cst gen bump and
                // sleepers read: one of the two always sees the other.
                sleepers.fetch_add(1, std::memory_order_seq_cst);
                wake_cv.wait(lk, [&] { return gen.load(std::memory_order_seq_cst) != seen; });
                sleepers.fetch_sub(1, std::memory_order_relaxed);
            }
            seen = gen.load(std::memory_order_acquire);
            if (stop.load(std::memory_order_acquire)) return;
            run_chunks(worker);
            if (pending.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
                caller_sleeping.load(std::memory_order_seq_cst)) {
                std::lock_guard<std::mutex> lk(mu);
                done_cv.notify_one();
            }
        }
    }

    void wake_workers() {
        if (sleepers.load(std::memory_order_seq_cst) > 0) {
            // Taking the lock orders us after a worker that is between its
            // sleepers increment and its wait, so the notify is not lost.
            std::lock_guard<std::mutex> lk(mu);
            wake_cv.notify_all();
        }
    }
};

ThreadPool::ThreadPool(ThreadPoolOptions opts)
    : n_threads_(std::max(1, opts.n_threads)), state_(std::make_unique<State>()) {
    if (opts.n_threads < 1) {
        throw std::invalid_argument("ThreadPool: n_threads must be >= 1, got " +
                                    std::to_string(opts.n_threads));
    }
    const std::vector<int> pins = opts.pin_cpus;
    // The caller is worker 0 and is pinned too: that is what "worker 0 on
    // pin_cpus[0]" means for a pool owned by, say, the draft model's thread.
    if (!pins.empty()) pin_current_thread(pins[0]);
    State* s = state_.get();
    for (int i = 1; i < n_threads_; ++i) {
        s->threads.emplace_back([s, i, pins] {
            if (!pins.empty()) pin_current_thread(pins[(size_t)i % pins.size()]);
            s->worker_loop(i);
        });
    }
}

ThreadPool::~ThreadPool() {
    State* s = state_.get();
    if (s->threads.empty()) return;
    s->stop.store(true, std::memory_order_release);
    s->gen.fetch_add(1, std::memory_order_seq_cst);
    {
        std::lock_guard<std::mutex> lk(s->mu);
        s->wake_cv.notify_all();
    }
    for (auto& t : s->threads) t.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t, int)>& fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    State* s = state_.get();
    // One thread, or too little work to split: no synchronisation at all.
    if (n_threads_ == 1 || n <= grain) {
        fn(0, n, 0);
        return;
    }
    // About 4 chunks per worker (for balance when a core is busy elsewhere),
    // rounded to a multiple of grain.
    int64_t chunk = (n + 4 * n_threads_ - 1) / (4 * n_threads_);
    chunk = std::max(grain, (chunk + grain - 1) / grain * grain);

    s->fn = &fn;
    s->n = n;
    s->chunk = chunk;
    s->error = nullptr;
    s->next.store(0, std::memory_order_relaxed);
    s->pending.store(n_threads_ - 1, std::memory_order_relaxed);
    s->gen.fetch_add(1, std::memory_order_seq_cst);  // publishes the fields above
    s->wake_workers();

    s->run_chunks(0);

    auto done = [&] { return s->pending.load(std::memory_order_seq_cst) == 0; };
    if (!spin_until(done)) {
        std::unique_lock<std::mutex> lk(s->mu);
        s->caller_sleeping.store(true, std::memory_order_seq_cst);
        s->done_cv.wait(lk, done);
        s->caller_sleeping.store(false, std::memory_order_relaxed);
    }
    if (s->error) std::rethrow_exception(s->error);
}

}  // namespace specdec
