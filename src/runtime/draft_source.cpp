#include "runtime/draft_source.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/layer_list.h"

namespace specdec::runtime {

std::string selfspec_path(const std::string& model_path) { return model_path + ".selfspec.json"; }

SelfSpecChoice load_selfspec_choice(const std::string& model_path) {
    const std::string path = selfspec_path(model_path);
    std::ifstream in(path);
    SPECDEC_CHECK(in.good(), "--draft-layers auto: no calibration for this model (", path,
                  " is missing); run: specdec calibrate -m ", model_path);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    SPECDEC_CHECK(!j.is_discarded() && j.is_object() && j.contains("choice") && j["choice"].is_object() &&
                      j["choice"].contains("draft_layers") && j["choice"]["draft_layers"].is_string(),
                  "--draft-layers auto: ", path, " is not a calibration file; rerun specdec calibrate -m ",
                  model_path);
    // The size is checked on every use (hashing a large model each time would cost seconds).
    SPECDEC_CHECK(j.value("model_size", (uint64_t)0) == (uint64_t)std::filesystem::file_size(model_path), "--draft-layers auto: ", path,
                  " was made for a different file (size differs); rerun specdec calibrate -m ", model_path);
    SelfSpecChoice c;
    const std::string layers = j["choice"]["draft_layers"];
    c.method = j["choice"].value("method", "");
    c.speedup = j["choice"].value("speedup", 0.0);
    if (layers == "ar") {
        c.use_ar = true;
    } else {
        c.layers = model::parse_layer_list(layers);
    }
    return c;
}


DraftLayers resolve_draft_layers(const std::string& spec, const std::string& model_path) {
    DraftLayers d;
    if (spec == "auto") {
        const SelfSpecChoice c = load_selfspec_choice(model_path);
        d.use_ar = c.use_ar;
        d.keep_layers = c.layers;
    } else {
        d.keep_layers = model::parse_layer_list(spec);
    }
    return d;
}

}  // namespace specdec::runtime
