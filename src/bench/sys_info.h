// Facts about the machine, the build and the files a benchmark ran on, so a
// report can say exactly what it measured.
#pragma once

#include <cstdint>
#include <string>

namespace specdec::bench {

// "model name" from /proc/cpuinfo ("unknown" if absent).
std::string cpu_model();
// Logical CPUs the process may run on.
int cpu_count();
// Root of the source tree: $SPECDEC_SOURCE_DIR, else the nearest directory
// above the executable or the working directory holding tools/prompts.py.
std::string repo_root();
// `git rev-parse HEAD` of the repo root (+ "-dirty" when the tree has changes), or "unknown".
std::string git_revision(const std::string& root);
// Lower-case hex SHA-256 of a file's bytes.
std::string sha256_file(const std::string& path);
// SHA-256 of a byte string (for tests).
std::string sha256_hex(const std::string& bytes);
// Peak resident set size of this address space in bytes (VmHWM; ru_maxrss if /proc is absent).
uint64_t peak_rss_bytes();
// Lowers the high-water mark to the current RSS (Linux: "5" to /proc/self/clear_refs),
// so that a probe's freed buffer (the bandwidth probe's 1 GiB) does not count as the
// engine's peak. Returns false where the kernel does not support it.
bool reset_peak_rss();
uint64_t file_size(const std::string& path);
// The Python interpreter tools run with: <root>/.venv/bin/python (the project's
// environment, made by scripts/setup.sh); throws Error if it is missing.
std::string python_exe(const std::string& root);
// /proc/loadavg's first three fields ("0.52 0.61 0.70"), or "unknown".
std::string load_average();
// Current UTC time, ISO 8601.
std::string utc_now();
// Quotes an argument for /bin/sh.
std::string shell_quote(const std::string& s);

}  // namespace specdec::bench
