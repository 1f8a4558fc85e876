// specdec command-line entry point: dispatches to subcommands.
#include <cstdio>
#include <exception>
#include <string>

#include "cli_commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
    try {
        return specdec::cli::run(argc, argv);
    } catch (const specdec::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "internal error: %s\n", e.what());
        return 2;
    }
}
