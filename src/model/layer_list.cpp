#include "model/layer_list.h"

#include <cctype>
#include <cstdlib>
#include <numeric>

#include "core/error.h"

namespace specdec::model {
namespace {

// A non-negative decimal integer spanning all of `s`.
int parse_index(const std::string& s, const std::string& spec) {
    SPECDEC_CHECK(!s.empty() && s.size() <= 6, "layer list '", spec, "': '", s, "' is not a layer number");
    for (char c : s)
        SPECDEC_CHECK(std::isdigit((unsigned char)c), "layer list '", spec, "': '", s, "' is not a layer number");
    return std::atoi(s.c_str());
}

}  // namespace

std::vector<int> first_layers(int n) {
    std::vector<int> v(n > 0 ? n : 0);
    std::iota(v.begin(), v.end(), 0);
    return v;
}

std::vector<int> parse_layer_list(const std::string& spec) {
    SPECDEC_CHECK(!spec.empty(), "empty layer list (give a count L or layers such as 0-7,10)");
    if (spec.find_first_of(",-") == std::string::npos) {
        const int n = parse_index(spec, spec);
        SPECDEC_CHECK(n >= 1, "layer list '", spec, "': a draft needs at least one layer");
        return first_layers(n);
    }
    std::vector<int> out;
    size_t at = 0;
    while (true) {
        const size_t comma = spec.find(',', at);
        const std::string item = spec.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        SPECDEC_CHECK(!item.empty(), "layer list '", spec, "': empty entry");
        const size_t dash = item.find('-');
        int lo, hi;
        if (dash == std::string::npos) {
            lo = hi = parse_index(item, spec);
        } else {
            lo = parse_index(item.substr(0, dash), spec);
            hi = parse_index(item.substr(dash + 1), spec);
            SPECDEC_CHECK(lo <= hi, "layer list '", spec, "': range '", item, "' runs backwards");
        }
        SPECDEC_CHECK(out.empty() || lo > out.back(), "layer list '", spec, "': layer ", lo,
                      " repeats or comes after a higher layer (layers must be ascending, each once)");
        for (int l = lo; l <= hi; ++l) out.push_back(l);
        if (comma == std::string::npos) break;
        at = comma + 1;
    }
    return out;
}

void validate_layer_list(const std::vector<int>& layers, int n_layer, const std::string& model_name) {
    SPECDEC_CHECK(!layers.empty(), "model '", model_name, "': a draft needs at least one layer");
    for (size_t i = 0; i < layers.size(); ++i) {
        SPECDEC_CHECK(layers[i] >= 0 && layers[i] < n_layer, "model '", model_name, "' has ", n_layer,
                      " layers (0-", n_layer - 1, "); cannot keep layer ", layers[i]);
        SPECDEC_CHECK(i == 0 || layers[i] > layers[i - 1], "model '", model_name,
                      "': kept layers must be ascending, each once (", format_layer_list(layers), ")");
    }
}

std::string format_layer_list(const std::vector<int>& layers) {
    std::string s;
    for (size_t i = 0; i < layers.size();) {
        size_t j = i;
        while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
        if (!s.empty()) s += ',';
        s += std::to_string(layers[i]);
        if (j > i) s += '-' + std::to_string(layers[j]);
        i = j + 1;
    }
    return s;
}

}  // namespace specdec::model
