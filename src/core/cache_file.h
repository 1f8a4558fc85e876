// Files that keep what one process measured on this machine for the next ones
// (the kernel choice, the row cost curves): where they live, and reading and
// writing them so that no process ever sees half a file and a bad file costs
// a re-measurement, never an error.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace specdec {

// $SPECDEC_CACHE_DIR, else $XDG_CACHE_HOME/specdec, else $HOME/.cache/specdec;
// "" when none of them is set (nothing is cached then).
std::string cache_dir();

// The JSON object in `path`; an empty object when the file is missing,
// unreadable, not JSON or not an object (a corrupt file is as good as none).
nlohmann::json read_cache_file(const std::string& path);

// Writes `j` to `path` (creating its directory): whole into a temporary file
// of this process and thread beside it, then renamed over `path`, so a
// concurrent reader sees the old file or the new one. False, and nothing left
// behind, when it cannot be written (a cache that cannot be kept is no error).
bool write_cache_file(const std::string& path, const nlohmann::json& j);

}  // namespace specdec
