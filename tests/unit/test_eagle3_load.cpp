// The safetensors reader (every header field checked, every truncation and a
// set of corruptions refused with an Error, never a crash) and the EAGLE-3
// head loader (both released layouts; each refusal names what does not fit).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/eagle3_head.h"
#include "unit/eagle3_test_support.h"

using namespace specdec;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> small_file() {
    return test::safetensors_bytes({test::st_f32("a", {2, 3}, {1, 2, 3, 4, 5, 6}), test::st_i64("b", {7, -8}),
                                    test::st_bool("c", {1, 0, 1})});
}

// Rebuilds a file from a header string and data bytes.
std::vector<uint8_t> with_header(const std::string& header, size_t data_bytes) {
    std::vector<uint8_t> out(8);
    for (int i = 0; i < 8; ++i) out[i] = (uint8_t)((uint64_t)header.size() >> (8 * i));
    out.insert(out.end(), header.begin(), header.end());
    out.resize(out.size() + data_bytes, 0);
    return out;
}

std::string error_of(const std::vector<uint8_t>& b) {
    try {
        io::SafetensorsFile::parse(b.data(), b.size(), "t.safetensors");
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

struct TempDir {
    std::string path;
    explicit TempDir(const std::string& name) {
        path = (fs::temp_directory_path() / ("specdec_eagle3_" + name + "_" + std::to_string(::getpid()))).string();
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() { fs::remove_all(path); }
};

std::string load_error(const std::string& dir, const model::Eagle3Target& t) {
    try {
        model::Eagle3Head::load(dir, t);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

const model::Eagle3Target kTarget{"target.gguf", 8, 32, 64};

}  // namespace

TEST(Safetensors, ReadsTensors) {
    const auto b = small_file();
    auto f = io::SafetensorsFile::parse(b.data(), b.size(), "t");
    ASSERT_EQ(f->tensors().size(), 3u);
    const io::StTensor& a = f->get("a");
    EXPECT_EQ(a.dtype, io::StDtype::F32);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
    float v[6];
    std::memcpy(v, a.data, sizeof v);
    EXPECT_EQ(v[5], 6.0f);
    int64_t bv[2];
    std::memcpy(bv, f->get("b").data, sizeof bv);
    EXPECT_EQ(bv[1], -8);
    EXPECT_EQ(f->metadata().at("format"), "pt");
    EXPECT_THROW(f->get("zz"), Error);
}

TEST(Safetensors, EveryTruncationIsAnError) {
    const auto b = small_file();
    for (size_t n = 0; n < b.size(); ++n) {
        std::vector<uint8_t> t(b.begin(), b.begin() + (long)n);
        EXPECT_NE(error_of(t), "") << "truncated to " << n << " bytes";
    }
}

TEST(Safetensors, CorruptHeadersAreErrors) {
    const std::vector<std::pair<std::string, std::string>> cases{
        {"{not json", "not valid JSON"},
        {"[1,2]", "not a JSON object"},
        {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "need 8"},
        {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,80]}})", "spans bytes"},
        {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", "spans bytes"},
        {R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", "unsupported dtype"},
        {R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", "non-negative"},
        {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", "data_offsets"},
        {R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", "shape"},
        {R"({"a":{"shape":[2],"data_offsets":[0,8]}})", "dtype"},
        {R"({"a":5})", "not an object"},
        {R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", "larger than"},
        {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
         "overlap"},
        {R"({"__metadata__":{"k":1}})", "not a string"},
    };
    for (const auto& [h, want] : cases) {
        const std::string e = error_of(with_header(h, 16));
        EXPECT_NE(e.find(want), std::string::npos) << h << " -> " << e;
        EXPECT_NE(e.find("t.safetensors"), std::string::npos) << e;
    }
    // A header length past the end of the file, and an absurd one.
    std::vector<uint8_t> b = small_file();
    b[0] = 0xff;
    b[1] = 0xff;
    EXPECT_NE(error_of(b).find("truncated"), std::string::npos);
    b[7] = 0x7f;
    EXPECT_NE(error_of(b).find("not plausible"), std::string::npos);
}

TEST(Eagle3Load, HuggingFaceLayout) {
    TempDir d("hf");
    test::write_eagle3_head(d.path, {});
    auto h = model::Eagle3Head::load(d.path, kTarget);
    EXPECT_EQ(h->config().format, "hf");
    EXPECT_EQ(h->config().feature_layers, (std::vector<int>{2, 4, 5}));  // 2, L/2, L-3 for L = 8
    EXPECT_EQ(h->config().draft_vocab, 48);
    ASSERT_EQ(h->draft_to_target().size(), 48u);
    EXPECT_EQ(h->draft_to_target()[0], 0);
    EXPECT_EQ(h->draft_to_target()[1], 1);
    EXPECT_EQ(h->draft_to_target()[47], 62);  // 0..31, then the even ids 32..62
    // The safetensors file or config.json given instead of the directory.
    EXPECT_NO_THROW(model::Eagle3Head::load(d.path + "/model.safetensors", kTarget));
}

TEST(Eagle3Load, SpeculatorsLayout) {
    TempDir d("spec");
    test::HeadSpec s;
    s.format = "speculators";
    s.layer_ids = {1, 3, 7};
    test::write_eagle3_head(d.path, s);
    auto h = model::Eagle3Head::load(d.path, kTarget);
    EXPECT_EQ(h->config().format, "speculators");
    EXPECT_EQ(h->config().feature_layers, (std::vector<int>{1, 3, 7}));
    s.layer_ids = {1, 3, 9};
    test::write_eagle3_head(d.path, s);
    const std::string e = load_error(d.path, kTarget);
    EXPECT_NE(e.find("reads target layer 9"), std::string::npos) << e;
}

TEST(Eagle3Load, RefusesPickleWithConversionHint) {
    TempDir d("pickle");
    std::ofstream(d.path + "/pytorch_model.bin") << "not really a pickle";
    std::ofstream(d.path + "/config.json") << "{}";
    for (const std::string& p : {d.path, d.path + "/pytorch_model.bin"}) {
        const std::string e = load_error(p, kTarget);
        EXPECT_NE(e.find("pickle"), std::string::npos) << e;
        EXPECT_NE(e.find("save_file"), std::string::npos) << e;
        EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
    }
}

TEST(Eagle3Load, RefusesHeadThatDoesNotFitTarget) {
    TempDir d("fit");
    test::write_eagle3_head(d.path, {});
    // Target hidden size 48: the head reads features of 32 and embeds with 48.
    std::string e = load_error(d.path, {"t48.gguf", 8, 48, 64});
    EXPECT_NE(e.find("32"), std::string::npos) << e;
    EXPECT_NE(e.find("48"), std::string::npos) << e;
    EXPECT_NE(e.find("t48.gguf"), std::string::npos) << e;
    EXPECT_NE(e.find("hidden size"), std::string::npos) << e;
    // Vocabulary 100 against the head's 64.
    e = load_error(d.path, {"v100.gguf", 8, 32, 100});
    EXPECT_NE(e.find("vocabulary of 64"), std::string::npos) << e;
    EXPECT_NE(e.find("has 100"), std::string::npos) << e;
    // Feature width differs from the head's own width (target_hidden_size 40).
    test::HeadSpec s;
    s.target_hidden = 40;
    test::write_eagle3_head(d.path, s);
    e = load_error(d.path, kTarget);
    EXPECT_NE(e.find("features of width 40"), std::string::npos) << e;
    EXPECT_NE(e.find("hidden size 32"), std::string::npos) << e;
    // Too few target layers for the default (2, L/2, L-3).
    e = load_error(d.path, {"tiny.gguf", 2, 32, 64});
    EXPECT_NE(e.find("at least 4"), std::string::npos) << e;
}

TEST(Eagle3Load, RefusesBadConfigsAndTensors) {
    TempDir d("bad");
    test::write_eagle3_head(d.path, {});
    auto cfg = [&] {
        std::ifstream in(d.path + "/config.json");
        return nlohmann::json::parse(in);
    };
    auto put = [&](const nlohmann::json& j) { std::ofstream(d.path + "/config.json") << j.dump(); };
    nlohmann::json good = cfg();
    nlohmann::json j = good;
    j["architectures"] = {"LlamaForCausalLM"};
    put(j);
    EXPECT_NE(load_error(d.path, kTarget).find("not LlamaForCausalLMEagle3"), std::string::npos);
    j = good;
    j["hidden_act"] = "gelu";
    put(j);
    EXPECT_NE(load_error(d.path, kTarget).find("silu"), std::string::npos);
    j = good;
    j["rope_scaling"] = {{"rope_type", "llama3"}};
    put(j);
    EXPECT_NE(load_error(d.path, kTarget).find("rope_scaling"), std::string::npos);
    j = good;
    j["speculators_model_type"] = "medusa";
    put(j);
    EXPECT_NE(load_error(d.path, kTarget).find("not \"eagle3\""), std::string::npos);
    j = good;
    j["intermediate_size"] = 50;  // the tensors say 48
    put(j);
    EXPECT_NE(load_error(d.path, kTarget).find("expected [50, 32]"), std::string::npos);
    j = good;
    j.erase("hidden_size");
    put(j);
    EXPECT_NE(load_error(d.path, kTarget).find("hidden_size"), std::string::npos);
    std::ofstream(d.path + "/config.json") << "{oops";
    EXPECT_NE(load_error(d.path, kTarget).find("not a JSON object"), std::string::npos);
    put(good);
    fs::remove(d.path + "/model.safetensors");
    EXPECT_NE(load_error(d.path, kTarget).find("no model.safetensors"), std::string::npos);
    EXPECT_NE(load_error(d.path + "/nowhere", kTarget).find("does not exist"), std::string::npos);
}

TEST(Eagle3Load, TruncatedWeightsAreErrors) {
    TempDir d("trunc");
    test::write_eagle3_head(d.path, {});
    std::ifstream in(d.path + "/model.safetensors", std::ios::binary);
    std::vector<char> all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t n : {size_t(0), size_t(7), size_t(100), all.size() / 2, all.size() - 1}) {
        std::ofstream(d.path + "/model.safetensors", std::ios::binary).write(all.data(), (std::streamsize)n);
        EXPECT_NE(load_error(d.path, kTarget), "") << n;
    }
}
