// The kernel choice file (kernels/kernel_choice_cache.h): what one process
// stores the next reads back exactly; a corrupt file, another key or a
// malformed entry is a miss (never a throw) and gets rewritten; the
// environment switches it off or moves it. Tested on its own because the
// calibration that writes it only runs on CPUs with two SIMD levels.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/kernel_choice_cache.h"

namespace fs = std::filesystem;
using namespace specdec;
using namespace specdec::kernels;

namespace {

// A fresh directory under gtest's temporary directory, removed afterwards.
struct TempDir {
    TempDir() {
        std::string tmpl = ::testing::TempDir() + "kcache-XXXXXX";
        const char* p = ::mkdtemp(tmpl.data());
        EXPECT_NE(p, nullptr);
        path = p ? p : "";
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string path;
};

// Sets (or unsets, for nullptr) an environment variable for one scope.
struct EnvGuard {
    EnvGuard(const char* name, const char* value) : name(name) {
        if (const char* old = std::getenv(name)) saved = old;
        if (value) ::setenv(name, value, 1);
        else ::unsetenv(name);
    }
    ~EnvGuard() {
        if (saved) ::setenv(name, saved->c_str(), 1);
        else ::unsetenv(name);
    }
    const char* name;
    std::optional<std::string> saved;
};

KernelCacheKey key_a() { return {"Test CPU 9000", "avx512", "0.1.0 Release GNU-13 kernels:0123456789abcdef"}; }

KernelChoiceReport sample(TensorType t, double scale) {
    KernelChoiceReport r;
    r.type = t;
    r.isa = {Isa::Avx2, Isa::Avx512, Isa::Avx512, Isa::Avx2, Isa::Avx512, Isa::Avx512};
    r.levels = {Isa::Avx2, Isa::Avx512};
    r.ns_per_row = {{0.41 * scale, 0.30, 0.22, 0.2, 0.1, 0.05}, {0.95 * scale, 0.25, 0.21, 0.3, 0.07, 0.031}};
    r.how = "measured";
    return r;
}

void expect_same(const KernelChoiceReport& got, const KernelChoiceReport& want) {
    EXPECT_EQ(got.type, want.type);
    EXPECT_EQ(got.isa, want.isa);
    EXPECT_EQ(got.levels, want.levels);
    ASSERT_EQ(got.ns_per_row.size(), want.ns_per_row.size());
    for (size_t i = 0; i < want.ns_per_row.size(); ++i) EXPECT_EQ(got.ns_per_row[i], want.ns_per_row[i]) << i;
    EXPECT_EQ(got.how, "cached");
}

size_t files_in(const std::string& dir) {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
    return n;
}

}  // namespace

TEST(KernelChoiceCache, RoundTripKeepsEveryType) {
    TempDir d;
    const std::string path = d.path + "/sub/kernel-choice.json";  // the directory is created
    EXPECT_FALSE(load_kernel_choice(path, key_a(), TensorType::Q4_K).has_value());
    const KernelChoiceReport q4k = sample(TensorType::Q4_K, 1.0), q6k = sample(TensorType::Q6_K, 2.0);
    ASSERT_TRUE(store_kernel_choice(path, key_a(), q4k));
    ASSERT_TRUE(store_kernel_choice(path, key_a(), q6k));
    auto a = load_kernel_choice(path, key_a(), TensorType::Q4_K);
    auto b = load_kernel_choice(path, key_a(), TensorType::Q6_K);
    ASSERT_TRUE(a && b);
    expect_same(*a, q4k);
    expect_same(*b, q6k);
    EXPECT_FALSE(load_kernel_choice(path, key_a(), TensorType::Q8_0).has_value());
    // Replacing a type's entry keeps the others; no temporary file is left behind.
    KernelChoiceReport q4k2 = sample(TensorType::Q4_K, 3.0);
    q4k2.isa.fill(Isa::Avx2);
    ASSERT_TRUE(store_kernel_choice(path, key_a(), q4k2));
    expect_same(*load_kernel_choice(path, key_a(), TensorType::Q4_K), q4k2);
    expect_same(*load_kernel_choice(path, key_a(), TensorType::Q6_K), q6k);
    EXPECT_EQ(files_in(d.path + "/sub"), 1u);
}

TEST(KernelChoiceCache, CorruptFileIsAMissAndRewritten) {
    TempDir d;
    const std::string path = d.path + "/kernel-choice.json";
    const KernelChoiceReport r = sample(TensorType::Q4_K, 1.0);
    for (const char* junk : {"{\"format\": 1, \"entries\": {\"Test CPU", "not json at all", "[1, 2, 3]", "",
                             "{\"format\": \"1\"}", "{\"format\": 1, \"entries\": []}"}) {
        std::ofstream(path) << junk;
        EXPECT_FALSE(load_kernel_choice(path, key_a(), TensorType::Q4_K).has_value()) << junk;
        ASSERT_TRUE(store_kernel_choice(path, key_a(), r)) << junk;
        expect_same(*load_kernel_choice(path, key_a(), TensorType::Q4_K), r);
    }
    // Valid JSON whose entry is malformed in each field: a miss, not a throw.
    ASSERT_TRUE(store_kernel_choice(path, key_a(), r));
    const nlohmann::json good = nlohmann::json::parse(std::ifstream(path));
    const std::string k = key_a().str();
    auto broken = [&](auto&& edit) {
        nlohmann::json j = good;
        edit(j["entries"][k]["types"]["Q4_K"]);
        std::ofstream(path) << j.dump();
        return !load_kernel_choice(path, key_a(), TensorType::Q4_K).has_value();
    };
    using J = nlohmann::json;
    EXPECT_TRUE(broken([](J& t) { t["isa"].erase(0); }));
    EXPECT_TRUE(broken([](J& t) { t["isa"][2] = "sse9"; }));
    EXPECT_TRUE(broken([](J& t) { t["isa"][2] = 2; }));
    EXPECT_TRUE(broken([](J& t) { t["levels"].push_back("avx2"); }));
    EXPECT_TRUE(broken([](J& t) { t["ns_per_row"][1][3] = "fast"; }));
    EXPECT_TRUE(broken([](J& t) { t["ns_per_row"][0].erase(5); }));
    EXPECT_TRUE(broken([](J& t) { t = J::array(); }));
    EXPECT_FALSE(broken([](J&) {}));  // the unedited file still loads
}

TEST(KernelChoiceCache, AnotherKeyIsAMissAndKeptBeside) {
    TempDir d;
    const std::string path = d.path + "/kernel-choice.json";
    const KernelChoiceReport r = sample(TensorType::Q4_K, 1.0);
    ASSERT_TRUE(store_kernel_choice(path, key_a(), r));
    KernelCacheKey other_cpu = key_a(), other_isa = key_a(), other_build = key_a();
    other_cpu.cpu = "Another CPU";
    other_isa.max_isa = "avx2";
    other_build.build += "-changed";
    for (const KernelCacheKey& k : {other_cpu, other_isa, other_build})
        EXPECT_FALSE(load_kernel_choice(path, k, TensorType::Q4_K).has_value()) << k.str();
    // An entry whose stored key parts disagree with the name it is filed under
    // (a collision of the joined string) is not ours either.
    {
        nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
        j["entries"][key_a().str()]["key"]["cpu"] = "Test CPU 9000|x";
        std::ofstream(path) << j.dump();
        EXPECT_FALSE(load_kernel_choice(path, key_a(), TensorType::Q4_K).has_value());
    }
    // Two keys' choices live side by side in one file.
    ASSERT_TRUE(store_kernel_choice(path, key_a(), r));
    const KernelChoiceReport r2 = sample(TensorType::Q4_K, 5.0);
    ASSERT_TRUE(store_kernel_choice(path, other_build, r2));
    expect_same(*load_kernel_choice(path, key_a(), TensorType::Q4_K), r);
    expect_same(*load_kernel_choice(path, other_build, TensorType::Q4_K), r2);
    // A file of another format version is a miss.
    nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
    j["format"] = 999;
    std::ofstream(path) << j.dump();
    EXPECT_FALSE(load_kernel_choice(path, key_a(), TensorType::Q4_K).has_value());
}

TEST(KernelChoiceCache, KeepsAtMostEightKeys) {
    TempDir d;
    const std::string path = d.path + "/kernel-choice.json";
    const KernelChoiceReport r = sample(TensorType::Q4_K, 1.0);
    for (int i = 0; i < 12; ++i) {
        KernelCacheKey k = key_a();
        k.build += "-" + std::to_string(i);
        ASSERT_TRUE(store_kernel_choice(path, k, r));
    }
    const nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
    EXPECT_EQ(j["entries"].size(), 8u);
    KernelCacheKey last = key_a();
    last.build += "-11";
    EXPECT_TRUE(load_kernel_choice(path, last, TensorType::Q4_K).has_value());  // the newest is kept
}

TEST(KernelChoiceCache, UnwritablePathIsNoError) {
    TempDir d;
    const std::string file = d.path + "/a-file";
    std::ofstream(file) << "x";
    // A directory where the file should go, and a path below a regular file.
    EXPECT_FALSE(store_kernel_choice(d.path, key_a(), sample(TensorType::Q4_K, 1.0)));
    EXPECT_FALSE(store_kernel_choice(file + "/kernel-choice.json", key_a(), sample(TensorType::Q4_K, 1.0)));
    EXPECT_FALSE(load_kernel_choice(d.path, key_a(), TensorType::Q4_K).has_value());
    EXPECT_EQ(files_in(d.path), 1u);  // no temporary file left
}

TEST(KernelChoiceCache, EnvironmentSwitchesOffOrMovesTheFile) {
    TempDir d;
    {
        EnvGuard e("SPECDEC_KERNEL_CACHE", "off");
        EnvGuard c("SPECDEC_CACHE_DIR", d.path.c_str());
        EXPECT_EQ(kernel_cache_path(), "");
    }
    {
        EnvGuard e("SPECDEC_KERNEL_CACHE", (d.path + "/mine.json").c_str());
        EXPECT_EQ(kernel_cache_path(), d.path + "/mine.json");
    }
    {
        EnvGuard e("SPECDEC_KERNEL_CACHE", nullptr);
        EnvGuard c("SPECDEC_CACHE_DIR", d.path.c_str());
        EXPECT_EQ(kernel_cache_path(), d.path + "/kernel-choice.json");
    }
    {
        EnvGuard e("SPECDEC_KERNEL_CACHE", nullptr);
        EnvGuard c("SPECDEC_CACHE_DIR", nullptr);
        EnvGuard x("XDG_CACHE_HOME", d.path.c_str());
        EXPECT_EQ(kernel_cache_path(), d.path + "/specdec/kernel-choice.json");
    }
    {
        EnvGuard e("SPECDEC_KERNEL_CACHE", nullptr);
        EnvGuard c("SPECDEC_CACHE_DIR", nullptr);
        EnvGuard x("XDG_CACHE_HOME", nullptr);
        EnvGuard h("HOME", d.path.c_str());
        EXPECT_EQ(kernel_cache_path(), d.path + "/.cache/specdec/kernel-choice.json");
    }
}

TEST(KernelChoiceCache, KeyNamesThisMachineAndBuild) {
    const KernelCacheKey k = kernel_cache_key();
    EXPECT_FALSE(k.cpu.empty());
    EXPECT_EQ(k.max_isa, isa_name(cpu_max_isa()));
    // The build id carries the kernel sources' hash (cmake/build_id.cmake).
    EXPECT_NE(k.build.find("kernels:"), std::string::npos) << k.build;
}
