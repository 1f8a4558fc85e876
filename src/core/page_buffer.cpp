#include "core/page_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace specdec {

PageBuffer::PageBuffer(size_t bytes, const char* what, Pages pages) : bytes_(bytes) {
    if (bytes == 0) return;
    constexpr size_t kHuge = size_t(2) << 20;
    // Huge: map 2 MiB more, so that a 2 MiB-aligned start fits (the untouched slack holds no RAM).
    const size_t slack = pages == Pages::Huge ? kHuge : 0;
    void* p = ::mmap(nullptr, bytes + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    SPECDEC_CHECK(p != MAP_FAILED, "cannot map ", bytes, " bytes for ", what, ": ", std::strerror(errno));
    map_ = p;
    map_bytes_ = bytes + slack;
    data_ = p;
    if (pages == Pages::Huge) {
        const auto start = reinterpret_cast<uintptr_t>(p);
        const uintptr_t aligned = (start + kHuge - 1) / kHuge * kHuge;
        data_ = reinterpret_cast<void*>(aligned);
        // No huge pages on this kernel (or THP "never") leaves small pages: slower, not wrong.
        (void)::madvise(data_, bytes, MADV_HUGEPAGE);
    }
}

PageBuffer::~PageBuffer() { release(); }

PageBuffer::PageBuffer(PageBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      map_(std::exchange(o.map_, nullptr)),
      map_bytes_(std::exchange(o.map_bytes_, 0)) {}

PageBuffer& PageBuffer::operator=(PageBuffer&& o) noexcept {
    if (this != &o) {
        release();
        data_ = std::exchange(o.data_, nullptr);
        bytes_ = std::exchange(o.bytes_, 0);
        map_ = std::exchange(o.map_, nullptr);
        map_bytes_ = std::exchange(o.map_bytes_, 0);
    }
    return *this;
}

void PageBuffer::release() noexcept {
    if (map_ != nullptr) ::munmap(map_, map_bytes_);
    map_ = data_ = nullptr;
    bytes_ = map_bytes_ = 0;
}

}  // namespace specdec
