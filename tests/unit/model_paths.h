// Test support: where the real models are. Tests on real models belong to
// suites named Real* (the sanitizer run skips them); a missing model is a test
// failure with the command that fetches it, never a silent skip.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace specdec::test {

inline std::string models_dir() {
    if (const char* e = std::getenv("SPECDEC_MODELS_DIR"); e && *e) return e;
    return std::string(SPECDEC_SOURCE_DIR) + "/models";
}

// Path of a model from models/manifest.json by name; "" if not fetched.
inline std::string model_path(const std::string& name) {
    std::ifstream in(models_dir() + "/manifest.json");
    if (!in) return "";
    nlohmann::json m = nlohmann::json::parse(in, nullptr, false);
    if (m.is_discarded() || !m.contains("models") || !m["models"].contains(name)) return "";
    const std::string file = m["models"][name].value("file", "");
    const std::string p = models_dir() + "/" + std::filesystem::path(file).filename().string();
    return std::filesystem::exists(p) ? p : "";
}

inline const char* kSmolLM = "smollm2-135m-instruct-q4_1";
inline const char* kGemma = "gemma3-270m-q4_k_m";

#define SPECDEC_REQUIRE_MODEL(var, name)                                                            \
    const std::string var = ::specdec::test::model_path(name);                                     \
    ASSERT_FALSE(var.empty()) << "model " << name << " missing: run .venv/bin/python tools/fetch_models.py --all"

}  // namespace specdec::test
