// specdec draft-serve: SSD's draft side as a server (transport/ssd_draft_server.h)
// for `specdec generate --method ssd --ssd-draft ADDR` on this or another machine.
#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>

#include "cli_commands.h"
#include "core/error.h"
#include "residency_cli_option.h"
#include "runtime/engine.h"
#include "runtime/model_locator.h"
#include "transport/ssd_draft_server.h"

namespace specdec::cli {

namespace {
std::atomic<bool> g_stop{false};
void on_stop_signal(int) { g_stop.store(true); }
}  // namespace

int cmd_draft_serve(int argc, char** argv) {
    CLI::App app{"Serve SSD's draft side to one target at a time (specdec generate --method ssd --ssd-draft ADDR)",
                 "specdec draft-serve"};
    add_mmap_option(app);
    std::string model;
    transport::DraftServerOptions so;
    app.add_option("-d,--draft", model, "draft model (GGUF file or manifest name)")->required();
    app.add_option("--listen", so.listen, "address to listen on: tcp://127.0.0.1:PORT or ipc://PATH")->required();
    app.add_flag("--allow-remote", so.allow_remote,
                 "listen on an address other than loopback or ipc (the link is not authenticated or encrypted)");
    app.add_option("-t,--threads", so.threads, "threads of the draft worker")->check(CLI::Range(1, 256));
    // Fault injection for the tests (tests/python/test_ssd_remote.py): hidden.
    app.add_option("--fault", so.fault, "")->check(CLI::IsMember({"garbage", "slow"}))->group("");
    app.add_option("--fault-after", so.fault_after, "")->check(CLI::NonNegativeNumber)->group("");
    app.add_option("--fault-delay-ms", so.fault_delay_ms, "")->check(CLI::Range(0, 600000))->group("");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    runtime::EngineOptions eo;
    eo.model_path = runtime::resolve_model(model);
    eo.n_ctx = 8;  // each session makes the cache its target needs; this one stays unused
    eo.n_threads = 1;
    const auto draft = runtime::Engine::load(eo);
    transport::DraftServer server(*draft, so);  // binds now: a taken or refused address fails here
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    server.serve(g_stop);
    return 0;
}

}  // namespace specdec::cli
