// The one exception type specdec throws. Every error a caller can cause (a
// missing or malformed model file, a bad option, a prompt longer than the
// context) is a specdec::Error whose message names the thing and the problem;
// the CLI prints it and exits non-zero, the server answers 4xx with it, the
// Python package raises it as specdec.SpecdecError.
#pragma once

#include <stdexcept>
#include <string>

namespace specdec {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace specdec
