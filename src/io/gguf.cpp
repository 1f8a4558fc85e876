#include "io/gguf.h"

#include <cstring>

#include "core/error.h"

namespace specdec::io {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
// Limits that stop a corrupt header from asking for absurd allocations before
// the bounds checks catch it.
constexpr uint64_t kMaxStringLen = 1ull << 30;
constexpr uint64_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;

// Bounds-checked little-endian cursor over the file bytes.
class Cursor {
public:
    Cursor(const uint8_t* data, size_t size, const std::string& name)
        : data_(data), size_(size), name_(name) {}

    size_t pos() const { return pos_; }
    size_t remaining() const { return size_ - pos_; }

    template <typename T>
    T read(const char* what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, data_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    std::string read_string(const char* what) {
        const uint64_t n = read<uint64_t>(what);
        if (n > kMaxStringLen) fail("string length ", n, " is implausible (", what, ")");
        need(n, what);
        std::string s(reinterpret_cast<const char*>(data_ + pos_), (size_t)n);
        pos_ += n;
        return s;
    }

    void need(uint64_t n, const char* what) const {
        if (n > remaining()) fail("truncated while reading ", what, " at offset ", pos_);
    }

    template <typename... Args>
    [[noreturn]] void fail(const Args&... args) const {
        throw Error(detail::concat("GGUF file '", name_, "': ", args...));
    }

private:
    const uint8_t* data_;
    size_t size_;
    size_t pos_ = 0;
    const std::string& name_;
};

size_t scalar_size(GgufType t) {
    switch (t) {
        case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
        case GgufType::UINT16: case GgufType::INT16: return 2;
        case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
        case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
        default: return 0;
    }
}

bool is_integer(GgufType t) {
    return t == GgufType::UINT8 || t == GgufType::INT8 || t == GgufType::UINT16 ||
           t == GgufType::INT16 || t == GgufType::UINT32 || t == GgufType::INT32 ||
           t == GgufType::UINT64 || t == GgufType::INT64 || t == GgufType::BOOL;
}
bool is_float(GgufType t) { return t == GgufType::FLOAT32 || t == GgufType::FLOAT64; }

void read_scalar(Cursor& c, GgufType t, GgufValue& v) {
    switch (t) {
        case GgufType::UINT8: v.u = c.read<uint8_t>("u8"); v.i = (int64_t)v.u; break;
        case GgufType::INT8: v.i = c.read<int8_t>("i8"); v.u = (uint64_t)v.i; break;
        case GgufType::UINT16: v.u = c.read<uint16_t>("u16"); v.i = (int64_t)v.u; break;
        case GgufType::INT16: v.i = c.read<int16_t>("i16"); v.u = (uint64_t)v.i; break;
        case GgufType::UINT32: v.u = c.read<uint32_t>("u32"); v.i = (int64_t)v.u; break;
        case GgufType::INT32: v.i = c.read<int32_t>("i32"); v.u = (uint64_t)v.i; break;
        case GgufType::UINT64: v.u = c.read<uint64_t>("u64"); v.i = (int64_t)v.u; break;
        case GgufType::INT64: v.i = c.read<int64_t>("i64"); v.u = (uint64_t)v.i; break;
        case GgufType::FLOAT32: v.f = c.read<float>("f32"); break;
        case GgufType::FLOAT64: v.f = c.read<double>("f64"); break;
        case GgufType::BOOL: {
            const uint8_t b = c.read<uint8_t>("bool");
            if (b > 1) c.fail("bool value ", (int)b, " is neither 0 nor 1");
            v.i = b;
            v.u = b;
            break;
        }
        default: c.fail("unexpected scalar type ", (uint32_t)t);
    }
}

GgufType read_type(Cursor& c, const char* what) {
    const uint32_t t = c.read<uint32_t>(what);
    if (t > (uint32_t)GgufType::FLOAT64) c.fail("unknown metadata value type ", t, " (", what, ")");
    return (GgufType)t;
}

void read_value(Cursor& c, GgufType t, GgufValue& v, int depth) {
    v.type = t;
    if (t == GgufType::STRING) {
        v.s = c.read_string("string value");
        return;
    }
    if (t != GgufType::ARRAY) {
        read_scalar(c, t, v);
        return;
    }
    if (depth >= kMaxArrayDepth) c.fail("arrays nested deeper than ", kMaxArrayDepth);
    v.elem_type = read_type(c, "array element type");
    const uint64_t n = c.read<uint64_t>("array length");
    // Every element occupies at least one byte (strings: 8), which bounds n by
    // the bytes left and keeps a corrupt count from allocating gigabytes.
    const uint64_t min_elem = v.elem_type == GgufType::STRING  ? 8
                              : v.elem_type == GgufType::ARRAY ? 12
                                                               : scalar_size(v.elem_type);
    if (n > c.remaining() / min_elem) c.fail("array length ", n, " exceeds the file size");
    if (v.elem_type == GgufType::STRING) {
        v.strings.reserve(n);
        for (uint64_t k = 0; k < n; ++k) v.strings.push_back(c.read_string("array string"));
    } else if (v.elem_type == GgufType::ARRAY) {
        v.items.resize(n);
        for (uint64_t k = 0; k < n; ++k) read_value(c, GgufType::ARRAY, v.items[k], depth + 1);
    } else if (is_float(v.elem_type)) {
        v.floats.reserve(n);
        GgufValue tmp;
        for (uint64_t k = 0; k < n; ++k) {
            read_scalar(c, v.elem_type, tmp);
            v.floats.push_back(tmp.f);
        }
    } else {
        v.ints.reserve(n);
        GgufValue tmp;
        for (uint64_t k = 0; k < n; ++k) {
            read_scalar(c, v.elem_type, tmp);
            v.ints.push_back(tmp.i);
        }
    }
}

const char* type_name(GgufType t) {
    static const char* names[] = {"uint8", "int8",  "uint16", "int16",  "uint32", "int32", "float32",
                                  "bool",  "string", "array", "uint64", "int64",  "float64"};
    const auto i = (uint32_t)t;
    return i < 13 ? names[i] : "?";
}

}  // namespace

size_t GgufValue::array_size() const {
    if (type != GgufType::ARRAY) return 0;
    return strings.size() + ints.size() + floats.size() + items.size();
}

int64_t GgufTensor::n_elements() const {
    int64_t n = 1;
    for (auto d : dims) n *= d;
    return n;
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->path_ = path;
    f->map_ = MappedFile(path);
    f->parse_all(f->map_.data(), f->map_.size());
    return f;
}

std::unique_ptr<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, const std::string& name) {
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->path_ = name;
    f->parse_all(data, size);
    return f;
}

void GgufFile::parse_all(const uint8_t* data, size_t size) {
    size_ = size;
    Cursor c(data, size, path_);
    if (size < 4) c.fail("file is too small to be GGUF (", size, " bytes)");
    const uint32_t magic = c.read<uint32_t>("magic");
    if (magic != kGgufMagic) c.fail("not a GGUF file (bad magic)");
    version_ = c.read<uint32_t>("version");
    if (version_ == 1) c.fail("GGUF version 1 is not supported (only 2 and 3)");
    if (version_ != 2 && version_ != 3) c.fail("unsupported GGUF version ", version_);
    const uint64_t n_tensors = c.read<uint64_t>("tensor count");
    const uint64_t n_kv = c.read<uint64_t>("metadata count");
    // Each kv needs >= 12 bytes, each tensor info >= 24: reject absurd counts early.
    if (n_kv > c.remaining() / 12) c.fail("metadata count ", n_kv, " exceeds the file size");
    if (n_tensors > c.remaining() / 24) c.fail("tensor count ", n_tensors, " exceeds the file size");

    for (uint64_t k = 0; k < n_kv; ++k) {
        std::string key = c.read_string("metadata key");
        const GgufType t = read_type(c, "metadata value type");
        GgufValue v;
        read_value(c, t, v, 0);
        if (kv_.count(key)) c.fail("duplicate metadata key '", key, "'");
        kv_.emplace(std::move(key), std::move(v));
    }

    if (const GgufValue* a = find("general.alignment")) {
        if (!is_integer(a->type) || a->u == 0 || (a->u & (a->u - 1)) != 0 || a->u > 65536)
            c.fail("general.alignment must be a power of two, got ", a->u);
        alignment_ = (size_t)a->u;
    }

    tensors_.reserve(n_tensors);
    for (uint64_t k = 0; k < n_tensors; ++k) {
        GgufTensor t;
        t.name = c.read_string("tensor name");
        const uint32_t n_dims = c.read<uint32_t>("tensor dimension count");
        if (n_dims == 0 || n_dims > kMaxDims)
            c.fail("tensor '", t.name, "' has ", n_dims, " dimensions (1..", kMaxDims, " allowed)");
        for (uint32_t d = 0; d < n_dims; ++d) {
            const int64_t ne = c.read<int64_t>("tensor dimension");
            if (ne <= 0 || ne > (1ll << 40)) c.fail("tensor '", t.name, "' has invalid dimension ", ne);
            t.dims.push_back(ne);
        }
        const uint32_t type = c.read<uint32_t>("tensor type");
        const TensorTypeTraits tr = tensor_type_traits(type);
        if (!tr.known) c.fail("tensor '", t.name, "' has unsupported type ", type);
        t.type = (TensorType)type;
        t.offset = c.read<uint64_t>("tensor data offset");
        if (t.offset % alignment_ != 0)
            c.fail("tensor '", t.name, "' data offset ", t.offset, " is not aligned to ", alignment_);
        if (t.dims[0] % tr.block_elems != 0)
            c.fail("tensor '", t.name, "' row of ", t.dims[0], " elements is not a multiple of the ",
                   tr.name, " block size ", tr.block_elems);
        // Bound the element count as a whole, not only the rows: with each
        // bound separately, dims[0] * rows reached 2^80, so n_bytes (size_t)
        // wrapped to a value that passed the bounds check below and
        // n_elements() overflowed int64 (found by tests/fuzz/fuzz_gguf).
        int64_t rows = 1;
        for (size_t d = 1; d < t.dims.size(); ++d) {
            if (rows > (1ll << 40) / t.dims[0] / t.dims[d]) c.fail("tensor '", t.name, "' is too large");
            rows *= t.dims[d];
        }
        t.n_bytes = tensor_row_bytes(t.type, t.dims[0]) * (size_t)rows;
        if (tensor_index_.count(t.name)) c.fail("duplicate tensor name '", t.name, "'");
        tensor_index_[t.name] = tensors_.size();
        tensors_.push_back(std::move(t));
    }

    const size_t data_start = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
    if (data_start > size && n_tensors > 0) c.fail("truncated: tensor data section is missing");
    for (auto& t : tensors_) {
        if (t.offset > size - data_start || t.n_bytes > size - data_start - t.offset)
            c.fail("truncated: tensor '", t.name, "' (", t.n_bytes, " bytes at data offset ", t.offset,
                   ") extends past the end of the file (", size, " bytes)");
        t.data = data + data_start + t.offset;
    }
}

const GgufValue* GgufFile::find(const std::string& key) const {
    auto it = kv_.find(key);
    return it == kv_.end() ? nullptr : &it->second;
}

namespace {
[[noreturn]] void type_error(const std::string& path, const std::string& key, const GgufValue& v,
                             const char* want) {
    throw Error(detail::concat("GGUF file '", path, "': metadata '", key, "' is ", type_name(v.type),
                               ", expected ", want));
}
}  // namespace

std::string GgufFile::get_string(const std::string& key) const {
    const GgufValue* v = find(key);
    SPECDEC_CHECK(v, "GGUF file '", path_, "': missing metadata '", key, "'");
    if (v->type != GgufType::STRING) type_error(path_, key, *v, "string");
    return v->s;
}

int64_t GgufFile::get_int(const std::string& key) const {
    const GgufValue* v = find(key);
    SPECDEC_CHECK(v, "GGUF file '", path_, "': missing metadata '", key, "'");
    if (!is_integer(v->type)) type_error(path_, key, *v, "an integer");
    return v->i;
}

double GgufFile::get_float(const std::string& key) const {
    const GgufValue* v = find(key);
    SPECDEC_CHECK(v, "GGUF file '", path_, "': missing metadata '", key, "'");
    if (is_float(v->type)) return v->f;
    if (is_integer(v->type)) return (double)v->i;
    type_error(path_, key, *v, "a number");
}

bool GgufFile::get_bool(const std::string& key) const {
    const GgufValue* v = find(key);
    SPECDEC_CHECK(v, "GGUF file '", path_, "': missing metadata '", key, "'");
    if (!is_integer(v->type)) type_error(path_, key, *v, "a bool");
    return v->i != 0;
}

std::string GgufFile::get_string(const std::string& key, const std::string& dflt) const {
    return has(key) ? get_string(key) : dflt;
}
int64_t GgufFile::get_int(const std::string& key, int64_t dflt) const {
    return has(key) ? get_int(key) : dflt;
}
double GgufFile::get_float(const std::string& key, double dflt) const {
    return has(key) ? get_float(key) : dflt;
}
bool GgufFile::get_bool(const std::string& key, bool dflt) const {
    return has(key) ? get_bool(key) : dflt;
}

void GgufFile::release_large_arrays(size_t min_elements) {
    for (auto& [key, v] : kv_) {
        if (v.type != GgufType::ARRAY || v.array_size() < min_elements) continue;
        released_[key] = v.array_size();
        std::vector<std::string>().swap(v.strings);
        std::vector<int64_t>().swap(v.ints);
        std::vector<double>().swap(v.floats);
        std::vector<GgufValue>().swap(v.items);
    }
}

namespace {
void check_not_released(const std::map<std::string, size_t>& released, const std::string& path,
                        const std::string& key) {
    const auto it = released.find(key);
    SPECDEC_CHECK(it == released.end(), "GGUF file '", path, "': metadata array '", key, "' (", it->second,
                  " elements) was released after the model was loaded");
}
}  // namespace

size_t GgufFile::array_length(const std::string& key) const {
    const auto it = released_.find(key);
    if (it != released_.end()) return it->second;
    const GgufValue* v = find(key);
    SPECDEC_CHECK(v && v->type == GgufType::ARRAY, "GGUF file '", path_, "': no metadata array '", key, "'");
    return v->array_size();
}

const std::vector<std::string>& GgufFile::get_string_array(const std::string& key) const {
    check_not_released(released_, path_, key);
    const GgufValue* v = find(key);
    SPECDEC_CHECK(v, "GGUF file '", path_, "': missing metadata '", key, "'");
    if (v->type != GgufType::ARRAY || v->elem_type != GgufType::STRING)
        type_error(path_, key, *v, "an array of strings");
    return v->strings;
}

const std::vector<int64_t>& GgufFile::get_int_array(const std::string& key) const {
    check_not_released(released_, path_, key);
    const GgufValue* v = find(key);
    SPECDEC_CHECK(v, "GGUF file '", path_, "': missing metadata '", key, "'");
    if (v->type != GgufType::ARRAY || !is_integer(v->elem_type))
        type_error(path_, key, *v, "an array of integers");
    return v->ints;
}

const std::vector<double>& GgufFile::get_float_array(const std::string& key) const {
    check_not_released(released_, path_, key);
    const GgufValue* v = find(key);
    SPECDEC_CHECK(v, "GGUF file '", path_, "': missing metadata '", key, "'");
    if (v->type != GgufType::ARRAY || !is_float(v->elem_type))
        type_error(path_, key, *v, "an array of floats");
    return v->floats;
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(const std::string& name) const {
    const GgufTensor* t = find_tensor(name);
    SPECDEC_CHECK(t, "GGUF file '", path_, "': missing tensor '", name, "'");
    return *t;
}

}  // namespace specdec::io
