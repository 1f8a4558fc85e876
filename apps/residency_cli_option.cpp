#include "residency_cli_option.h"

#include "io/mapped_file.h"

namespace specdec::cli {

void add_mmap_option(CLI::App& app) {
    app.add_flag_callback(
        "--mmap", [] { io::set_default_residency(io::Residency::Map); },
        "map model files instead of copying them into 2 MiB huge pages (the default: faster decoding, "
        "0.5 s more load per GB; mapping shares the page cache between processes and suits files larger than RAM)");
}

}  // namespace specdec::cli
