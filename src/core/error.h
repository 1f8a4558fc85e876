// The one exception type the engine throws. Every error a user can cause (bad
// file, bad option, context overflow) becomes an Error with a message that names
// the thing and the problem; the CLI prints it and exits non-zero.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace specdec {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
    std::ostringstream os;
    (os << ... << args);
    return os.str();
}
}  // namespace detail

// Throws specdec::Error with the streamed message when cond is false.
#define SPECDEC_CHECK(cond, ...)                                              \
    do {                                                                      \
        if (!(cond)) throw ::specdec::Error(::specdec::detail::concat(__VA_ARGS__)); \
    } while (0)

}  // namespace specdec
