// Picks the kernel table of the best instruction set the CPU supports, once.
// SPECDEC_ISA=scalar|avx2|avx512 in the environment forces a level (capped at
// what the CPU supports) so every path can be exercised on one machine.
#pragma once

#include "kernels/vec_dot.h"

namespace specdec::kernels {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

const char* isa_name(Isa isa);
// Highest level this CPU can run (AVX2 needs AVX2+FMA+F16C; AVX-512 needs
// F/BW/VL/DQ/VNNI as vec_dot_avx512.cpp is compiled for).
Isa cpu_max_isa();
// The level matmul uses: cpu_max_isa(), or SPECDEC_ISA, or force_isa().
Isa active_isa();
// Overrides the active level (tests, benchmarks); capped at cpu_max_isa().
// Returns the level actually set. Not meant to race with running matmuls.
// While a level is forced, matmul runs that level's tiles for every row
// count; otherwise kernel_choice.h picks per row count by measurement.
Isa force_isa(Isa isa);
// True when SPECDEC_ISA named a level or force_isa was called.
bool isa_forced();
// Undoes force_isa (and SPECDEC_ISA): the CPU's highest level, kernels by measurement.
void unforce_isa();
// The table of a level, or nullptr if this CPU cannot run it.
const KernelTable* kernel_table(Isa isa);
// The highest level at or below `from` whose table has a tile for the type
// (Scalar when none does).
Isa tile_level(TensorType type, Isa from);
// Tile kernel of a weight type at the active level, falling back to lower
// levels for types a SIMD table does not cover.
TileFn active_tile(TensorType type);

}  // namespace specdec::kernels
