// Which of a model's layers a shallow copy runs (layer-skipping
// self-speculation): "L" keeps the first L layers, "0-7,10,12" keeps exactly
// those layers (ascending, each once). The kept layers run in order, then the
// final norm and the LM head; skipped layers are left out of the residual
// stream entirely.
#pragma once

#include <string>
#include <vector>

namespace specdec::model {

// Parses the syntax only (indices are checked against a model by
// validate_layer_list). Throws specdec::Error with the offending text on
// malformed, empty, descending or repeated entries. A bare number is a count
// ("8" = layers 0..7); a single layer is written "5-5".
std::vector<int> parse_layer_list(const std::string& spec);

// Throws specdec::Error unless the list is non-empty, strictly ascending and
// every index is below n_layer.
void validate_layer_list(const std::vector<int>& layers, int n_layer, const std::string& model_name);

// Compact form: consecutive runs as ranges ("0-7,10,12").
std::string format_layer_list(const std::vector<int>& layers);

// 0..n-1.
std::vector<int> first_layers(int n);

}  // namespace specdec::model
