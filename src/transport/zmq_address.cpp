#include "transport/zmq_address.h"

#include "core/error.h"

namespace specdec::transport {

namespace {
// HOST of tcp://HOST:PORT (brackets kept for IPv6), "" when malformed.
std::string tcp_host(const std::string& addr) {
    const std::string rest = addr.substr(6);
    const size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) return {};
    return rest.substr(0, colon);
}
}  // namespace

bool is_local_endpoint(const std::string& addr) {
    if (addr.rfind("ipc://", 0) == 0) return addr.size() > 6;
    if (addr.rfind("tcp://", 0) != 0) return false;
    const std::string host = tcp_host(addr);
    return host == "localhost" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

void check_endpoint(const std::string& addr, bool allow_remote, const std::string& flag_owner) {
    const bool tcp = addr.rfind("tcp://", 0) == 0;
    SPECDEC_CHECK((tcp && !tcp_host(addr).empty()) || (addr.rfind("ipc://", 0) == 0 && addr.size() > 6),
                  "bad address '", addr, "' (expected tcp://HOST:PORT or ipc://PATH)");
    SPECDEC_CHECK(allow_remote || is_local_endpoint(addr), "address '", addr,
                  "' is not loopback or ipc: the draft link is neither authenticated nor encrypted, so reaching ",
                  "another host needs ", flag_owner, " --allow-remote");
}

}  // namespace specdec::transport
