#include "transport/message_socket.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>

#include "core/error.h"

#ifndef SPECDEC_INSTALL_LIBDIR
#define SPECDEC_INSTALL_LIBDIR "lib"
#endif

namespace specdec::transport {
namespace {

// Where the module may be: beside the running binary (the build tree, where
// the CLI and the test binaries are), then the installed tree's
// <prefix>/<libdir>/specdec next to <prefix>/bin.
std::vector<std::filesystem::path> module_candidates() {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return {};
    const std::filesystem::path dir = exe.parent_path();
    return {dir / kSocketModuleFile, dir.parent_path() / SPECDEC_INSTALL_LIBDIR / "specdec" / kSocketModuleFile};
}

// Loaded once and never unloaded (the sockets' code and vtables live in it).
const SocketModule& module(const std::string& who) {
    static std::once_flag once;
    static const SocketModule* loaded = nullptr;
    static std::string failure;
    std::call_once(once, [] {
        std::string tried;
        for (const auto& path : module_candidates()) {
            if (!std::filesystem::exists(path)) {
                tried += (tried.empty() ? "" : ", ") + path.string();
                continue;
            }
            void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
            if (!h) {
                failure = std::string("cannot load ") + path.string() + ": " + dlerror();
                return;
            }
            using Entry = const SocketModule* (*)();
            auto entry = reinterpret_cast<Entry>(dlsym(h, kSocketModuleSymbol));
            const SocketModule* m = entry ? entry() : nullptr;
            if (!m || m->abi != kSocketModuleAbi) {
                failure = path.string() + " is not this build's socket module (rebuild specdec)";
                return;
            }
            loaded = m;
            return;
        }
        failure = std::string("the ZeroMQ module ") + kSocketModuleFile + " is not installed (looked for " + tried +
                  ")";
    });
    if (!loaded) throw Error(who + ": " + failure);
    return *loaded;
}

}  // namespace

std::unique_ptr<ClientSocket> connect_client(const std::string& addr, const std::string& who) {
    std::string error;
    ClientSocket* s = module(who).connect(addr, error);
    if (!s) throw Error(who + " " + addr + ": " + error);
    return std::unique_ptr<ClientSocket>(s);
}

std::unique_ptr<ServerSocket> bind_server(const std::string& addr, const std::string& who) {
    std::string error;
    ServerSocket* s = module(who).bind(addr, error);
    if (!s) throw Error(who + ": cannot listen on " + addr + ": " + error);
    return std::unique_ptr<ServerSocket>(s);
}

}  // namespace specdec::transport
