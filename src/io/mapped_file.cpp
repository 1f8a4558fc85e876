#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <tuple>

#include "core/error.h"
#include "core/page_buffer.h"

namespace specdec::io {

namespace {

std::atomic<Residency> g_default{Residency::HugePageCopy};

// THP "never" gives no huge page to anyone: copying would only cost memory.
bool huge_pages_possible() {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    if (!std::getline(f, line)) return false;
    return line.find("[never]") == std::string::npos;
}

size_t mem_available_bytes() {
    std::ifstream f("/proc/meminfo");
    std::string key;
    size_t kb = 0;
    std::string unit;
    while (f >> key >> kb) {
        std::getline(f, unit);
        if (key == "MemAvailable:") return kb << 10;
    }
    return 0;
}

// One copy per file per process: a self-speculation draft opens the target's
// own file a second time, and a second copy would double the RAM it needs.
using FileKey = std::tuple<dev_t, ino_t, off_t, long, long>;
std::mutex g_copies_mu;
std::map<FileKey, std::weak_ptr<const PageBuffer>> g_copies;

std::shared_ptr<const PageBuffer> read_copy(int fd, const std::string& path, size_t size) {
    auto buf = std::make_shared<PageBuffer>(size, "a model file's copy", PageBuffer::Pages::Huge);
    auto* dst = static_cast<uint8_t*>(buf->data());
    size_t off = 0;
    while (off < size) {
        const ssize_t n = ::pread(fd, dst + off, std::min<size_t>(size - off, size_t(64) << 20), (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        SPECDEC_CHECK(n > 0, "cannot read '", path, "' at byte ", off, " of ", size, ": ",
                      n < 0 ? std::strerror(errno) : "the file ended early");
        off += (size_t)n;
    }
    return buf;
}

}  // namespace

void set_default_residency(Residency r) { g_default.store(r); }
Residency default_residency() { return g_default.load(); }

MappedFile::MappedFile(const std::string& path) : MappedFile(path, default_residency()) {}

MappedFile::MappedFile(const std::string& path, Residency residency) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    SPECDEC_CHECK(fd >= 0, "cannot open '", path, "': ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        throw Error(detail::concat("cannot stat '", path, "': ", std::strerror(e)));
    }
    if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        throw Error(detail::concat("'", path, "' is a directory, not a model file"));
    }
    size_ = (size_t)st.st_size;
    if (size_ == 0) {
        ::close(fd);
        return;
    }
    const bool copy = residency == Residency::HugePageCopy && S_ISREG(st.st_mode) && huge_pages_possible() &&
                      (double)size_ <= 0.8 * (double)mem_available_bytes();
    if (copy) {
        try {
            const FileKey key{st.st_dev, st.st_ino, st.st_size, (long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
            std::lock_guard<std::mutex> lock(g_copies_mu);
            copy_ = g_copies[key].lock();
            if (!copy_) {
                copy_ = read_copy(fd, path, size_);
                std::erase_if(g_copies, [](const auto& kv) { return kv.second.expired(); });
                g_copies[key] = copy_;
            }
        } catch (...) {
            ::close(fd);
            throw;
        }
        ::close(fd);
        data_ = static_cast<const uint8_t*>(copy_->data());
        return;
    }
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        const int e = errno;
        ::close(fd);
        throw Error(detail::concat("cannot mmap '", path, "': ", std::strerror(e)));
    }
    data_ = static_cast<const uint8_t*>(p);
    ::close(fd);
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& o) noexcept : data_(o.data_), size_(o.size_), copy_(std::move(o.copy_)) {
    o.data_ = nullptr;
    o.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
    if (this != &o) {
        release();
        data_ = o.data_;
        size_ = o.size_;
        copy_ = std::move(o.copy_);
        o.data_ = nullptr;
        o.size_ = 0;
    }
    return *this;
}

void MappedFile::release() {
    if (copy_) copy_.reset();
    else if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
}

}  // namespace specdec::io
