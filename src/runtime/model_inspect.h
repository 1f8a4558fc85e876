// What a GGUF file is, and whether specdec can run it (`specdec models
// inspect`). The answer to the second question comes from the loaders
// themselves (the transformer's config and weight binding, the tokenizer, the
// engine), so it cannot drift from what `generate` would do with the file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace specdec::runtime {

// Reads the file's header, metadata and tensor table. Throws specdec::Error
// when the file is missing or not a readable GGUF file; a readable file that
// specdec cannot run is described, with "runnable": false and the loaders'
// messages under "problems".
nlohmann::json inspect_model(const std::string& path);

// The report as aligned text lines for a terminal.
std::string format_inspection(const nlohmann::json& report);

}  // namespace specdec::runtime
