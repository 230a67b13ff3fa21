// Internal to gateway/: the Cap'n Proto implementations of the public API (wire/warren.capnp).
#pragma once

#include <capnp/capability.h>
#include <kj/async-io.h>

#include <functional>
#include <string>
#include <vector>

#include "actors/core.hpp"
#include "gateway/bridge.hpp"
#include "gateway/sandbox_host.hpp"
#include "wire/agent.capnp.h"

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
  actors::blob_store* blobs = nullptr;  ///< Backup archives; null: backups are unavailable.
  std::string live_snapshot_note;       ///< Why snapshots cannot hold process memory here.
  kj::AsyncIoContext* io = nullptr;     ///< For child processes (btrfs send / receive).
  std::string web_dir;                  ///< Browser assets (xterm.js) for the terminal page.
};

/// Starts the restart_on_wake processes a sandbox left behind when it last stopped, and
/// journals each start (and later its end). Errors are logged, never thrown.
kj::Promise<void> restart_processes(rpc_context& ctx, std::string name, std::uint64_t id, wire::Agent::Client agent);

/// Runs `call` on the agent of a sandbox that is woken if needed and held awake until the
/// returned promise settles. The agent's errors come back as its "code: sentence", without
/// the RPC layers' decoration; a broken link becomes "unavailable".
kj::Promise<void> with_held_agent(rpc_context& ctx, const std::string& name, std::uint64_t id,
                                  std::function<kj::Promise<void>(wire::Agent::Client&)> call);

/// backups.cpp: Sandbox.backup and restoreBackup; expired and orphaned archives.
struct backup_request {
  std::string dir;
  std::vector<std::string> excludes;
  bool respect_gitignore = false;
  std::uint64_t ttl_ms = 0;  ///< 0: the default (7 days).
};
kj::Promise<actors::backup_info> make_backup(rpc_context& ctx, std::string name, std::uint64_t id, backup_request req);
kj::Promise<void> restore_backup(rpc_context& ctx, std::string name, std::uint64_t id, std::string backup_id,
                                 std::string dir);
/// Snapshots moved between machines: a btrfs send stream of the snapshot into the blob
/// store (name, SHA-256, size), and back (btrfs receive, confined to a staging directory).
struct snapshot_export {
  std::string blob, sha256;
  std::uint64_t bytes = 0;
};
kj::Promise<snapshot_export> export_snapshot(rpc_context& ctx, std::uint64_t snapshot_id);
kj::Promise<actors::snapshot_info> import_snapshot(rpc_context& ctx, std::string blob, std::string sha256,
                                                   std::string label);

/// Deletes expired backups (journal, then archive); with `orphans`, also archives the
/// journal does not know (a crash between writing one and journaling it).
kj::Promise<void> sweep_backups(rpc_context& ctx, bool orphans);

/// Compares a bearer token in time that depends only on the expected token's length, so the
/// time taken does not reveal how much of a guess was right.
bool same_token(const std::string& given, const std::string& expected);

/// The root object served on the unix socket.
capnp::Capability::Client make_warren(rpc_context& ctx);
/// The root object served on TCP: a Login that checks the bearer token.
capnp::Capability::Client make_login(rpc_context& ctx);

}  // namespace warren::gateway
