// Journal events as plain C++ values, and their codec to and from the Cap'n Proto
// envelope of journal.capnp. Actors decide and apply these values; only this codec
// touches the persisted bytes, so it is also where old event kinds are upcast.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace warren::wire {

/// A sandbox incarnation was created (registry stream and the sandbox's own stream).
struct sandbox_created {
  std::string name;
  std::uint64_t sandbox_id = 0;
  std::uint64_t from_snapshot = 0;  ///< Its files started as this snapshot (schema v8; 0: none).
  bool operator==(const sandbox_created&) const = default;
};

/// A sandbox incarnation was destroyed (registry stream).
struct sandbox_destroyed {
  std::string name;
  std::uint64_t sandbox_id = 0;
  bool operator==(const sandbox_destroyed&) const = default;
};

/// An exec was accepted and is about to run.
struct exec_started {
  std::uint64_t exec_id = 0;
  std::vector<std::string> argv;
  std::string cwd;
  std::vector<std::string> env_names;  ///< Names only: values may be secrets.
  std::uint64_t timeout_ms = 0;
  std::string session;  ///< Shell session (schema v4; empty before).
  bool operator==(const exec_started&) const = default;
};

/// An exec ended: exited, was killed, timed out, was cancelled or could not run.
struct exec_finished {
  std::uint64_t exec_id = 0;
  std::int32_t exit_code = -1;
  std::int32_t signal = 0;
  bool timed_out = false;
  bool cancelled = false;
  std::uint64_t duration_ms = 0;
  std::uint64_t stdout_bytes = 0;
  std::uint64_t stderr_bytes = 0;
  std::string failed;  ///< Why it could not run at all; empty when it ran.
  bool oom_killed = false;  ///< The memory limit killed a process of the sandbox meanwhile.
  bool operator==(const exec_finished&) const = default;
};

/// A sandbox went to sleep (both its own stream and the registry stream).
struct sandbox_hibernated {
  std::uint64_t sandbox_id = 0;
  std::string reason;  ///< "idle" or "requested".
  std::string name;
  bool operator==(const sandbox_hibernated&) const = default;
};

/// A hibernated sandbox was started again (both streams).
struct sandbox_woke {
  std::uint64_t sandbox_id = 0;
  std::string name;
  bool operator==(const sandbox_woke&) const = default;
};

/// A sandbox's lifecycle settings, at creation and when changed.
struct sandbox_configured {
  std::uint64_t sleep_after_ms = 0;
  bool keep_alive = false;
  std::string name;
  std::uint64_t sandbox_id = 0;
  std::uint64_t memory_bytes = 0;  ///< Limits; 0 = the daemon's default.
  std::uint64_t pids_max = 0;
  std::uint64_t cpu_millis = 0;
  std::uint64_t disk_bytes = 0;
  bool operator==(const sandbox_configured&) const = default;
};

/// A background process started (schema v5).
struct process_started {
  std::string process_id;
  std::vector<std::string> argv;
  std::string cwd;
  std::vector<std::string> env_names;  ///< Names only: values may be secrets.
  bool restart_on_wake = false;  ///< Started again when its sandbox wakes (schema v6).
  std::string session;           ///< Shell session it runs in (schema v7; empty: none).
  bool auto_cleanup = false;     ///< Forgotten by the sandbox's state once it ended (schema v7).
  bool operator==(const process_started&) const = default;
};

/// A background process ended (schema v5). status: 1 exited, 2 killed, 3 lost.
struct process_ended {
  std::string process_id;
  std::uint8_t status = 0;
  std::int32_t exit_code = 0;
  std::int32_t signal = 0;
  bool operator==(const process_ended&) const = default;
};

/// A port of the sandbox was exposed through a preview URL (schema v6). The token is the
/// URL's secret part: journaled so that a link outlives restarts, never logged.
struct port_exposed {
  std::uint32_t port = 0;
  std::string label;  ///< The client's name for it; may be empty.
  std::string token;
  bool operator==(const port_exposed&) const = default;
};

/// A preview URL was revoked (schema v6).
struct port_unexposed {
  std::uint32_t port = 0;
  bool operator==(const port_unexposed&) const = default;
};

/// A running background process recorded in a snapshot (schema v8).
struct snapshot_process {
  std::string process_id;
  std::vector<std::string> argv;
  bool operator==(const snapshot_process&) const = default;
};

/// A sandbox's files were captured as an immutable snapshot (registry stream, schema v8).
struct snapshot_taken {
  std::uint64_t snapshot_id = 0;
  std::string label;
  std::string name;  ///< The sandbox it was taken of.
  std::uint64_t sandbox_id = 0;
  std::uint64_t pause_us = 0;  ///< How long the sandbox was frozen; 0: it was not running.
  std::vector<std::uint32_t> ports;
  std::vector<snapshot_process> processes;
  bool operator==(const snapshot_taken&) const = default;
};

/// A sandbox's files were replaced by a snapshot's (sandbox stream, schema v9).
struct sandbox_restored {
  std::uint64_t snapshot_id = 0;
  bool operator==(const sandbox_restored&) const = default;
};

/// A directory of a sandbox was archived into the blob store (registry stream, schema v10).
struct backup_created {
  std::string backup_id;
  std::string name;
  std::uint64_t sandbox_id = 0;
  std::string dir;
  std::string sha256;
  std::uint64_t bytes = 0;
  std::uint64_t expires_at_ms = 0;
  bool operator==(const backup_created&) const = default;
};

/// A backup and its archive were deleted (registry stream, schema v10).
struct backup_deleted {
  std::string backup_id;
  bool operator==(const backup_deleted&) const = default;
};

/// A snapshot and its files were deleted (registry stream, schema v8).
struct snapshot_deleted {
  std::uint64_t snapshot_id = 0;
  bool operator==(const snapshot_deleted&) const = default;
};

using event = std::variant<sandbox_created, sandbox_destroyed, exec_started, exec_finished, sandbox_hibernated,
                           sandbox_woke, sandbox_configured, process_started, process_ended, port_exposed,
                           port_unexposed, snapshot_taken, snapshot_deleted, sandbox_restored,
                           backup_created, backup_deleted>;

/// One journal entry: position, time and the event.
struct envelope {
  std::uint64_t seq = 0;
  std::uint64_t at_ms = 0;
  bool skippable = false;
  event body;
  bool operator==(const envelope&) const = default;
};

/// Serializes to the bytes stored in the journal (an unpacked Cap'n Proto message).
std::string encode_envelope(const envelope& e);

/// Result of decoding stored bytes.
struct decoded {
  std::optional<envelope> value;  ///< Empty when the entry could not be used.
  bool skipped = false;  ///< An unknown kind marked skippable: not an error, nothing to apply.
  std::string error;     ///< Why decoding failed (corrupt bytes, unknown required kind).
};

/// Parses stored bytes. Never throws: corrupt or unknown input is reported in `error`.
decoded decode_envelope(std::string_view bytes);

/// Short kind name for logs and tools ("exec_started").
const char* event_kind(const event& e);

/// The event's fields as one JSON object (for journal tools); never holds secrets because
/// events never do.
std::string event_json(const event& e);

/// One line for people, e.g. "exec 3 finished: exit 0 in 12 ms".
std::string event_summary(const event& e);

}  // namespace warren::wire
