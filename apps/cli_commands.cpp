#include "cli_commands.h"

#include <cstdio>
#include <string>

#include "core/error.h"

namespace specdec::cli {

int run(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: specdec <generate|models|bench|serve> [options]\n");
        return 1;
    }
    const std::string cmd = argv[1];
    throw Error("unknown command '" + cmd + "' (expected generate, models, bench or serve)");
}

}  // namespace specdec::cli
