// io::MappedFile: both residencies give the file's bytes; a copied file is
// shared by the process's opens of it and outlives a moved-from handle; a
// missing file, a directory and an empty file are handled as before.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/page_buffer.h"
#include "io/mapped_file.h"

using specdec::Error;
using specdec::PageBuffer;
using specdec::io::MappedFile;
using specdec::io::Residency;

namespace {

struct TempFile {
    std::string path;
    explicit TempFile(const std::vector<uint8_t>& bytes) {
        path = ::testing::TempDir() + "mapped_file_" + std::to_string(::getpid()) + "_" +
               std::to_string(std::random_device{}()) + ".bin";
        std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), (std::streamsize)bytes.size());
    }
    ~TempFile() { std::remove(path.c_str()); }
};

std::vector<uint8_t> random_bytes(size_t n) {
    std::mt19937 rng(7);
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = (uint8_t)rng();
    return v;
}

}  // namespace

TEST(MappedFile, BothResidenciesHoldTheFilesBytes) {
    // Larger than one huge page and not a multiple of any page size.
    const auto bytes = random_bytes((size_t(5) << 20) + 12345);
    TempFile f(bytes);
    for (Residency r : {Residency::Map, Residency::HugePageCopy}) {
        MappedFile m(f.path, r);
        ASSERT_EQ(m.size(), bytes.size());
        EXPECT_EQ(0, std::memcmp(m.data(), bytes.data(), bytes.size()));
        if (r == Residency::Map) {
            EXPECT_EQ(m.residency(), Residency::Map);
        }
    }
}

TEST(MappedFile, ACopyIsSharedWithinTheProcessAndOutlivesAMove) {
    const auto bytes = random_bytes(size_t(3) << 20);
    TempFile f(bytes);
    MappedFile a(f.path, Residency::HugePageCopy);
    if (a.residency() != Residency::HugePageCopy) {  // THP "never" here: the fallback maps the file
        EXPECT_EQ(0, std::memcmp(a.data(), bytes.data(), bytes.size()));
        return;
    }
    MappedFile b(f.path, Residency::HugePageCopy);
    EXPECT_EQ(a.data(), b.data());  // one copy, not two
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % (size_t(2) << 20), 0u);  // huge-page aligned
    MappedFile c(std::move(a));
    a = MappedFile();
    EXPECT_EQ(0, std::memcmp(c.data(), bytes.data(), bytes.size()));
    b = MappedFile();
    EXPECT_EQ(0, std::memcmp(c.data(), bytes.data(), bytes.size()));
    // After every handle is gone the next open reads the file again.
    c = MappedFile();
    MappedFile d(f.path, Residency::HugePageCopy);
    EXPECT_EQ(0, std::memcmp(d.data(), bytes.data(), bytes.size()));
}

TEST(MappedFile, TheDefaultResidencyIsACopyAndCanBeSetToMap) {
    EXPECT_EQ(specdec::io::default_residency(), Residency::HugePageCopy);
    const auto bytes = random_bytes(4096);
    TempFile f(bytes);
    specdec::io::set_default_residency(Residency::Map);
    MappedFile m(f.path);
    EXPECT_EQ(m.residency(), Residency::Map);
    specdec::io::set_default_residency(Residency::HugePageCopy);
    EXPECT_EQ(0, std::memcmp(m.data(), bytes.data(), bytes.size()));
}

TEST(MappedFile, MissingDirectoryAndEmptyFiles) {
    for (Residency r : {Residency::Map, Residency::HugePageCopy}) {
        EXPECT_THROW(MappedFile("/nonexistent/model.gguf", r), Error);
        try {
            MappedFile d(::testing::TempDir(), r);
            FAIL() << "a directory opened";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos);
        }
        TempFile empty(std::vector<uint8_t>{});
        MappedFile m(empty.path, r);
        EXPECT_EQ(m.size(), 0u);
        EXPECT_EQ(m.data(), nullptr);
    }
}

TEST(PageBuffer, HugeBuffersAreAlignedZeroedAndWritable) {
    PageBuffer b(size_t(3) << 20, "test", PageBuffer::Pages::Huge);
    ASSERT_NE(b.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % (size_t(2) << 20), 0u);
    auto* p = static_cast<uint8_t*>(b.data());
    EXPECT_EQ(p[0], 0);
    EXPECT_EQ(p[b.bytes() - 1], 0);
    p[b.bytes() - 1] = 7;
    PageBuffer moved(std::move(b));
    EXPECT_EQ(static_cast<uint8_t*>(moved.data())[moved.bytes() - 1], 7);
}
