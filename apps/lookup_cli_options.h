// The prompt-lookup-first options of chain and tree (spec/lookup_first_proposer.h)
// and the options of auto, which `specdec generate` and `specdec serve` share.
#pragma once

#include <CLI/CLI.hpp>

#include "sched/spec_config.h"

namespace specdec::cli {

// Registers --lookup-min and --lookup-k, parsed into spec.
void add_lookup_options(CLI::App& app, sched::SpecConfig& spec);
// Registers --auto-min-gain, the cost model's safety margin of --method auto.
void add_auto_options(CLI::App& app, sched::SpecConfig& spec);

}  // namespace specdec::cli
