// Read-only memory mapping of a whole file. Weights are used in place from the
// mapping: the engine never copies the weight file into its own memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace specdec::io {

class MappedFile {
public:
    MappedFile() = default;
    explicit MappedFile(const std::string& path);  // throws specdec::Error
    ~MappedFile();
    MappedFile(MappedFile&& o) noexcept;
    MappedFile& operator=(MappedFile&& o) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }

private:
    void release();
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace specdec::io
