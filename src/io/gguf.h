// GGUF reader: holds a model file's bytes (io::MappedFile: a huge-page copy
// or a mapping) and parses the header, every metadata value type (v2 and
// v3), the tensor table and tensor data offsets. Any
// truncated, corrupt or unsupported file throws specdec::Error naming the file
// and the problem; nothing is read outside the file's bytes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor_type.h"
#include "io/mapped_file.h"

namespace specdec::io {

enum class GgufType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

// One metadata value. Scalars are widened (integers to int64/uint64, floats to
// double); arrays of scalars and strings are stored flat for cheap access to
// large arrays such as a 262k-token vocabulary; nested arrays go in `items`.
struct GgufValue {
    GgufType type = GgufType::UINT8;
    GgufType elem_type = GgufType::UINT8;  // for ARRAY
    int64_t i = 0;                          // signed ints, bool
    uint64_t u = 0;                         // unsigned ints
    double f = 0;                           // floats
    std::string s;                          // STRING
    std::vector<std::string> strings;       // ARRAY of STRING
    std::vector<int64_t> ints;              // ARRAY of integers/bool (uint64 cast)
    std::vector<double> floats;             // ARRAY of floats
    std::vector<GgufValue> items;           // ARRAY of ARRAY
    size_t array_size() const;
};

struct GgufTensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> dims;  // ggml order: dims[0] is the contiguous (row) dimension
    uint64_t offset = 0;        // relative to the data section
    const uint8_t* data = nullptr;
    size_t n_bytes = 0;
    int64_t n_elements() const;
};

class GgufFile {
public:
    // Throws specdec::Error on any problem, with the path in the message.
    static std::unique_ptr<GgufFile> open(const std::string& path);
    // Parse from a caller-owned buffer (used by the fuzz tests).
    static std::unique_ptr<GgufFile> parse(const uint8_t* data, size_t size, const std::string& name);

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    size_t alignment() const { return alignment_; }
    size_t file_size() const { return size_; }

    bool has(const std::string& key) const { return kv_.count(key) != 0; }
    const GgufValue* find(const std::string& key) const;
    const std::map<std::string, GgufValue>& metadata() const { return kv_; }

    // Typed getters: throw Error if the key is missing or has an incompatible type.
    std::string get_string(const std::string& key) const;
    int64_t get_int(const std::string& key) const;  // any integer type or bool
    double get_float(const std::string& key) const; // any float or integer type
    bool get_bool(const std::string& key) const;
    // Defaulted variants for optional keys (still throw on a wrong type).
    std::string get_string(const std::string& key, const std::string& dflt) const;
    int64_t get_int(const std::string& key, int64_t dflt) const;
    double get_float(const std::string& key, double dflt) const;
    bool get_bool(const std::string& key, bool dflt) const;
    const std::vector<std::string>& get_string_array(const std::string& key) const;
    const std::vector<int64_t>& get_int_array(const std::string& key) const;
    const std::vector<double>& get_float_array(const std::string& key) const;

    // Frees the contents of metadata arrays longer than `min_elements` (the
    // vocabulary, merges, scores: megabytes on large vocabularies) once the
    // tokenizer and config have been built from them; a later get_*_array on
    // one throws instead of returning an empty array.
    void release_large_arrays(size_t min_elements);
    // Elements of a metadata array, released or not (a model built again from
    // a loaded file still knows its vocabulary size). Throws if the key is
    // missing or not an array.
    size_t array_length(const std::string& key) const;

    const std::vector<GgufTensor>& tensors() const { return tensors_; }
    const GgufTensor* find_tensor(const std::string& name) const;
    const GgufTensor& tensor(const std::string& name) const;  // throws if missing

private:
    GgufFile() = default;
    void parse_all(const uint8_t* data, size_t size);
    std::string path_;
    MappedFile map_;
    uint32_t version_ = 0;
    size_t alignment_ = 32;
    size_t size_ = 0;
    std::map<std::string, GgufValue> kv_;
    std::map<std::string, size_t> released_;  // key -> element count it had
    std::vector<GgufTensor> tensors_;
    std::map<std::string, size_t> tensor_index_;
};

}  // namespace specdec::io
