#include "core/cache_file.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace specdec {

namespace fs = std::filesystem;

std::string cache_dir() {
    if (const char* d = std::getenv("SPECDEC_CACHE_DIR"); d && *d) return d;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/specdec";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/specdec";
    return "";
}

nlohmann::json read_cache_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) return nlohmann::json::object();
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    return j.is_object() ? j : nlohmann::json::object();
}

bool write_cache_file(const std::string& path, const nlohmann::json& j) {
    std::error_code ec;
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty()) fs::create_directories(parent, ec);
    // Unique per process and per call: two threads or processes writing at
    // once each rename a complete file of their own.
    static std::atomic<unsigned> serial{0};
    const std::string tmp = path + ".tmp" + std::to_string((long long)::getpid()) + "." +
                            std::to_string(serial.fetch_add(1, std::memory_order_relaxed));
    bool ok = false;
    {
        std::ofstream out(tmp);
        if (out) {
            out << j.dump(1) << "\n";
            out.flush();
            ok = static_cast<bool>(out);
        }
    }
    if (ok) {
        fs::rename(tmp, path, ec);
        ok = !ec;
    }
    if (!ok) fs::remove(tmp, ec);
    return ok;
}

}  // namespace specdec
