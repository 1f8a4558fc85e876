// The CPU's name as the kernel reports it ("model name" in /proc/cpuinfo):
// what benchmark reports print, and part of the key of anything measured
// about this machine and cached across processes.
#pragma once

#include <string>

namespace specdec {

// "unknown" where /proc/cpuinfo has no model name.
std::string cpu_model_name();

}  // namespace specdec
