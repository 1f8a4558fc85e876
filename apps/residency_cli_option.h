// --mmap: how a command holds the model files it loads (io/mapped_file.h).
#pragma once

#include <CLI/CLI.hpp>

namespace specdec::cli {

// Registers --mmap, which maps model files instead of copying them into huge
// pages: for a file larger than RAM, or to share the page cache between processes.
void add_mmap_option(CLI::App& app);

}  // namespace specdec::cli
