// The gateway: all of the daemon's KJ event-loop I/O (Cap'n Proto RPC server, agent links,
// the bridge to the actors). warrend's main calls prepare_process() first, then run().
#pragma once

#include <functional>
#include <memory>
#include <cstdint>
#include <string>

#include "actors/core.hpp"
#include "wire/errors.hpp"

namespace warren::gateway {

struct gateway_options {
  /// Unix socket of the RPC API, created with mode 0600. Default: /run/warren/warren.sock.
  std::string socket_path = "/run/warren/warren.sock";
  /// Optional TCP listen address ("127.0.0.1:7420"); empty: no TCP. Requires `token`.
  std::string tcp_listen;
  /// Bearer token for TCP clients (Login.login). Never logged.
  std::string token;
  /// The warren-init binary. Default: next to warrend.
  std::string init_path;
  /// The cgroup2 mount. Default: none (required; warrend finds it).
  std::string cgroup_root;
  /// This daemon's directory name in every cgroup hierarchy. Default: none (required).
  std::string cgroup_name;
  /// Limits of every sandbox: memory bytes, pids, CPU in 1/1000 CPU; 0 = none.
  /// Default: 4 GiB, 4096 processes, no CPU cap.
  std::uint64_t sandbox_memory_bytes = 4ull << 30;
  std::uint64_t sandbox_pids_max = 4096;
  std::uint64_t sandbox_cpu_millis = 0;
  /// Host user ids lent to running sandboxes (see host_options) and the jail's optional
  /// layers (off only to measure their cost).
  std::uint32_t sandbox_uid_base = 0x70000000;
  std::uint32_t sandbox_uid_ranges = 4094;
  bool user_namespace = true;
  bool seccomp = true;
  /// The disk pool holding sandbox directories (borrowed); null: no disk limits.
  actors::disk_quota* disk = nullptr;
  /// Why snapshots cannot include process memory on this host (CRIU, probed at start-up).
  std::string live_snapshot_note = "not probed";
  /// Browser assets (node_modules with @xterm/xterm) for the terminal page.
  std::string web_dir;
  /// Backup archives (borrowed); null: backups are unavailable.
  actors::blob_store* blobs = nullptr;
  /// A sandbox's disk limit unless it has its own; 0 = none. Default: 10 GiB.
  std::uint64_t sandbox_disk_bytes = 10ull << 30;
  /// The HTTP listener of preview URLs ("127.0.0.1:7480"); empty: no preview URLs.
  std::string http_listen = "127.0.0.1:7480";
  /// Preview host names end in this domain. Default: localhost.
  std::string preview_domain = "localhost";
  /// Reported by Warren.version.
  std::string version = "0.1.0";
};

/// Must run in main() before any thread exists (the journal's and RocksDB's included):
/// blocks SIGTERM/SIGINT/SIGCHLD for the KJ loop and ignores SIGPIPE.
void prepare_process();

/// Builds the actor core once the runtime exists. Returns nullptr with `err` set on failure.
using core_factory =
    std::function<std::unique_ptr<actors::core>(actors::sandbox_runtime& runtime, error& err)>;

/// Runs the daemon on the calling thread until SIGTERM or SIGINT, then shuts down in order:
/// stop listening, stop every sandbox, stop the actors, remove the socket. Returns the
/// process exit code (0 on a clean shutdown).
int run(const gateway_options& options, core_factory make_core);

}  // namespace warren::gateway
