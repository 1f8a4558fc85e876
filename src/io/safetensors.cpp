#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace specdec::io {

namespace {

// A header longer than this is refused before it is parsed: released heads
// have a few dozen tensors (a few KiB of JSON); the format's own readers cap
// it at 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

bool parse_dtype(const std::string& s, StDtype& t) {
    static const std::pair<const char*, StDtype> names[] = {
        {"F32", StDtype::F32}, {"F16", StDtype::F16}, {"BF16", StDtype::BF16}, {"F64", StDtype::F64},
        {"I64", StDtype::I64}, {"I32", StDtype::I32}, {"I16", StDtype::I16}, {"I8", StDtype::I8},
        {"U8", StDtype::U8},   {"BOOL", StDtype::BOOL},
    };
    for (const auto& [n, v] : names)
        if (s == n) {
            t = v;
            return true;
        }
    return false;
}

}  // namespace

const char* st_dtype_name(StDtype t) {
    switch (t) {
        case StDtype::F32: return "F32";
        case StDtype::F16: return "F16";
        case StDtype::BF16: return "BF16";
        case StDtype::F64: return "F64";
        case StDtype::I64: return "I64";
        case StDtype::I32: return "I32";
        case StDtype::I16: return "I16";
        case StDtype::I8: return "I8";
        case StDtype::U8: return "U8";
        case StDtype::BOOL: return "BOOL";
    }
    return "?";
}

size_t st_dtype_size(StDtype t) {
    switch (t) {
        case StDtype::F64:
        case StDtype::I64: return 8;
        case StDtype::F32:
        case StDtype::I32: return 4;
        case StDtype::F16:
        case StDtype::BF16:
        case StDtype::I16: return 2;
        case StDtype::I8:
        case StDtype::U8:
        case StDtype::BOOL: return 1;
    }
    return 1;
}

int64_t StTensor::n_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
    auto f = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
    f->path_ = path;
    f->map_ = MappedFile(path);
    f->parse_all(f->map_.data(), f->map_.size());
    return f;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::parse(const uint8_t* data, size_t size, const std::string& name) {
    auto f = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
    f->path_ = name;
    f->parse_all(data, size);
    return f;
}

const StTensor* SafetensorsFile::find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

const StTensor& SafetensorsFile::get(const std::string& name) const {
    const StTensor* t = find(name);
    SPECDEC_CHECK(t, "safetensors file '", path_, "' has no tensor '", name, "'");
    return *t;
}

void SafetensorsFile::parse_all(const uint8_t* data, size_t size) {
    const std::string& p = path_;
    SPECDEC_CHECK(size >= 8, "safetensors file '", p, "' is truncated: ", size,
                  " bytes, not even the 8-byte header length");
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | data[i];  // little-endian u64
    SPECDEC_CHECK(hlen >= 2 && hlen <= kMaxHeaderBytes, "safetensors file '", p, "': header length ", hlen,
                  " is not plausible (2 to ", kMaxHeaderBytes, " bytes); not a safetensors file?");
    SPECDEC_CHECK(hlen <= size - 8, "safetensors file '", p, "' is truncated: the header says ", hlen,
                  " bytes, the file has ", size - 8, " after the length");
    const char* hb = reinterpret_cast<const char*>(data + 8);
    nlohmann::json h = nlohmann::json::parse(hb, hb + hlen, nullptr, /*allow_exceptions=*/false);
    SPECDEC_CHECK(!h.is_discarded(), "safetensors file '", p, "': the header is not valid JSON");
    SPECDEC_CHECK(h.is_object(), "safetensors file '", p, "': the header is not a JSON object");
    const uint8_t* base = data + 8 + hlen;
    const uint64_t data_size = size - 8 - hlen;

    struct Range {
        uint64_t begin, end;
        const std::string* name;
    };
    std::vector<Range> ranges;
    for (auto it = h.begin(); it != h.end(); ++it) {
        const std::string& name = it.key();
        const nlohmann::json& v = it.value();
        if (name == "__metadata__") {
            SPECDEC_CHECK(v.is_object(), "safetensors file '", p, "': __metadata__ is not an object");
            for (auto m = v.begin(); m != v.end(); ++m) {
                SPECDEC_CHECK(m.value().is_string(), "safetensors file '", p, "': metadata '", m.key(),
                              "' is not a string");
                metadata_[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        SPECDEC_CHECK(v.is_object(), "safetensors file '", p, "': entry of tensor '", name, "' is not an object");
        SPECDEC_CHECK(v.contains("dtype") && v["dtype"].is_string(), "safetensors file '", p, "': tensor '", name,
                      "' has no dtype string");
        StTensor t;
        t.name = name;
        const std::string ds = v["dtype"].get<std::string>();
        SPECDEC_CHECK(parse_dtype(ds, t.dtype), "safetensors file '", p, "': tensor '", name,
                      "' has unsupported dtype '", ds, "'");
        SPECDEC_CHECK(v.contains("shape") && v["shape"].is_array(), "safetensors file '", p, "': tensor '", name,
                      "' has no shape array");
        SPECDEC_CHECK(v["shape"].size() <= 8, "safetensors file '", p, "': tensor '", name, "' has ",
                      v["shape"].size(), " dimensions (at most 8 supported)");
        uint64_t elems = 1;
        for (const auto& d : v["shape"]) {
            SPECDEC_CHECK(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0),
                          "safetensors file '", p, "': tensor '", name, "' has a dimension that is not a ",
                          "non-negative integer");
            const uint64_t n = d.get<uint64_t>();
            SPECDEC_CHECK(n <= data_size && (n == 0 || elems <= data_size / n), "safetensors file '", p,
                          "': tensor '", name, "' has a shape larger than the file's data");
            elems *= n;
            t.shape.push_back((int64_t)n);
        }
        SPECDEC_CHECK(v.contains("data_offsets") && v["data_offsets"].is_array() && v["data_offsets"].size() == 2 &&
                          v["data_offsets"][0].is_number_unsigned() && v["data_offsets"][1].is_number_unsigned(),
                      "safetensors file '", p, "': tensor '", name,
                      "' needs data_offsets [begin, end] of non-negative integers");
        const uint64_t b = v["data_offsets"][0].get<uint64_t>(), e = v["data_offsets"][1].get<uint64_t>();
        SPECDEC_CHECK(b <= e && e <= data_size, "safetensors file '", p, "': tensor '", name, "' spans bytes [", b,
                      ", ", e, ") of a data section of ", data_size, " bytes (truncated or corrupt file)");
        const uint64_t want = elems * st_dtype_size(t.dtype);
        SPECDEC_CHECK(e - b == want, "safetensors file '", p, "': tensor '", name, "' has ", e - b,
                      " bytes, its shape and dtype ", ds, " need ", want);
        t.data = base + b;
        t.n_bytes = (size_t)want;
        auto [pos, fresh] = tensors_.emplace(name, std::move(t));
        SPECDEC_CHECK(fresh, "safetensors file '", p, "': tensor '", name, "' appears twice");
        ranges.push_back({b, e, &pos->first});
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
    for (size_t i = 1; i < ranges.size(); ++i)
        SPECDEC_CHECK(ranges[i].begin >= ranges[i - 1].end, "safetensors file '", p, "': tensors '",
                      *ranges[i - 1].name, "' and '", *ranges[i].name, "' overlap");
}

}  // namespace specdec::io
