#include "kernels/dispatch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace specdec::kernels {

namespace {

Isa detect() {
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("f16c");
    if (!avx2) return Isa::Scalar;
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                        __builtin_cpu_supports("avx512vnni");
    return avx512 ? Isa::Avx512 : Isa::Avx2;
}

Isa cap(Isa want) { return (int)want <= (int)cpu_max_isa() ? want : cpu_max_isa(); }

Isa initial() {
    Isa isa = cpu_max_isa();
    if (const char* env = std::getenv("SPECDEC_ISA")) {
        if (std::strcmp(env, "scalar") == 0) isa = Isa::Scalar;
        else if (std::strcmp(env, "avx2") == 0) isa = cap(Isa::Avx2);
        else if (std::strcmp(env, "avx512") == 0) isa = cap(Isa::Avx512);
    }
    return isa;
}

bool env_forces() {
    const char* env = std::getenv("SPECDEC_ISA");
    return env && (std::strcmp(env, "scalar") == 0 || std::strcmp(env, "avx2") == 0 ||
                   std::strcmp(env, "avx512") == 0);
}

// Relaxed is enough: the level only changes between matmuls (tests), and a
// stale read still picks a correct kernel.
std::atomic<int>& active_slot() {
    static std::atomic<int> slot{(int)initial()};
    return slot;
}
std::atomic<bool>& forced_slot() {
    static std::atomic<bool> slot{env_forces()};
    return slot;
}

}  // namespace

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::Avx512: return "avx512";
        case Isa::Avx2: return "avx2";
        default: return "scalar";
    }
}

Isa cpu_max_isa() {
    static const Isa isa = detect();
    return isa;
}

Isa active_isa() { return (Isa)active_slot().load(std::memory_order_relaxed); }

Isa force_isa(Isa isa) {
    const Isa set = cap(isa);
    active_slot().store((int)set, std::memory_order_relaxed);
    forced_slot().store(true, std::memory_order_relaxed);
    return set;
}

bool isa_forced() { return forced_slot().load(std::memory_order_relaxed); }

void unforce_isa() {
    active_slot().store((int)cpu_max_isa(), std::memory_order_relaxed);
    forced_slot().store(false, std::memory_order_relaxed);
}

const KernelTable* kernel_table(Isa isa) {
    if ((int)isa > (int)cpu_max_isa()) return nullptr;
    switch (isa) {
        case Isa::Avx512: return &avx512_kernel_table();
        case Isa::Avx2: return &avx2_kernel_table();
        default: return &scalar_kernel_table();
    }
}

Isa tile_level(TensorType type, Isa from) {
    for (int level = (int)from; level > 0; --level) {
        if (const KernelTable* k = kernel_table((Isa)level); k && k->get(type)) return (Isa)level;
    }
    return Isa::Scalar;
}

TileFn active_tile(TensorType type) { return kernel_table(tile_level(type, active_isa()))->get(type); }

}  // namespace specdec::kernels
