// The read-only bytes of a whole file, held one of two ways (Residency):
// - Map: a private read-only mapping. Pages come from the page cache as they
//   are touched and are shared with every process that maps the same file.
// - HugePageCopy (the default): the file read once into anonymous memory
//   backed by 2 MiB transparent huge pages. A decode step streams every
//   weight, and with the page cache's 4 KiB pages each 4 KiB costs a TLB miss
//   and a page walk: on the 2026-12-07 Intel Xeon VM qwen 1.5B decoded at
//   15 tok/s mapped and at 22 tok/s copied (2 threads). Loading reads the
//   whole file (0.45 s more for that 1.1 GB model from the page cache), and the
//   copy is private: opens of the same file within one process share it, other
//   processes do not. Where the copy cannot help or cannot fit (THP set to
//   "never", or the file over 80 % of MemAvailable) the file is mapped instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace specdec {
class PageBuffer;
}

namespace specdec::io {

enum class Residency { Map, HugePageCopy };

// The residency files opened without one get (`--mmap` sets Map for a whole
// command: a process that must share the page cache, or a file larger than RAM).
void set_default_residency(Residency r);
Residency default_residency();

class MappedFile {
public:
    MappedFile() = default;
    explicit MappedFile(const std::string& path);  // the default residency; throws specdec::Error
    MappedFile(const std::string& path, Residency residency);
    ~MappedFile();
    MappedFile(MappedFile&& o) noexcept;
    MappedFile& operator=(MappedFile&& o) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    // How the bytes are held: HugePageCopy only when the copy was made.
    Residency residency() const { return copy_ ? Residency::HugePageCopy : Residency::Map; }

private:
    void release();
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
    std::shared_ptr<const PageBuffer> copy_;  // HugePageCopy: shared by this process's opens of the file
};

}  // namespace specdec::io
