// specdec bench: placeholder until its implementation lands (owned by the bench work).
#include "cli_commands.h"
#include "core/error.h"

namespace specdec::cli {

int cmd_bench(int, char**) { throw Error("'specdec bench' is not available in this build yet"); }

}  // namespace specdec::cli
