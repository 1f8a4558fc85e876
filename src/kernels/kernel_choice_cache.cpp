// Kernel choice across processes: see kernel_choice_cache.h.
#include "kernels/kernel_choice_cache.h"

#include <cmath>
#include <cstdlib>
#include <ctime>

#include <nlohmann/json.hpp>

#include "core/cache_file.h"
#include "core/cpu_name.h"
#include "specdec_build_id.h"

namespace specdec::kernels {

namespace {

using nlohmann::json;

// Bump when the file's layout or what a timing means changes.
constexpr int kFormat = 1;
// Keys kept in one file: a user alternating a few builds (release, a sanitizer
// build, an installed copy) keeps each one's choice; older ones are dropped.
constexpr size_t kMaxKeys = 8;

std::optional<Isa> parse_isa(const json& j) {
    if (!j.is_string()) return std::nullopt;
    for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
        if (j.get<std::string>() == isa_name(i)) return i;
    return std::nullopt;
}

std::optional<std::array<double, kRowBuckets>> parse_times(const json& j) {
    if (!j.is_array() || j.size() != (size_t)kRowBuckets) return std::nullopt;
    std::array<double, kRowBuckets> out{};
    for (int b = 0; b < kRowBuckets; ++b) {
        if (!j[(size_t)b].is_number()) return std::nullopt;
        out[b] = j[(size_t)b].get<double>();
        if (!std::isfinite(out[b])) return std::nullopt;
    }
    return out;
}

long long written_of(const json& e) {
    if (!e.is_object()) return 0;
    const auto w = e.find("written");
    return w != e.end() && w->is_number_integer() ? w->get<long long>() : 0;
}

json key_json(const KernelCacheKey& k) { return {{"cpu", k.cpu}, {"max_isa", k.max_isa}, {"build", k.build}}; }

// The entry for `key` in a file's contents, or null if it is absent or not ours.
const json* find_entry(const json& file, const KernelCacheKey& key) {
    const auto f = file.find("format");
    if (f == file.end() || *f != kFormat) return nullptr;
    const auto es = file.find("entries");
    if (es == file.end() || !es->is_object()) return nullptr;
    const auto e = es->find(key.str());
    // The key's parts are stored too and compared, not only the joined string.
    if (e == es->end() || !e->is_object() || e->value("key", json()) != key_json(key)) return nullptr;
    return &*e;
}

}  // namespace

KernelCacheKey kernel_cache_key() { return {cpu_model_name(), isa_name(cpu_max_isa()), SPECDEC_BUILD_ID}; }

std::string kernel_cache_path() {
    if (const char* e = std::getenv("SPECDEC_KERNEL_CACHE"); e && *e) {
        if (std::string(e) == "off") return "";
        return e;
    }
    const std::string dir = cache_dir();
    return dir.empty() ? "" : dir + "/kernel-choice.json";
}

std::optional<KernelChoiceReport> load_kernel_choice(const std::string& path, const KernelCacheKey& key,
                                                     TensorType type) {
    try {
        const json file = read_cache_file(path);
        const json* e = find_entry(file, key);
        if (!e) return std::nullopt;
        const auto ts = e->find("types");
        if (ts == e->end() || !ts->is_object()) return std::nullopt;
        const auto t = ts->find(std::string(tensor_type_name(type)));
        if (t == ts->end() || !t->is_object()) return std::nullopt;
        KernelChoiceReport r;
        r.type = type;
        const json& isa = t->value("isa", json());
        if (!isa.is_array() || isa.size() != (size_t)kRowBuckets) return std::nullopt;
        for (int b = 0; b < kRowBuckets; ++b) {
            const auto l = parse_isa(isa[(size_t)b]);
            if (!l) return std::nullopt;
            r.isa[b] = *l;
        }
        const json& levels = t->value("levels", json());
        const json& ns = t->value("ns_per_row", json());
        if (!levels.is_array() || !ns.is_array() || levels.size() != ns.size()) return std::nullopt;
        for (size_t i = 0; i < levels.size(); ++i) {
            const auto l = parse_isa(levels[i]);
            const auto v = parse_times(ns[i]);
            if (!l || !v) return std::nullopt;
            r.levels.push_back(*l);
            r.ns_per_row.push_back(*v);
        }
        r.how = "cached";
        return r;
    } catch (const std::exception&) {
        return std::nullopt;  // any surprise in the file's shape is a miss
    }
}

bool store_kernel_choice(const std::string& path, const KernelCacheKey& key, const KernelChoiceReport& r) {
    try {
        json file = read_cache_file(path);
        if (file.value("format", json()) != kFormat || !file.value("entries", json()).is_object())
            file = json{{"format", kFormat}, {"entries", json::object()}};
        json& entries = file["entries"];
        json entry = find_entry(file, key) ? entries[key.str()] : json{{"key", key_json(key)}, {"types", json::object()}};
        json t = json::object();
        json isa = json::array();
        for (Isa l : r.isa) isa.push_back(isa_name(l));
        t["isa"] = isa;
        json levels = json::array(), ns = json::array();
        for (size_t i = 0; i < r.levels.size() && i < r.ns_per_row.size(); ++i) {
            levels.push_back(isa_name(r.levels[i]));
            ns.push_back(r.ns_per_row[i]);
        }
        t["levels"] = levels;
        t["ns_per_row"] = ns;
        entry["types"][std::string(tensor_type_name(r.type))] = t;
        entry["written"] = (long long)std::time(nullptr);
        entries[key.str()] = entry;
        while (entries.size() > kMaxKeys) {
            auto oldest = entries.end();
            for (auto it = entries.begin(); it != entries.end(); ++it) {
                if (it.key() == key.str()) continue;
                if (oldest == entries.end() || written_of(*it) < written_of(*oldest)) oldest = it;
            }
            entries.erase(oldest);
        }
        return write_cache_file(path, file);
    } catch (const std::exception&) {
        return false;
    }
}

}  // namespace specdec::kernels
