// Shared helpers of the libFuzzer targets (tests/fuzz/fuzz_*.cpp).
// A target reports a bug by aborting: libFuzzer then saves the input as a
// crash artifact. Invariant checks use FUZZ_CHECK instead of assert() so that
// they stay active whatever NDEBUG says.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace specdec::fuzz {

[[noreturn]] inline void fail(const char* what, const char* file, int line, const std::string& detail = {}) {
    std::fprintf(stderr, "fuzz invariant failed: %s (%s:%d)%s%s\n", what, file, line, detail.empty() ? "" : ": ",
                 detail.c_str());
    std::abort();
}

// An exception that the code under test documents it never throws (anything
// but specdec::Error / server::ApiError): a bug even though it would not crash
// the caller that happens to catch std::exception.
[[noreturn]] inline void unexpected_exception(const std::exception& e, const char* where) {
    std::fprintf(stderr, "unexpected exception from %s: %s\n", where, e.what());
    std::abort();
}

}  // namespace specdec::fuzz

#define FUZZ_CHECK(cond, ...)                                                                  \
    do {                                                                                       \
        if (!(cond)) ::specdec::fuzz::fail(#cond, __FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__); \
    } while (0)
