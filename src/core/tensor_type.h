// Tensor element types, numbered exactly as GGUF/ggml number them, with the
// block geometry every layer needs (the file reader to size tensors, the
// kernels to walk rows). Block layouts themselves live in kernels/quant_blocks.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace specdec {

enum class TensorType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ4_NL = 20,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    BF16 = 30,
    MXFP4 = 39,
};

struct TensorTypeTraits {
    std::string_view name;
    int64_t block_elems;   // elements per block (1 for plain types)
    size_t block_bytes;    // bytes per block
    bool known;            // false: a number GGUF may use that we cannot read
};

inline TensorTypeTraits tensor_type_traits(uint32_t t) {
    switch (t) {
        case 0: return {"F32", 1, 4, true};
        case 1: return {"F16", 1, 2, true};
        case 2: return {"Q4_0", 32, 18, true};
        case 3: return {"Q4_1", 32, 20, true};
        case 6: return {"Q5_0", 32, 22, true};
        case 7: return {"Q5_1", 32, 24, true};
        case 8: return {"Q8_0", 32, 34, true};
        case 9: return {"Q8_1", 32, 36, true};
        case 10: return {"Q2_K", 256, 84, true};
        case 11: return {"Q3_K", 256, 110, true};
        case 12: return {"Q4_K", 256, 144, true};
        case 13: return {"Q5_K", 256, 176, true};
        case 14: return {"Q6_K", 256, 210, true};
        case 15: return {"Q8_K", 256, 292, true};
        case 20: return {"IQ4_NL", 32, 18, true};
        case 23: return {"IQ4_XS", 256, 136, true};
        case 39: return {"MXFP4", 32, 17, true};
        // Sized so that a file using them can be read (and `specdec models
        // inspect` can say what it holds); no kernel runs them, and the weight
        // binder refuses them by name (kernels::is_supported_weight_type).
        case 16: return {"IQ2_XXS", 256, 66, true};
        case 17: return {"IQ2_XS", 256, 74, true};
        case 18: return {"IQ3_XXS", 256, 98, true};
        case 19: return {"IQ1_S", 256, 50, true};
        case 21: return {"IQ3_S", 256, 110, true};
        case 22: return {"IQ2_S", 256, 82, true};
        case 29: return {"IQ1_M", 256, 56, true};
        case 34: return {"TQ1_0", 256, 54, true};
        case 35: return {"TQ2_0", 256, 66, true};
        case 24: return {"I8", 1, 1, true};
        case 25: return {"I16", 1, 2, true};
        case 26: return {"I32", 1, 4, true};
        case 27: return {"I64", 1, 8, true};
        case 28: return {"F64", 1, 8, true};
        case 30: return {"BF16", 1, 2, true};
        default: return {"unknown", 1, 0, false};
    }
}

inline TensorTypeTraits tensor_type_traits(TensorType t) { return tensor_type_traits((uint32_t)t); }
inline std::string_view tensor_type_name(TensorType t) { return tensor_type_traits(t).name; }

// Bytes of one row of n elements; n must be a multiple of the block size.
inline size_t tensor_row_bytes(TensorType t, int64_t n) {
    const auto tr = tensor_type_traits(t);
    return (size_t)(n / tr.block_elems) * tr.block_bytes;
}

}  // namespace specdec
