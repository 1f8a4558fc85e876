#include "runtime/draft_source.h"

#include "bench/self_spec_calibration.h"
#include "model/layer_list.h"

namespace specdec::runtime {

DraftLayers resolve_draft_layers(const std::string& spec, const std::string& model_path) {
    DraftLayers d;
    if (spec == "auto") {
        const bench::SelfSpecChoice c = bench::load_selfspec_choice(model_path);
        d.use_ar = c.use_ar;
        d.keep_layers = c.layers;
    } else {
        d.keep_layers = model::parse_layer_list(spec);
    }
    return d;
}

}  // namespace specdec::runtime
