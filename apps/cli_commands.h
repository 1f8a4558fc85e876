// Subcommands of the specdec CLI. Each lives in its own cmd_<name>.cpp.
#pragma once

namespace specdec::cli {

int run(int argc, char** argv);

}  // namespace specdec::cli
