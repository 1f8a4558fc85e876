#include "ssd_cli_options.h"

#include "transport/zmq_address.h"
#include "transport/zmq_draft_link.h"

namespace specdec::cli {

void SsdCliOptions::add_to(CLI::App& app, sched::SsdConfig& ssd, const std::string& k_help) {
    app.add_option("--ssd-k", ssd.k, k_help)->check(CLI::Range(1, 64));
    app.add_option("--fanout", fanout_, "ssd: bonus guesses per accept point: geometric or uniform")
        ->check(CLI::IsMember({"geometric", "uniform"}));
    app.add_option("--fanout-budget", ssd.fanout_budget, "ssd: cached branches per sequence and round (sum of F_k)")
        ->check(CLI::Range(0, 256));
    app.add_option("--saguaro-c", ssd.saguaro_c,
                   "ssd: Saguaro weight of the cached guesses in the draft distribution (1 = off; < 1 down-weights "
                   "them as in the paper, > 1 up-weights them)")
        ->check(CLI::Range(0.0, (double)sched::SsdConfig::kMaxSaguaroC));
    app.add_option("--backup", backup_, "ssd: backup on a cache miss: auto, jit, ngram, random")
        ->check(CLI::IsMember({"auto", "jit", "ngram", "random"}));
    app.add_option("--ssd-draft-threads", ssd.draft_threads, "ssd: threads of the draft side")
        ->check(CLI::Range(1, 256));
    app.add_option("--ssd-draft-nice", ssd.draft_nice,
                   "ssd: niceness of the draft's threads (0-19; > 0 lets the target's verification take "
                   "the cores first when both sides have more threads than there are cores)")
        ->check(CLI::Range(0, 19));
    app.add_option("--ssd-pin-draft", ssd.draft_pin_cpus, "ssd: pin the draft's threads to these CPUs");
    app.add_flag("--ssd-no-interrupt", no_interrupt_, "ssd: always finish the cache before answering");
}

void SsdCliOptions::apply(sched::SsdConfig& ssd) const {
    ssd.fanout = sched::parse_fanout(fanout_);
    ssd.backup = sched::parse_backup(backup_);
    ssd.interrupt = !no_interrupt_;
}

void add_remote_draft_options(CLI::App& app, std::string& addr, bool& allow_remote, int* timeout_ms,
                              const std::string& addr_help) {
    app.add_option("--ssd-draft", addr, addr_help);
    if (timeout_ms)
        app.add_option("--ssd-timeout-ms", *timeout_ms,
                       "ssd with --ssd-draft: wait this long for a round's reply (plus a prefill allowance in rounds "
                       "that begin sequences) before drafting the round locally")
            ->check(CLI::Range(1, 600000));
    app.add_flag("--allow-remote", allow_remote,
                 "ssd with --ssd-draft: allow an address other than loopback or ipc (the link is not "
                 "authenticated or encrypted)");
}

sched::DraftSideFactory remote_draft_link(const std::string& addr, bool allow_remote) {
    transport::check_endpoint(addr, allow_remote, "--ssd-draft");
    transport::ZmqDraftLinkOptions lo;
    lo.addr = addr;
    lo.allow_remote = allow_remote;
    return [lo](const sched::DraftSideSpec& spec) { return std::make_unique<transport::ZmqDraftLink>(lo, spec); };
}

}  // namespace specdec::cli
