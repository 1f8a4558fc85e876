#include "bench/bench_options.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace specdec::bench {

std::vector<std::string> parse_string_list(const std::string& s) {
    std::vector<std::string> out;
    size_t b = 0;
    while (b <= s.size()) {
        size_t e = s.find(',', b);
        if (e == std::string::npos) e = s.size();
        std::string item = s.substr(b, e - b);
        const size_t l = item.find_first_not_of(" \t");
        const size_t r = item.find_last_not_of(" \t");
        item = l == std::string::npos ? "" : item.substr(l, r - l + 1);
        if (!item.empty()) out.push_back(item);
        b = e + 1;
    }
    return out;
}

std::vector<int> parse_int_list(const std::string& s, const std::string& what) {
    std::vector<int> out;
    for (const auto& item : parse_string_list(s)) {
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        SPECDEC_CHECK(end && *end == 0 && v >= INT32_MIN && v <= INT32_MAX, what, ": '", item, "' is not an integer");
        out.push_back((int)v);
    }
    SPECDEC_CHECK(!out.empty(), what, ": empty list");
    return out;
}

std::vector<double> parse_double_list(const std::string& s, const std::string& what) {
    std::vector<double> out;
    for (const auto& item : parse_string_list(s)) {
        char* end = nullptr;
        const double v = std::strtod(item.c_str(), &end);
        SPECDEC_CHECK(end && *end == 0 && std::isfinite(v), what, ": '", item, "' is not a number");
        out.push_back(v);
    }
    SPECDEC_CHECK(!out.empty(), what, ": empty list");
    return out;
}

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const double pos = std::clamp(q, 0.0, 100.0) / 100.0 * (double)(v.size() - 1);
    const size_t lo = (size_t)std::floor(pos);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    const double f = pos - (double)lo;
    return v[lo] + (v[hi] - v[lo]) * f;
}

double mean(const std::vector<double>& v) {
    if (v.empty()) return 0.0;
    double s = 0;
    for (double x : v) s += x;
    return s / (double)v.size();
}

}  // namespace specdec::bench
