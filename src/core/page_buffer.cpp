#include "core/page_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace specdec {

PageBuffer::PageBuffer(size_t bytes, const char* what) : bytes_(bytes) {
    if (bytes == 0) return;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    SPECDEC_CHECK(p != MAP_FAILED, "cannot map ", bytes, " bytes for ", what, ": ", std::strerror(errno));
    data_ = p;
}

PageBuffer::~PageBuffer() { release(); }

PageBuffer::PageBuffer(PageBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

PageBuffer& PageBuffer::operator=(PageBuffer&& o) noexcept {
    if (this != &o) {
        release();
        data_ = std::exchange(o.data_, nullptr);
        bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
}

void PageBuffer::release() noexcept {
    if (data_ != nullptr) ::munmap(data_, bytes_);
    data_ = nullptr;
    bytes_ = 0;
}

}  // namespace specdec
