// The kernel choice (kernel_choice.h) kept across processes, so only the
// first process of a build on a machine pays the calibration (about 1 s per
// weight type on an AVX-512 CPU; a `specdec generate` paid 2-3 s of it before
// its first token, and a test suite pays it per CLI call).
//
// One JSON file, kernel-choice.json in the cache directory (core/cache_file.h:
// $SPECDEC_CACHE_DIR, else $XDG_CACHE_HOME/specdec, else ~/.cache/specdec);
// SPECDEC_KERNEL_CACHE=off never reads or writes it (every process measures),
// SPECDEC_KERNEL_CACHE=<file> uses that file instead. It holds, per key, each
// type's per-bucket levels and the timings they were picked from. The key is
// the CPU's model name, its highest SIMD level and the build's SPECDEC_BUILD_ID
// (version, build type, compiler and a hash of src/kernels: cmake/build_id.cmake),
// so another machine, a changed kernel or a debug build measures afresh. A few
// keys live side by side (one per build a user runs), the oldest dropped.
//
// A file that is missing, corrupt, of another format or holds an entry that
// does not fit (a level this CPU lacks) counts as a miss: the type is measured
// and the file rewritten, whole and renamed into place (never half-read). Two
// processes measuring different types at once may each write the file without
// the other's type; that type is then measured once more, never wrongly read.
#pragma once

#include <optional>
#include <string>

#include "kernels/kernel_choice.h"

namespace specdec::kernels {

struct KernelCacheKey {
    std::string cpu;      // cpu_model_name()
    std::string max_isa;  // isa_name(cpu_max_isa())
    std::string build;    // SPECDEC_BUILD_ID
    std::string str() const { return cpu + "|" + max_isa + "|" + build; }
};
// This process's key.
KernelCacheKey kernel_cache_key();

// The cache file per SPECDEC_KERNEL_CACHE and the cache directory; "" = off.
std::string kernel_cache_path();

// The stored choice of `type` under `key` in `path` (how = "cached"), or
// nullopt when there is none or it is malformed. Never throws.
std::optional<KernelChoiceReport> load_kernel_choice(const std::string& path, const KernelCacheKey& key,
                                                     TensorType type);
// Adds (or replaces) `r` under `key` in `path`, keeping the other types and
// keys. False when the file cannot be written. Never throws.
bool store_kernel_choice(const std::string& path, const KernelCacheKey& key, const KernelChoiceReport& r);

}  // namespace specdec::kernels
