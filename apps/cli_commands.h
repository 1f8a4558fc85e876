// Subcommands of the specdec CLI. Each lives in its own cmd_<name>.cpp and
// receives argv with the subcommand name removed.
#pragma once

namespace specdec::cli {

int run(int argc, char** argv);

int cmd_generate(int argc, char** argv);
int cmd_models(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_dev(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_calibrate(int argc, char** argv);

}  // namespace specdec::cli
