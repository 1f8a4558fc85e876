#include "bench/sys_info.h"

#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "core/cpu_name.h"
#include "core/error.h"

namespace specdec::bench {
namespace fs = std::filesystem;

std::string cpu_model() { return cpu_model_name(); }

int cpu_count() {
    const unsigned n = std::thread::hardware_concurrency();
    return n ? (int)n : 1;
}

std::string repo_root() {
    if (const char* e = std::getenv("SPECDEC_SOURCE_DIR"); e && *e) return e;
    auto search = [](fs::path p) -> std::string {
        std::error_code ec;
        for (int i = 0; i < 6 && !p.empty(); ++i) {
            if (fs::exists(p / "tools" / "prompts.py", ec)) return p.string();
            if (p == p.parent_path()) break;
            p = p.parent_path();
        }
        return {};
    };
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        if (auto r = search(exe.parent_path()); !r.empty()) return r;
    }
    if (auto r = search(fs::current_path(ec)); !r.empty()) return r;
    return ".";
}

namespace {
std::string run_capture(const std::string& cmd) {
    std::string out;
    std::FILE* p = popen(cmd.c_str(), "r");
    if (!p) return out;
    std::array<char, 256> buf;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    pclose(p);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
}
}  // namespace

std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) {
        if (c == '\'') q += "'\\''";
        else q += c;
    }
    return q + "'";
}

std::string git_revision(const std::string& root) {
    const std::string g = "git -C " + shell_quote(root) + " ";
    std::string rev = run_capture(g + "rev-parse HEAD 2>/dev/null");
    if (rev.empty()) return "unknown";
    const std::string dirty = run_capture(g + "status --porcelain --untracked-files=no 2>/dev/null | head -1");
    return dirty.empty() ? rev : rev + "-dirty";
}

std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    in >> a >> b >> c;
    return in ? a + " " + b + " " + c : "unknown";
}

namespace {
// FIPS 180-4 SHA-256.
struct Sha256 {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    uint8_t buf[64];
    size_t fill = 0;
    uint64_t total = 0;

    static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
    void block(const uint8_t* p) {
        static const uint32_t k[64] = {
            0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
            0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
            0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
            0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
            0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
            0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
            0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
            0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
        uint32_t w[64];
        for (int i = 0; i < 16; ++i)
            w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
        for (int i = 16; i < 64; ++i) {
            const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int i = 0; i < 64; ++i) {
            const uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
            const uint32_t ch = (e & f) ^ (~e & g);
            const uint32_t t1 = hh + S1 + ch + k[i] + w[i];
            const uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
            const uint32_t mj = (a & b) ^ (a & c) ^ (b & c);
            const uint32_t t2 = S0 + mj;
            hh = g;
            g = f;
            f = e;
            e = d + t1;
            d = c;
            c = b;
            b = a;
            a = t1 + t2;
        }
        h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
    }
    void update(const uint8_t* p, size_t n) {
        total += n;
        if (fill) {
            while (n && fill < 64) buf[fill++] = *p++, --n;
            if (fill < 64) return;
            block(buf);
            fill = 0;
        }
        for (; n >= 64; p += 64, n -= 64) block(p);
        while (n) buf[fill++] = *p++, --n;
    }
    std::string hex() {
        const uint64_t bits = total * 8;
        uint8_t pad = 0x80;
        update(&pad, 1);
        pad = 0;
        while (fill != 56) update(&pad, 1);
        uint8_t len[8];
        for (int i = 0; i < 8; ++i) len[i] = (uint8_t)(bits >> (56 - 8 * i));
        update(len, 8);
        static const char* d = "0123456789abcdef";
        std::string s;
        for (uint32_t v : h)
            for (int i = 28; i >= 0; i -= 4) s += d[(v >> i) & 15];
        return s;
    }
};
}  // namespace

std::string sha256_hex(const std::string& bytes) {
    Sha256 s;
    s.update(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    return s.hex();
}

std::string sha256_file(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    SPECDEC_CHECK(f, "cannot read ", path, " to hash it");
    Sha256 s;
    std::vector<uint8_t> buf(1 << 20);
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) s.update(buf.data(), n);
    std::fclose(f);
    return s.hex();
}

bool reset_peak_rss() {
    std::ofstream out("/proc/self/clear_refs");
    if (!out) return false;
    out << "5";
    out.flush();
    return (bool)out;
}

uint64_t peak_rss_bytes() {
    // VmHWM is this address space's high-water mark. getrusage's ru_maxrss is
    // not: Linux carries it across fork and execve, so a specdec started by a
    // 2 GB Python test process reported 1978 MiB for a 280 MiB run.
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;  // kB
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_maxrss * 1024;  // Linux: kilobytes
}

uint64_t file_size(const std::string& path) {
    std::error_code ec;
    const auto n = fs::file_size(path, ec);
    return ec ? 0 : (uint64_t)n;
}

std::string python_exe(const std::string& root) {
    const fs::path venv = fs::path(root) / ".venv" / "bin" / "python";
    std::error_code ec;
    // Never whatever python3 is on the PATH: its packages are not the ones
    // tools/requirements.txt pins, so a tool could pass or fail by accident.
    SPECDEC_CHECK(fs::exists(venv, ec), "no Python environment at ", venv.string(),
                  " (run: scripts/setup.sh)");
    return venv.string();
}

std::string utc_now() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char b[32];
    std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return b;
}

}  // namespace specdec::bench
