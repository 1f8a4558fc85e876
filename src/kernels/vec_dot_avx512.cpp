#include "kernels/vec_dot.h"
namespace specdec::kernels {
const KernelTable& avx512_kernel_table() {
    static const KernelTable t;
    return t;
}
}  // namespace specdec::kernels
