#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "io/gguf.h"
#include "unit/gguf_writer.h"

using specdec::Error;
using specdec::io::GgufFile;
using specdec::test::GgufWriter;
using specdec::test::sample_writer;

TEST(Gguf, ParsesEveryValueTypeV3AndV2) {
    for (uint32_t version : {2u, 3u}) {
        const auto bytes = sample_writer(version).bytes();
        auto f = GgufFile::parse(bytes.data(), bytes.size(), "mem");
        EXPECT_EQ(f->version(), version);
        EXPECT_EQ(f->get_string("general.architecture"), "llama");
        EXPECT_EQ(f->get_int("llama.block_count"), 2);
        EXPECT_FLOAT_EQ((float)f->get_float("llama.rope.freq_base"), 10000.0f);
        EXPECT_TRUE(f->get_bool("tokenizer.ggml.add_bos_token"));
        EXPECT_EQ(f->get_int("big"), 1ll << 40);
        EXPECT_DOUBLE_EQ(f->get_float("pi"), 3.25);
        EXPECT_EQ(f->get_int("neg"), -7);
        EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 3u);
        EXPECT_EQ(f->get_float_array("tokenizer.ggml.scores")[1], -1.0);
        EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type")[2], 3);
        EXPECT_EQ(f->get_int("missing", 42), 42);
        ASSERT_EQ(f->tensors().size(), 2u);
        const auto& t0 = f->tensor("t0");
        EXPECT_EQ(t0.n_elements(), 8);
        EXPECT_EQ(t0.n_bytes, 32u);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(t0.data) % 32, reinterpret_cast<uintptr_t>(bytes.data()) % 32);
        float x;
        std::memcpy(&x, f->tensor("t1").data + 8, 4);
        EXPECT_EQ(x, 3.0f);
    }
}

TEST(Gguf, TypeMismatchAndMissingKeysAreClearErrors) {
    const auto bytes = sample_writer().bytes();
    auto f = GgufFile::parse(bytes.data(), bytes.size(), "mem.gguf");
    try {
        f->get_int("general.architecture");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("general.architecture"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("mem.gguf"), std::string::npos);
    }
    EXPECT_THROW(f->get_string("nope"), Error);
    EXPECT_THROW(f->tensor("nope"), Error);
}

TEST(Gguf, EveryTruncationIsAnError) {
    const auto bytes = sample_writer().bytes();
    for (size_t n = 0; n < bytes.size(); ++n) {
        EXPECT_THROW(GgufFile::parse(bytes.data(), n, "trunc"), Error) << "size " << n;
    }
}

TEST(Gguf, BadMagicVersionAndMissingFile) {
    auto bytes = sample_writer().bytes();
    auto bad = bytes;
    bad[0] = 'X';
    EXPECT_THROW(GgufFile::parse(bad.data(), bad.size(), "m"), Error);
    bad = bytes;
    bad[4] = 1;  // version 1
    EXPECT_THROW(GgufFile::parse(bad.data(), bad.size(), "m"), Error);
    bad[4] = 9;
    EXPECT_THROW(GgufFile::parse(bad.data(), bad.size(), "m"), Error);
    EXPECT_THROW(GgufFile::open("/nonexistent/model.gguf"), Error);
    EXPECT_THROW(GgufFile::open("/"), Error);
}

// Random byte flips and splices must either parse or throw Error; never crash,
// hang or read outside the buffer (the sanitizer build checks the latter).
TEST(Gguf, FuzzRandomCorruptions) {
    const auto good = sample_writer().bytes();
    std::mt19937 rng(1234);
    int parsed = 0, rejected = 0;
    for (int iter = 0; iter < 20000; ++iter) {
        auto b = good;
        const int n_flips = 1 + (int)(rng() % 4);
        for (int k = 0; k < n_flips; ++k) {
            const size_t pos = rng() % b.size();
            switch (rng() % 3) {
                case 0: b[pos] = (uint8_t)rng(); break;
                case 1: b[pos] ^= (uint8_t)(1u << (rng() % 8)); break;
                default: b[pos] = (rng() % 2) ? 0xff : 0x00; break;
            }
        }
        if (rng() % 4 == 0) b.resize(rng() % b.size());
        // Copy to an exact-size heap buffer so ASan sees any overread.
        std::vector<uint8_t> exact(b.begin(), b.end());
        try {
            auto f = GgufFile::parse(exact.data(), exact.size(), "fuzz");
            for (const auto& t : f->tensors()) {
                ASSERT_GE(t.data, exact.data());
                ASSERT_LE(t.data + t.n_bytes, exact.data() + exact.size());
            }
            ++parsed;
        } catch (const Error&) {
            ++rejected;
        }
    }
    EXPECT_GT(rejected, 1000);
    EXPECT_GT(parsed, 10);
}

TEST(Gguf, ReleasedLargeArraysFailLoudlySmallOnesStay) {
    GgufWriter w = sample_writer();
    w.kv_str_array("tokenizer.ggml.merges", std::vector<std::string>(5000, "a b"));
    w.kv_i32_array("many", std::vector<int32_t>(4096, 1));
    const auto bytes = w.bytes();
    auto f = GgufFile::parse(bytes.data(), bytes.size(), "mem.gguf");
    ASSERT_EQ(f->get_string_array("tokenizer.ggml.merges").size(), 5000u);
    f->release_large_arrays(4096);
    // arrays at or over the bound are gone, and asking for one says so
    for (const char* key : {"tokenizer.ggml.merges", "many"}) {
        try {
            if (std::string(key) == "many") f->get_int_array(key);
            else f->get_string_array(key);
            FAIL() << key << " still readable";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("released"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
        }
    }
    // their lengths stay known (a second model instance reads the vocabulary size)
    EXPECT_EQ(f->array_length("tokenizer.ggml.merges"), 5000u);
    EXPECT_EQ(f->array_length("many"), 4096u);
    EXPECT_THROW(f->array_length("general.architecture"), Error);  // not an array
    EXPECT_THROW(f->array_length("missing"), Error);
    // smaller arrays and scalars are untouched
    EXPECT_EQ(f->array_length("tokenizer.ggml.tokens"), 3u);
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 3u);
    EXPECT_EQ(f->get_float_array("tokenizer.ggml.scores")[1], -1.0);
    EXPECT_EQ(f->get_string("general.architecture"), "llama");
}
