// The addresses the SSD draft link accepts (ZeroMQ endpoints), and the
// loopback rule: a draft server and its target talk in the clear (no
// authentication, no encryption), so by default only this machine may be on
// the other end: tcp://127.x.x.x, tcp://localhost, tcp://[::1] or ipc://PATH.
// Anything else needs an explicit --allow-remote.
#pragma once

#include <string>

namespace specdec::transport {

// tcp://HOST:PORT with HOST a loopback address or name, or ipc://PATH.
bool is_local_endpoint(const std::string& addr);

// Throws Error for an address that is not tcp:// or ipc://, or that is not
// local without allow_remote; `flag_owner` names the command in the message.
void check_endpoint(const std::string& addr, bool allow_remote, const std::string& flag_owner);

}  // namespace specdec::transport
