// Plain values that cross the actors/ boundary (to gateway/ and tools/). No CAF, no KJ.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "wire/errors.hpp"

namespace warren::actors {

enum class sandbox_status : std::uint8_t {
  stopped = 0,       ///< Known, not running, not asleep (transient: start failed, daemon stopping).
  starting = 1,      ///< Its init is starting.
  running = 2,       ///< Accepting commands.
  hibernated = 3,    ///< Asleep: files on disk, no process, no actor; the next call wakes it.
  needs_repair = 4,  ///< Its journal does not replay; calls fail until it is repaired.
};

/// What a client sees of a sandbox.
struct sandbox_info {
  std::string name;
  std::uint64_t id = 0;
  sandbox_status status = sandbox_status::stopped;
  std::uint64_t created_at_ms = 0;
  std::uint64_t last_activity_ms = 0;
  std::uint64_t sleep_after_ms = 0;  ///< Idle time before it hibernates.
  bool keep_alive = false;           ///< Never hibernates when idle.
};

/// What a sandbox uses now.
struct sandbox_usage {
  std::uint64_t cpu_us = 0;  ///< Since it last started or woke.
  std::uint64_t memory_bytes = 0;
  std::uint64_t memory_peak_bytes = 0;
  std::uint64_t pids = 0;
  std::uint64_t disk_bytes = 0;  ///< Held by its writable layer.
  std::uint64_t memory_limit_bytes = 0;
  std::uint64_t pids_limit = 0;
  std::uint64_t disk_limit_bytes = 0;
  bool disk_known = false;  ///< disk_bytes was filled in by the runtime (from its quota).
};

/// Resource limits of one sandbox; 0 = the daemon's default.
struct sandbox_limits {
  std::uint64_t memory_bytes = 0;
  std::uint64_t pids_max = 0;
  std::uint64_t cpu_millis = 0;  ///< 1/1000 CPU.
  std::uint64_t disk_bytes = 0;  ///< Its writable layer (files, directories, metadata).
  bool operator==(const sandbox_limits&) const = default;
};

/// Lifecycle settings given at creation or changed later.
struct sandbox_settings {
  std::uint64_t sleep_after_ms = 10 * 60 * 1000;  ///< Default: 10 minutes.
  bool keep_alive = false;                         ///< Default: false.
  bool start = true;  ///< Get: start (or wake) an existing sandbox. Default: true.
  sandbox_limits limits;  ///< For a new sandbox, or with change_limits. Default: the daemon's.
  bool change_lifecycle = true;  ///< Configure: replace sleep_after and keep_alive.
  bool change_limits = false;    ///< Configure: replace the non-zero ones of `limits`.
  std::uint64_t from_snapshot = 0;  ///< Create: start with this snapshot's files (0: empty).
};

/// A backup: an archive of one directory of a sandbox in the blob store (see core::record_backup).
struct backup_info {
  std::string id;           ///< 32 hex characters.
  std::string sandbox;      ///< The sandbox it was made of,
  std::uint64_t sandbox_id = 0;  ///< and its incarnation.
  std::string dir;          ///< The directory archived.
  std::string sha256;       ///< Of the archive.
  std::uint64_t bytes = 0;  ///< Size of the archive.
  std::uint64_t created_at_ms = 0;
  std::uint64_t expires_at_ms = 0;
};

/// A snapshot of a sandbox's files (see core::snapshot).
struct snapshot_info {
  std::uint64_t id = 0;
  std::string label;
  std::string sandbox;            ///< The sandbox it was taken of,
  std::uint64_t sandbox_id = 0;   ///< and its incarnation.
  std::uint64_t created_at_ms = 0;
  std::uint64_t pause_us = 0;     ///< How long the sandbox was frozen (0: it did not run).
  std::vector<std::uint32_t> ports;         ///< Its exposed ports then.
  std::vector<std::string> process_ids;     ///< Its running background processes then,
  std::vector<std::vector<std::string>> process_argvs;  ///< and how they were started.
  std::string dir;  ///< Where its files are (for export; never sent to clients).
};

/// An exec as a client asked for it (already copied out of the wire format).
struct exec_request {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;  ///< Extra variables; values secret.
  std::string cwd;              ///< Empty: the default (/workspace).
  std::uint64_t timeout_ms = 0;  ///< 0: none.
  std::string session;           ///< Shell session it runs in; empty: "default".
  bool shell = false;            ///< argv is {"/bin/bash", "-c", line}: the line runs with the session's shell state.
  std::string stdin_data;        ///< Fed to its stdin, then EOF. Never journaled.
  bool stdin_stream = false;     ///< stdin stays open for the client (after stdin_data).
};

/// What the sandbox actor hands back once an exec is journaled: everything the gateway
/// needs to run it over the agent link.
struct exec_ticket {
  std::uint64_t sandbox_id = 0;
  std::uint64_t exec_id = 0;
  std::vector<std::string> argv;
  std::vector<std::string> env;  ///< The complete environment, NAME=VALUE.
  std::string cwd;
  std::uint64_t timeout_ms = 0;
  std::string session;
  bool shell = false;
  std::string stdin_data;
  bool stdin_stream = false;
  std::vector<std::string> call_env;  ///< Names the request set (they apply to this call only).
  bool cwd_given = false;             ///< The request named a cwd (this call only).
};

/// A background process, as the gateway reports it for the journal (status 0: it started;
/// 1 exited, 2 killed, 3 lost: it ended) and as the sandbox's state lists it.
struct process_update {
  std::string process_id;
  std::vector<std::string> argv;
  std::string cwd;
  std::vector<std::string> env_names;  ///< Names only.
  std::uint8_t status = 0;
  std::int32_t exit_code = 0;
  std::int32_t signal = 0;
  bool restart_on_wake = false;  ///< Started again when its sandbox wakes.
  std::string session;           ///< Shell session it runs in (empty: none).
  bool auto_cleanup = false;     ///< Forgotten once it ended.
};

/// A port reachable through a preview URL. The token is the URL's secret part.
struct exposed_port {
  std::uint32_t port = 0;
  std::string label;
  std::string token;
};

/// What the ports call of the core does.
enum class ports_op : std::uint8_t { list = 0, expose = 1, unexpose = 2 };

/// How an exec ended, reported back by the gateway for the journal.
struct exec_outcome {
  std::int32_t exit_code = -1;
  std::int32_t signal = 0;
  bool timed_out = false;
  bool cancelled = false;
  std::uint64_t duration_ms = 0;
  std::uint64_t stdout_bytes = 0;
  std::uint64_t stderr_bytes = 0;
  std::string failed;  ///< Why it could not run; empty if it ran.
  bool oom_killed = false;  ///< The sandbox's memory limit killed a process while it ran.
};

/// Completion callback of the asynchronous facade: an error, or a value.
/// Called exactly once, on a CAF worker thread: hand the result to your own thread.
template <class T>
using callback = std::function<void(const error&, T)>;

}  // namespace warren::actors
