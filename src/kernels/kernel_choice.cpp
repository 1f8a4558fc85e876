// Kernel choice by measurement: see kernel_choice.h for why and what is exact.
#include "kernels/kernel_choice.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <new>
#include <optional>
#include <sstream>

#include "core/clock.h"
#include "core/page_buffer.h"
#include "kernels/kernel_choice_cache.h"
#include "kernels/quantize_act.h"

namespace specdec::kernels {

namespace {

constexpr int64_t kProbeRows[kRowBuckets] = {1, 2, 4, 8, 16, 32};
constexpr const char* kBucketNames[kRowBuckets] = {"1", "2", "3-4", "5-8", "9-16", "17+"};

// Calibration matrix: 64 MiB, flushed from the caches before every timed
// call of the buckets up to 8 rows, so they stream from memory as decode and
// verification do. (Its
// size alone did not ensure that: an Intel Xeon VM of this kind has a 480 MiB
// L3, where the 64 MiB stayed cached and the 1-row choice was the in-cache
// winner, the AVX-512 tile, which decoded qwen 1.5B 20 % slower from DRAM
// than the AVX2 one.)
constexpr size_t kCalibWeightBytes = (size_t)64 << 20;
constexpr int64_t kCalibNIn = 2048;
// Levels alternate within each repetition and the best of kCalibReps counts:
// with other processes on a 2-core machine, timing one level's repetitions
// after the other's let a burst of load decide the choice (the same binary
// picked AVX-512 for 1 row in one run and AVX2 in the next).
constexpr int kCalibReps = 5;

// Evicts [p, p + n) from every cache level. clflushopt where the CPU has it:
// on the Xeon VM it flushed 64 MiB in ~5 ms against ~60 ms for clflush (which
// is baseline x86-64, the fallback), and the flushes were most of the
// calibration's time.
__attribute__((target("clflushopt"))) void flush_opt(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; i += 64) _mm_clflushopt(const_cast<uint8_t*>(p + i));
    _mm_sfence();
}
bool cpu_has_clflushopt() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 23)) != 0;
}
void flush_from_caches(const uint8_t* p, size_t n) {
    static const bool opt = cpu_has_clflushopt();
    if (opt) return flush_opt(p, n);
    for (size_t i = 0; i < n; i += 64) _mm_clflush(p + i);
    _mm_mfence();
}

TileFn level_tile(Isa level, TensorType t) {
    const KernelTable* k = kernel_table(level);
    return k ? k->get(t) : nullptr;
}

// SIMD levels this CPU runs that have a tile of their own for the type.
std::vector<Isa> simd_candidates(TensorType t) {
    std::vector<Isa> c;
    for (int l = (int)Isa::Avx2; l <= (int)cpu_max_isa(); ++l)
        if (level_tile((Isa)l, t)) c.push_back((Isa)l);
    return c;
}

struct Aligned {
    explicit Aligned(size_t n) : p(static_cast<uint8_t*>(::operator new(n, std::align_val_t{64}))) {}
    ~Aligned() { ::operator delete(p, std::align_val_t{64}); }
    Aligned(const Aligned&) = delete;
    Aligned& operator=(const Aligned&) = delete;
    uint8_t* p;
};

// ns per (weight row x activation row) of each candidate level at each bucket.
std::vector<std::array<double, kRowBuckets>> calibrate(TensorType t, const std::vector<Isa>& levels) {
    const size_t row_bytes = tensor_row_bytes(t, kCalibNIn);
    const int64_t n_rows = (int64_t)(kCalibWeightBytes / row_bytes);
    // In huge pages, as a model's weights are (io/mapped_file.h): with 4 KiB
    // pages the streamed buckets timed page walks as much as the kernels.
    PageBuffer wbuf(row_bytes * (size_t)n_rows, "the kernel calibration matrix", PageBuffer::Pages::Huge);
    uint8_t* const wp = static_cast<uint8_t*>(wbuf.data());
    // Bytes in [0x10, 0x3B]: every fp16 scale they form is a normal number in
    // [2^-11, 1), so no denormal or NaN slows a path; quant values are arbitrary.
    uint32_t s = 12345;
    for (size_t i = 0; i < row_bytes * (size_t)n_rows; ++i) {
        s = s * 1664525u + 1013904223u;
        wp[i] = (uint8_t)(0x10 + (s >> 24) % 44);
    }
    const int64_t max_rows = kProbeRows[kRowBuckets - 1];
    const size_t a_stride = (act_row_bytes_ext(t, kCalibNIn) + 63) & ~(size_t)63;
    Aligned a(a_stride * (size_t)max_rows);
    std::vector<float> x((size_t)kCalibNIn);
    for (int64_t r = 0; r < max_rows; ++r) {
        for (auto& v : x) {
            s = s * 1664525u + 1013904223u;
            v = ((float)(s >> 8) / 16777216.0f - 0.5f) * 4.0f;
        }
        uint8_t* row = a.p + (size_t)r * a_stride;
        quantize_act_row_fast(t, x.data(), row, kCalibNIn);
        add_act_row_extras(t, row, kCalibNIn);
    }
    std::vector<float> y((size_t)n_rows * 2);
    std::vector<std::array<double, kRowBuckets>> ns(levels.size());
    for (int b = 0; b < kRowBuckets; ++b) {
        const int64_t nt = kProbeRows[b];
        // Up to 8 activation rows (decode and verification) the weights stream
        // from memory in a real forward, so they do here: the whole flushed
        // matrix for 1-2 rows, half of it for 3-8. (Timed warm, the 4-row
        // bucket's choice flipped between runs, and the AVX-512 tile it picked
        // half the time made a 4-row qwen 1.5B forward 1.6x one row against
        // 1.35-1.47x with AVX2.) From 9 rows on the kernels are compute-bound
        // and an eighth of the rows, warm in cache, times them as well.
        const bool from_memory = nt <= 8;
        const int64_t nr = (nt <= 2 ? n_rows : from_memory ? n_rows / 2 : std::max<int64_t>(64, n_rows / 8)) &
                           ~(int64_t)1;
        if (y.size() < (size_t)(nr * nt)) y.resize((size_t)(nr * nt));
        std::vector<double> best(levels.size(), 1e30);
        for (int rep = 0; rep < kCalibReps; ++rep) {
            for (size_t li = 0; li < levels.size(); ++li) {
                const TileFn f = level_tile(levels[li], t);
                if (from_memory) flush_from_caches(wp, row_bytes * (size_t)nr);
                const double t0 = now_s();
                f(kCalibNIn, wp, row_bytes, nr, a.p, a_stride, nt, y.data(), nr);
                best[li] = std::min(best[li], now_s() - t0);
            }
        }
        for (size_t li = 0; li < levels.size(); ++li) ns[li][b] = best[li] * 1e9 / (double)(nr * nt);
    }
    return ns;
}

// A stored choice is used only if it timed the levels this process would and
// picks among them (a file edited by hand or a key collision must not select
// a kernel this CPU cannot run).
bool fits(const KernelChoiceReport& c, const std::vector<Isa>& cands) {
    if (c.levels != cands || c.ns_per_row.size() != cands.size()) return false;
    return std::all_of(c.isa.begin(), c.isa.end(),
                       [&](Isa l) { return std::find(cands.begin(), cands.end(), l) != cands.end(); });
}

struct Slot {
    std::once_flag once;
    KernelChoiceReport report;
    TileFn fn[kRowBuckets] = {};
};
Slot& slot(TensorType t) {
    static Slot slots[KernelTable::kSlots];
    return slots[(uint32_t)t % KernelTable::kSlots];
}

// The measured (unforced) choice of a type, made once per process.
const Slot& measured(TensorType t) {
    Slot& s = slot(t);
    std::call_once(s.once, [&] {
        KernelChoiceReport& r = s.report;
        r.type = t;
        const std::vector<Isa> cands = simd_candidates(t);
        r.isa.fill(tile_level(t, cpu_max_isa()));
        if (!tiles_exact_across_levels(t)) r.how = "float: highest level";
        else if (cands.size() < 2) r.how = "only level";
        else {
            const std::string path = kernel_cache_path();
            const KernelCacheKey key = kernel_cache_key();
            std::optional<KernelChoiceReport> cached;
            if (!path.empty()) cached = load_kernel_choice(path, key, t);
            if (cached && fits(*cached, cands)) {
                r = *cached;
            } else {
                r.ns_per_row = calibrate(t, cands);
                r.levels = cands;
                std::vector<std::array<double, kRowBuckets>> by_level((size_t)cpu_max_isa() + 1);
                for (auto& v : by_level) v.fill(-1.0);
                for (size_t i = 0; i < cands.size(); ++i) by_level[(size_t)cands[i]] = r.ns_per_row[i];
                r.isa = pick_fastest(by_level);
                r.how = "measured";
                if (!path.empty()) store_kernel_choice(path, key, r);
            }
        }
        for (int b = 0; b < kRowBuckets; ++b) s.fn[b] = level_tile(r.isa[b], t);
    });
    return s;
}

}  // namespace

int row_bucket(int64_t n) {
    if (n <= 1) return 0;
    if (n == 2) return 1;
    if (n <= 4) return 2;
    if (n <= 8) return 3;
    if (n <= 16) return 4;
    return 5;
}

const char* row_bucket_name(int b) { return kBucketNames[std::clamp(b, 0, kRowBuckets - 1)]; }
int64_t row_bucket_probe_rows(int b) { return kProbeRows[std::clamp(b, 0, kRowBuckets - 1)]; }

bool tiles_exact_across_levels(TensorType t) {
    switch (t) {
        case TensorType::Q4_0: case TensorType::Q4_1: case TensorType::Q5_0: case TensorType::Q5_1:
        case TensorType::Q8_0: case TensorType::Q4_K: case TensorType::Q5_K: case TensorType::Q6_K:
        case TensorType::Q2_K: case TensorType::Q3_K: case TensorType::IQ4_NL: case TensorType::IQ4_XS:
        case TensorType::MXFP4:
            return true;
        default:
            return false;
    }
}

TileFn choose_tile(TensorType t, int64_t n_rows) {
    if (isa_forced()) return active_tile(t);
    return measured(t).fn[row_bucket(n_rows)];
}

Isa chosen_isa(TensorType t, int bucket) {
    if (isa_forced()) return tile_level(t, active_isa());
    return measured(t).report.isa[std::clamp(bucket, 0, kRowBuckets - 1)];
}

KernelChoiceReport kernel_choice_report(TensorType t) {
    if (isa_forced()) {
        KernelChoiceReport r;
        r.type = t;
        for (int b = 0; b < kRowBuckets; ++b) r.isa[b] = chosen_isa(t, b);
        r.how = "forced";
        return r;
    }
    return measured(t).report;
}

std::string kernel_choice_summary(TensorType t) {
    const KernelChoiceReport r = kernel_choice_report(t);
    if (std::all_of(r.isa.begin(), r.isa.end(), [&](Isa i) { return i == r.isa[0]; }))
        return isa_name(r.isa[0]);
    std::ostringstream o;
    for (int b = 0; b < kRowBuckets; ++b) o << (b ? " " : "") << kBucketNames[b] << ":" << isa_name(r.isa[b]);
    return o.str();
}

std::array<Isa, kRowBuckets> pick_fastest(const std::vector<std::array<double, kRowBuckets>>& ns, double tie) {
    std::array<Isa, kRowBuckets> out{};
    for (int b = 0; b < kRowBuckets; ++b) {
        int best = -1;
        for (int l = 0; l < (int)ns.size(); ++l) {
            const double v = ns[(size_t)l][b];
            if (v < 0 || !std::isfinite(v)) continue;
            // Walking up the levels: a higher level takes over unless it is
            // slower than the best so far by more than the tie margin.
            if (best < 0 || v <= ns[(size_t)best][b] * (1.0 + tie)) best = l;
        }
        out[b] = best < 0 ? Isa::Scalar : (Isa)best;
    }
    return out;
}

}  // namespace specdec::kernels
