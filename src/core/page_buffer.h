// A zero-filled buffer of whole pages mapped straight from the kernel
// (anonymous mmap), never from the heap. The KV cache lives in these: a fresh
// cache must hold no RAM until its slots are written, which is what the
// server's memory accounting (KvCache::resident_bytes) counts on. A heap
// allocation cannot promise that: once glibc's dynamic mmap threshold has
// grown (it does after a large block is freed), an 8 MiB `new` can come from
// pages an earlier allocation already dirtied.
//
// Pages::Huge asks for 2 MiB transparent huge pages (madvise; the buffer is
// 2 MiB-aligned so every whole 2 MiB of it can be one). What streams through
// every step wants them: with 4 KiB pages each 4 KiB of a weight read costs a
// TLB miss and a page walk, and on the 2026-12-07 Intel Xeon VM that held
// qwen 1.5B decode at 15 tok/s where the same weights in huge pages decode
// at 22. A huge page is resident as a whole once touched, so sparse buffers
// (the KV cache) keep small pages.
#pragma once

#include <cstddef>

namespace specdec {

class PageBuffer {
public:
    enum class Pages { Small, Huge };
    PageBuffer() = default;
    // Maps `bytes` (rounded up to whole pages); throws specdec::Error naming
    // `what` and the size when the kernel refuses.
    PageBuffer(size_t bytes, const char* what, Pages pages = Pages::Small);
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
    void* map_ = nullptr;  // what munmap gets: data_ less the alignment slack
    size_t map_bytes_ = 0;
};

}  // namespace specdec
