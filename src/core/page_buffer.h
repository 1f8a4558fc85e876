// A zero-filled buffer of whole pages mapped straight from the kernel
// (anonymous mmap), never from the heap. The KV cache lives in these: a fresh
// cache must hold no RAM until its slots are written, which is what the
// server's memory accounting (KvCache::resident_bytes) counts on. A heap
// allocation cannot promise that: once glibc's dynamic mmap threshold has
// grown (it does after a large block is freed), an 8 MiB `new` can come from
// pages an earlier allocation already dirtied.
#pragma once

#include <cstddef>

namespace specdec {

class PageBuffer {
public:
    PageBuffer() = default;
    // Maps `bytes` (rounded up to whole pages); throws specdec::Error naming
    // `what` and the size when the kernel refuses.
    PageBuffer(size_t bytes, const char* what);
    ~PageBuffer();
    PageBuffer(PageBuffer&& o) noexcept;
    PageBuffer& operator=(PageBuffer&& o) noexcept;
    PageBuffer(const PageBuffer&) = delete;
    PageBuffer& operator=(const PageBuffer&) = delete;

    void* data() const { return data_; }
    size_t bytes() const { return bytes_; }

private:
    void release() noexcept;
    void* data_ = nullptr;
    size_t bytes_ = 0;
};

}  // namespace specdec
