// Test support: writes small GGUF files in memory (synthetic models, fuzz
// seeds). Independent of the reader: it encodes the format from the spec.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace specdec::test {

class GgufWriter {
public:
    explicit GgufWriter(uint32_t version = 3, size_t alignment = 32)
        : version_(version), alignment_(alignment) {}

    void kv_u32(const std::string& k, uint32_t v) { key(k, 4); pod(kv_, v); ++n_kv_; }
    void kv_i32(const std::string& k, int32_t v) { key(k, 5); pod(kv_, v); ++n_kv_; }
    void kv_f32(const std::string& k, float v) { key(k, 6); pod(kv_, v); ++n_kv_; }
    void kv_bool(const std::string& k, bool v) { key(k, 7); pod(kv_, (uint8_t)v); ++n_kv_; }
    void kv_str(const std::string& k, const std::string& v) { key(k, 8); str(kv_, v); ++n_kv_; }
    void kv_u64(const std::string& k, uint64_t v) { key(k, 10); pod(kv_, v); ++n_kv_; }
    void kv_f64(const std::string& k, double v) { key(k, 12); pod(kv_, v); ++n_kv_; }
    void kv_str_array(const std::string& k, const std::vector<std::string>& v) {
        key(k, 9);
        pod(kv_, (uint32_t)8);
        pod(kv_, (uint64_t)v.size());
        for (auto& s : v) str(kv_, s);
        ++n_kv_;
    }
    void kv_f32_array(const std::string& k, const std::vector<float>& v) {
        key(k, 9);
        pod(kv_, (uint32_t)6);
        pod(kv_, (uint64_t)v.size());
        for (float x : v) pod(kv_, x);
        ++n_kv_;
    }
    void kv_i32_array(const std::string& k, const std::vector<int32_t>& v) {
        key(k, 9);
        pod(kv_, (uint32_t)5);
        pod(kv_, (uint64_t)v.size());
        for (int32_t x : v) pod(kv_, x);
        ++n_kv_;
    }

    // dims in ggml order (dims[0] contiguous); bytes = raw tensor data.
    void tensor(const std::string& name, uint32_t type, const std::vector<int64_t>& dims,
                const std::vector<uint8_t>& bytes) {
        str(ti_, name);
        pod(ti_, (uint32_t)dims.size());
        for (auto d : dims) pod(ti_, d);
        pod(ti_, type);
        while (data_.size() % alignment_) data_.push_back(0);
        pod(ti_, (uint64_t)data_.size());
        data_.insert(data_.end(), bytes.begin(), bytes.end());
        ++n_tensors_;
    }
    void tensor_f32(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
        std::vector<uint8_t> b(v.size() * 4);
        std::memcpy(b.data(), v.data(), b.size());
        tensor(name, 0, dims, b);
    }

    std::vector<uint8_t> bytes() const {
        std::vector<uint8_t> out;
        pod(out, (uint32_t)0x46554747);
        pod(out, version_);
        pod(out, n_tensors_);
        pod(out, n_kv_);
        out.insert(out.end(), kv_.begin(), kv_.end());
        out.insert(out.end(), ti_.begin(), ti_.end());
        while (out.size() % alignment_) out.push_back(0);
        out.insert(out.end(), data_.begin(), data_.end());
        return out;
    }

    bool write(const std::string& path) const {
        auto b = bytes();
        FILE* f = std::fopen(path.c_str(), "wb");
        if (!f) return false;
        const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
        std::fclose(f);
        return ok;
    }

private:
    template <typename T>
    static void pod(std::vector<uint8_t>& o, T v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        o.insert(o.end(), p, p + sizeof(T));
    }
    static void str(std::vector<uint8_t>& o, const std::string& s) {
        pod(o, (uint64_t)s.size());
        o.insert(o.end(), s.begin(), s.end());
    }
    void key(const std::string& k, uint32_t type) {
        str(kv_, k);
        pod(kv_, type);
    }

    uint32_t version_;
    size_t alignment_;
    uint64_t n_kv_ = 0, n_tensors_ = 0;
    std::vector<uint8_t> kv_, ti_, data_;
};

// A small file with every metadata value type and two F32 tensors: the GGUF
// reader's unit tests parse it, corrupt it and compare against it, and the
// fuzzer starts from it (tests/fuzz/make_seeds.cpp).
inline GgufWriter sample_writer(uint32_t version = 3) {
    GgufWriter w(version);
    w.kv_str("general.architecture", "llama");
    w.kv_u32("llama.block_count", 2);
    w.kv_f32("llama.rope.freq_base", 10000.0f);
    w.kv_bool("tokenizer.ggml.add_bos_token", true);
    w.kv_u64("big", 1ull << 40);
    w.kv_f64("pi", 3.25);
    w.kv_i32("neg", -7);
    w.kv_str_array("tokenizer.ggml.tokens", {"a", "b", "<s>"});
    w.kv_f32_array("tokenizer.ggml.scores", {0.5f, -1.0f, 0.0f});
    w.kv_i32_array("tokenizer.ggml.token_type", {1, 1, 3});
    std::vector<float> v(8);
    for (int i = 0; i < 8; ++i) v[i] = (float)i;
    w.tensor_f32("t0", {4, 2}, v);
    w.tensor_f32("t1", {3}, {1, 2, 3});
    return w;
}

}  // namespace specdec::test
