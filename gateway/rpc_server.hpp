// Internal to gateway/: the Cap'n Proto implementations of the public API (wire/warren.capnp).
#pragma once

#include <capnp/capability.h>

#include <string>

#include "actors/core.hpp"
#include "gateway/bridge.hpp"
#include "gateway/sandbox_host.hpp"

namespace warren::gateway {

class preview_server;

/// What the RPC objects borrow; lives as long as the server.
struct rpc_context {
  actors::core& core;
  sandbox_host& host;
  bridge& calls;
  kj::Timer& timer;
  std::string version;
  std::string token;  ///< For Login; empty when TCP is off.
  preview_server* preview = nullptr;  ///< Null when the HTTP listener is off.
};

/// Starts the restart_on_wake processes a sandbox left behind when it last stopped, and
/// journals each start (and later its end). Errors are logged, never thrown.
kj::Promise<void> restart_processes(rpc_context& ctx, std::string name, std::uint64_t id, wire::Agent::Client agent);

/// The root object served on the unix socket.
capnp::Capability::Client make_warren(rpc_context& ctx);
/// The root object served on TCP: a Login that checks the bearer token.
capnp::Capability::Client make_login(rpc_context& ctx);

}  // namespace warren::gateway
