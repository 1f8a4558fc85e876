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

// <model path>.selfspec.json: where `specdec calibrate` saves its choice.
std::string selfspec_path(const std::string& model_path);

// The choice `specdec calibrate` saved, as --draft-layers auto uses it.
// Throws specdec::Error (naming the calibrate command) when the file is
// missing, unreadable or made for another file.
struct SelfSpecChoice {
    bool use_ar = false;         // calibration found no configuration faster than AR
    std::vector<int> layers;     // kept layers (empty when use_ar)
    std::string method;          // method it was calibrated with
    double speedup = 0;
};
SelfSpecChoice load_selfspec_choice(const std::string& model_path);

// `spec`: "L" (the first L layers), a list such as "0-7,10,12"
// (model/layer_list.h), or "auto" (the choice `specdec calibrate` saved next
// to `model_path`). Throws specdec::Error on malformed input or a missing
// calibration file.
DraftLayers resolve_draft_layers(const std::string& spec, const std::string& model_path);

}  // namespace specdec::runtime
