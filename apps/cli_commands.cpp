#include "cli_commands.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "core/error.h"

namespace specdec::cli {

namespace {
const char* kUsage =
    "usage: specdec <command> [options]\n"
    "\n"
    "commands:\n"
    "  generate   generate text from a prompt (specdec generate --help)\n"
    "  models     list or fetch the real models (specdec models --help)\n"
    "  bench      compare decoding methods side by side (specdec bench --help)\n"
    "  serve      OpenAI-compatible HTTP server (specdec serve --help)\n"
    "  calibrate  pick the self-speculation draft depth of a model (specdec calibrate --help)\n"
    "  draft-serve  serve SSD's draft side to a target elsewhere (specdec draft-serve --help)\n"
    "  logits     write every prompt position's logits (for parity checks)\n";
}

int run(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        std::fputs(kUsage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 1 : 0;
    }
    const std::string cmd = argv[1];
    // Subcommands parse argv[1..]: their own name stands in for the program name.
    if (cmd == "generate") return cmd_generate(argc - 1, argv + 1);
    if (cmd == "models") return cmd_models(argc - 1, argv + 1);
    if (cmd == "bench") return cmd_bench(argc - 1, argv + 1);
    if (cmd == "logits") return cmd_logits(argc - 1, argv + 1);
    if (cmd == "dev") return cmd_dev(argc - 1, argv + 1);
    if (cmd == "serve") return cmd_serve(argc - 1, argv + 1);
    if (cmd == "calibrate") return cmd_calibrate(argc - 1, argv + 1);
    if (cmd == "draft-serve") return cmd_draft_serve(argc - 1, argv + 1);
    std::fputs(kUsage, stderr);
    throw Error("unknown command '" + cmd + "'");
}

}  // namespace specdec::cli
