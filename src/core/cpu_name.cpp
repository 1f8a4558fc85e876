#include "core/cpu_name.h"

#include <fstream>

namespace specdec {

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            const size_t c = line.find(':');
            if (c != std::string::npos) {
                size_t b = c + 1;
                while (b < line.size() && line[b] == ' ') ++b;
                return line.substr(b);
            }
        }
    }
    return "unknown";
}

}  // namespace specdec
