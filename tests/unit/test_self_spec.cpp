// Layer-skipping self-speculation without real models: the layer-list syntax
// and its errors, what a layer-limited transformer computes (a prefix list is
// the old first-L limit, the full list is the model itself, skipped layers
// really leave the residual stream), KV for kept layers only, the default
// calibration candidates, and the errors of --draft-layers auto.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "bench/self_spec_calibration.h"
#include "runtime/draft_source.h"
#include "core/error.h"
#include "model/layer_list.h"
#include "unit/spec_test_support.h"

using namespace specdec;

namespace {

std::vector<float> last_logits(model::Transformer& m, const std::vector<int32_t>& prompt) {
    ThreadPool pool(1);
    kv::KvCache cache(m.kv_options(32, 1));
    model::ForwardBatch b;
    model::ForwardResult r;
    b.add_chain(prompt, 0, 0, false);
    m.forward(b, cache, pool, r);
    return std::vector<float>(r.row_logits(0), r.row_logits(0) + r.n_vocab);
}

test::SyntheticModelSpec four_layers() {
    test::SyntheticModelSpec s;
    s.n_layer = 4;
    s.n_vocab = 32;
    return s;
}

}  // namespace

TEST(SelfSpecLayerList, CountAndRanges) {
    EXPECT_EQ(model::parse_layer_list("3"), (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(model::parse_layer_list("0-3,7,9-10"), (std::vector<int>{0, 1, 2, 3, 7, 9, 10}));
    EXPECT_EQ(model::parse_layer_list("5-5"), (std::vector<int>{5}));
    EXPECT_EQ(model::parse_layer_list("2,4"), (std::vector<int>{2, 4}));
    EXPECT_EQ(model::format_layer_list({0, 1, 2, 3, 7, 9, 10}), "0-3,7,9-10");
    EXPECT_EQ(model::format_layer_list({4}), "4");
    for (const char* s : {"0-7,10,12", "0-29", "3,5,7-9"})
        EXPECT_EQ(model::format_layer_list(model::parse_layer_list(s)), s);
}

TEST(SelfSpecLayerList, MalformedListsAreClearErrors) {
    for (const char* bad : {"", "0", "x", "-3", "3-", "1,,2", "2,1", "0-3,3", "5-2", "1.5", "0-3,", " 1", "9999999"}) {
        try {
            model::parse_layer_list(bad);
            ADD_FAILURE() << "'" << bad << "' was accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("layer"), std::string::npos) << e.what();
        }
    }
}

TEST(SelfSpecLayerList, ValidatedAgainstTheModel) {
    EXPECT_NO_THROW(model::validate_layer_list({0, 1, 29}, 30, "m"));
    EXPECT_THROW(model::validate_layer_list({0, 30}, 30, "m"), Error);
    EXPECT_THROW(model::validate_layer_list({}, 30, "m"), Error);
    EXPECT_THROW(model::validate_layer_list({3, 2}, 30, "m"), Error);
    const auto bytes = test::synthetic_model_gguf(four_layers());
    auto file = io::GgufFile::parse(bytes.data(), bytes.size(), "synthetic");
    try {
        model::Transformer t(*file, std::vector<int>{0, 4});
        ADD_FAILURE() << "layer 4 of a 4-layer model was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("has 4 layers"), std::string::npos) << e.what();
    }
}

TEST(SelfSpecTransformer, LayerListsComputeWhatTheySay) {
    const auto bytes = test::synthetic_model_gguf(four_layers());
    auto file = io::GgufFile::parse(bytes.data(), bytes.size(), "synthetic");
    const std::vector<int32_t> prompt{1, 5, 9, 3, 7};
    model::Transformer full(*file), all(*file, std::vector<int>{0, 1, 2, 3});
    model::Transformer first2(*file, 2), prefix2(*file, std::vector<int>{0, 1});
    model::Transformer skip(*file, std::vector<int>{0, 2, 3}), skip_other(*file, std::vector<int>{0, 1, 3});
    EXPECT_EQ(last_logits(full, prompt), last_logits(all, prompt));
    EXPECT_EQ(last_logits(first2, prompt), last_logits(prefix2, prompt));
    EXPECT_NE(last_logits(skip, prompt), last_logits(full, prompt));
    EXPECT_NE(last_logits(skip, prompt), last_logits(skip_other, prompt));
    // KV only for the kept layers.
    EXPECT_EQ(skip.kv_options(16, 1).n_layer, 3);
    EXPECT_EQ(skip.layers_run(), (std::vector<int>{0, 2, 3}));
    EXPECT_EQ(full.kv_options(16, 1).n_layer, 4);
    // A cache sized for another depth is refused, not misread.
    ThreadPool pool(1);
    kv::KvCache wrong(full.kv_options(16, 1));
    model::ForwardBatch b;
    model::ForwardResult r;
    b.add(1, 0, 0, -1, true);
    EXPECT_THROW(skip.forward(b, wrong, pool, r), Error);
}

TEST(SelfSpecCalibration, DefaultCandidatesArePrefixesAndMiddleSkips) {
    const auto c = bench::default_candidates(30);
    ASSERT_FALSE(c.empty());
    for (const auto& v : c) {
        EXPECT_NO_THROW(model::validate_layer_list(v, 30, "m"));
        EXPECT_LT((int)v.size(), 30);
    }
    EXPECT_EQ(c[0], model::first_layers(15));
    EXPECT_EQ(c[3], model::first_layers(29));
    bool middle_skip = false;
    for (const auto& v : c) middle_skip = middle_skip || v.back() == 29;
    EXPECT_TRUE(middle_skip);
    // Tiny models still get a valid (possibly short) list.
    for (int n : {1, 2, 3, 4}) {
        for (const auto& v : bench::default_candidates(n)) EXPECT_NO_THROW(model::validate_layer_list(v, n, "m"));
    }
}

TEST(SelfSpecCalibration, AutoNeedsAMatchingCalibrationFile) {
    const auto dir = std::filesystem::temp_directory_path() / ("selfspec_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string model = (dir / "m.gguf").string();
    std::ofstream(model) << "0123456789";
    auto expect_error = [&](const char* needle) {
        try {
            runtime::load_selfspec_choice(model);
            ADD_FAILURE() << "accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    expect_error("specdec calibrate");  // missing
    std::ofstream(runtime::selfspec_path(model)) << "{not json";
    expect_error("not a calibration file");
    std::ofstream(runtime::selfspec_path(model)) << R"({"model_size": 3, "choice": {"draft_layers": "4"}})";
    expect_error("different file");
    std::ofstream(runtime::selfspec_path(model))
        << R"({"model_size": 10, "choice": {"draft_layers": "0-3,9", "method": "chain", "speedup": 1.2}})";
    auto c = runtime::load_selfspec_choice(model);
    EXPECT_FALSE(c.use_ar);
    EXPECT_EQ(c.layers, (std::vector<int>{0, 1, 2, 3, 9}));
    EXPECT_EQ(c.method, "chain");
    std::ofstream(runtime::selfspec_path(model)) << R"({"model_size": 10, "choice": {"draft_layers": "ar"}})";
    c = runtime::load_selfspec_choice(model);
    EXPECT_TRUE(c.use_ar);
    EXPECT_TRUE(c.layers.empty());
    std::filesystem::remove_all(dir);
}
