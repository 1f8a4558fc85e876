// The one clock every timer in the engine reads: monotonic seconds as a double
// (only differences mean anything).
#pragma once

#include <chrono>

namespace specdec {

inline double now_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace specdec
