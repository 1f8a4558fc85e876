// The SSD (Saguaro) options that `specdec generate` and `specdec serve` share:
// registered on a CLI11 app, then turned into the SsdConfig after parsing.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "sched/ssd_config.h"

namespace specdec::cli {

class SsdCliOptions {
public:
    // `k_help`: what --ssd-k says (serve adds that a request's draft_k overrides it).
    void add_to(CLI::App& app, sched::SsdConfig& ssd, const std::string& k_help = "ssd: speculation length K");
    // After parsing: the enum options and the interrupt flag into `ssd`.
    void apply(sched::SsdConfig& ssd) const;

private:
    std::string fanout_ = "geometric", backup_ = "auto";
    bool no_interrupt_ = false;
};

}  // namespace specdec::cli
