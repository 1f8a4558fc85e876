// safetensors reader: holds the bytes (io::MappedFile) of a file in the
// Hugging Face safetensors format
// (8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and [begin, end) byte range in the data section, then the
// data). Every header field is checked before anything is read: a truncated
// or corrupt file throws specdec::Error naming the file and the problem, and
// no tensor view ever points outside the file's bytes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/mapped_file.h"

namespace specdec::io {

enum class StDtype { F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL };

struct StTensor {
    std::string name;
    StDtype dtype = StDtype::F32;
    std::vector<int64_t> shape;   // row-major, outermost first (PyTorch order)
    const uint8_t* data = nullptr;
    size_t n_bytes = 0;
    int64_t n_elements() const;
};

const char* st_dtype_name(StDtype t);
size_t st_dtype_size(StDtype t);

class SafetensorsFile {
public:
    // Throws specdec::Error on any problem, with the path in the message.
    static std::unique_ptr<SafetensorsFile> open(const std::string& path);
    // Parse from a caller-owned buffer (tests, fuzzing).
    static std::unique_ptr<SafetensorsFile> parse(const uint8_t* data, size_t size, const std::string& name);

    const std::string& path() const { return path_; }
    const std::map<std::string, StTensor>& tensors() const { return tensors_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    const StTensor* find(const std::string& name) const;
    // The tensor, or an error naming the file and the missing tensor.
    const StTensor& get(const std::string& name) const;

private:
    void parse_all(const uint8_t* data, size_t size);

    std::string path_;
    MappedFile map_;
    std::map<std::string, StTensor> tensors_;
    std::map<std::string, std::string> metadata_;
};

}  // namespace specdec::io
