// specdec serve: placeholder until its implementation lands (owned by the serve work).
#include "cli_commands.h"
#include "core/error.h"

namespace specdec::cli {

int cmd_serve(int, char**) { throw Error("'specdec serve' is not available in this build yet"); }

}  // namespace specdec::cli
