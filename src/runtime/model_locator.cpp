#include "runtime/model_locator.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace fs = std::filesystem;

namespace specdec::runtime {

std::string models_dir() {
    if (const char* env = std::getenv("SPECDEC_MODELS_DIR"); env && *env) return env;
    if (fs::exists("models/manifest.json")) return "models";
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n > 0) {
        buf[n] = 0;
        const fs::path p = fs::path(buf).parent_path().parent_path().parent_path() / "models";
        if (fs::exists(p / "manifest.json")) return p.string();
    }
    return "models";
}

namespace {

bool looks_like_path(const std::string& s) {
    return fs::exists(s) || s.find('/') != std::string::npos || s.ends_with(".gguf");
}

// models/manifest.json; `what` names the missing thing in the error.
nlohmann::json read_manifest(const fs::path& manifest_path, const std::string& what) {
    std::ifstream in(manifest_path);
    if (!in) {
        throw Error("no " + what + " and no model manifest at " + manifest_path.string() +
                    " (run: specdec models fetch, or scripts/setup.sh then .venv/bin/python tools/fetch_models.py)");
    }
    nlohmann::json m;
    try {
        in >> m;
    } catch (const std::exception& e) {
        throw Error("model manifest " + manifest_path.string() + " is not valid JSON: " + e.what());
    }
    return m;
}

}  // namespace

std::string resolve_eagle3_head(const std::string& name_or_path) {
    if (looks_like_path(name_or_path)) return name_or_path;  // the head loader reports a missing or bad one
    const fs::path dir = models_dir();
    const nlohmann::json m = read_manifest(dir / "manifest.json", "EAGLE-3 head '" + name_or_path + "'");
    const nlohmann::json heads = m.value("heads", nlohmann::json::object());
    std::string known;
    for (const auto& [name, h] : heads.items()) {
        if (!h.is_object()) continue;
        if (name == name_or_path) {
            fs::path d = h.value("dir", "");
            return (d.is_relative() ? dir / d : d).lexically_normal().string();
        }
        known += (known.empty() ? "" : ", ") + name;
    }
    throw Error("unknown EAGLE-3 head '" + name_or_path + "' (known: " + (known.empty() ? "none" : known) +
                "; or give a head's directory or GGUF file)");
}

std::string resolve_model(const std::string& name_or_path) {
    if (!name_or_path.empty() && looks_like_path(name_or_path))
        return name_or_path;  // a path: the GGUF reader reports a missing or bad file
    const fs::path dir = models_dir();
    const nlohmann::json m = read_manifest(dir / "manifest.json", "model file '" + name_or_path + "'");
    const nlohmann::json models = m.contains("models") ? m["models"] : m;
    std::string known;
    for (const auto& [key, e] : models.items()) {
        if (!e.is_object()) continue;
        const std::string name = e.value("name", models.is_object() ? key : std::string());
        known += (known.empty() ? "" : ", ") + name;
        const bool match = name_or_path.empty() ? (e.value("default", false) || e.value("role", "") == "ci")
                                                : name == name_or_path;
        if (match) {
            fs::path file = e.value("file", "");
            if (file.is_relative()) file = dir / file.filename();
            return file.string();
        }
    }
    if (name_or_path.empty()) throw Error("the model manifest names no default model; pass -m MODEL");
    throw Error("unknown model '" + name_or_path + "' (known: " + known + "; or give a path to a .gguf file)");
}

}  // namespace specdec::runtime
