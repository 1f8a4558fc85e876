// What `--draft-layers` asks for (self-speculation: the draft is a shallow copy
// of the target), resolved the same way by every command that takes it.
#pragma once

#include <string>
#include <vector>

namespace specdec::runtime {

struct DraftLayers {
    // The target's layers the draft runs, for EngineOptions::keep_layers
    // (checked against the model when the draft loads). Empty with use_ar.
    std::vector<int> keep_layers;
    // `auto` only: calibration found no depth faster than AR, so there is no
    // draft; a command that defaults to a draft method falls back to ar.
    bool use_ar = false;
};

// `spec`: "L" (the first L layers), a list such as "0-7,10,12"
// (model/layer_list.h), or "auto" (the choice `specdec calibrate` saved next
// to `model_path`). Throws specdec::Error on malformed input or a missing
// calibration file.
DraftLayers resolve_draft_layers(const std::string& spec, const std::string& model_path);

}  // namespace specdec::runtime
