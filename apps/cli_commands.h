// Subcommands of the specdec CLI. Each lives in its own cmd_<name>.cpp and
// receives argv with the subcommand name removed.
#pragma once

#include <string>

namespace specdec::cli {

int run(int argc, char** argv);

int cmd_generate(int argc, char** argv);
int cmd_models(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_dev(int argc, char** argv);
// specdec dev render-template IN OUT (apps/dev_render_template.cpp)
int render_template(const std::string& in_path, const std::string& out_path);
// specdec dev eagle3-dump IN OUT (apps/cmd_dev_eagle3.cpp).
int eagle3_dump(const std::string& in_path, const std::string& out_path);
// specdec dev features IN OUT (apps/cmd_dev_features.cpp).
int dump_features(const std::string& in_path, const std::string& out_path);
int cmd_serve(int argc, char** argv);
int cmd_calibrate(int argc, char** argv);
int cmd_draft_serve(int argc, char** argv);

}  // namespace specdec::cli
