// The engine's way of raising specdec::Error (the public exception type,
// specdec/errors.h): SPECDEC_CHECK(cond, parts...) builds the message from
// streamed parts that name the thing and the problem.
#pragma once

#include <sstream>
#include <string>

#include "specdec/errors.h"

namespace specdec {

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
