// The SSD (Saguaro) options that `specdec generate` and `specdec serve` share:
// registered on a CLI11 app, then turned into the SsdConfig after parsing.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "sched/ssd_config.h"
#include "sched/ssd_scheduler.h"

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

// --ssd-draft ADDR, --ssd-timeout-ms (when `timeout_ms` is given) and
// --allow-remote: SSD's draft side on a `specdec draft-serve` (generate,
// serve and bench take them alike).
void add_remote_draft_options(CLI::App& app, std::string& addr, bool& allow_remote, int* timeout_ms,
                              const std::string& addr_help);

// The link to the draft server at `addr`, after the loopback rule (an address
// other than loopback or ipc needs allow_remote; throws otherwise).
sched::DraftSideFactory remote_draft_link(const std::string& addr, bool allow_remote);

}  // namespace specdec::cli
