// Pure event-sourcing logic of a sandbox: its replayable state, `apply`, and the
// validation and deciding of commands. No I/O, no CAF: tested directly.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "actors/types.hpp"
#include "wire/events.hpp"
#include "wire/snapshots.hpp"

namespace warren::actors {

/// Limits on what one exec request may carry.
struct exec_limits {
  std::size_t max_args = 4096;               ///< Default: 4096.
  std::size_t max_total_bytes = 1 << 20;     ///< argv + env + cwd. Default: 1 MiB.
  std::size_t max_env = 1024;                ///< Default: 1024 variables.
  std::uint64_t max_timeout_ms = 7ull * 24 * 3600 * 1000;  ///< Default: 7 days.
  std::size_t max_stdin = 16u << 20;         ///< stdin bytes in one request. Default: 16 MiB.
};

/// Default idle time before a sandbox hibernates: 10 minutes.
inline constexpr std::uint64_t default_sleep_after_ms = 10 * 60 * 1000;

/// Lifecycle settings of a sandbox, journaled as sandbox_configured.
struct sandbox_config {
  std::uint64_t sleep_after_ms = default_sleep_after_ms;  ///< Default: 10 minutes.
  bool keep_alive = false;                                ///< Default: false (hibernate when idle).
  sandbox_limits limits;                                  ///< Default: the daemon's (all 0).
  bool operator==(const sandbox_config&) const = default;
};

/// The durable state of one sandbox incarnation, rebuilt by replaying its stream.
struct sandbox_record {
  std::string name;
  std::uint64_t id = 0;
  std::uint64_t last_seq = 0;       ///< Seq of the last applied event.
  std::uint64_t created_at_ms = 0;
  std::uint64_t exec_count = 0;     ///< Execs started; also the last exec id.
  std::set<std::uint64_t> open_execs;  ///< Started and not yet finished.
  sandbox_config config;
  bool hibernated = false;          ///< Asleep since its last sandbox_hibernated.
  std::uint64_t hibernations = 0;   ///< How many times it went to sleep.
  std::uint64_t restores = 0;       ///< How many times a snapshot replaced its files.
  std::vector<wire::process_entry> processes;  ///< Background processes, oldest first (at most 100).
  std::vector<wire::exposed_port> ports;        ///< Preview URLs, by port.
};

/// Applies one event. Never fails, never does I/O; events that do not concern a sandbox
/// stream are ignored.
void apply(sandbox_record& rec, const wire::envelope& e);

/// Checks an exec request against the limits and the rules (argv non-empty, no NUL bytes,
/// env names valid, cwd absolute). Returns an invalid_argument error naming the field.
error validate_exec(const exec_request& req, const exec_limits& limits = {});

/// Shell session names: 1-63 characters of a-z, 0-9, '-' and '_'.
error validate_session_name(const std::string& name);

/// The environment every command starts with, before the request's own variables.
std::vector<std::pair<std::string, std::string>> default_env(const std::string& sandbox_name);

/// Decides an accepted exec: the ticket for the gateway and the event to journal.
/// Precondition: validate_exec(req) passed.
struct exec_decision {
  exec_ticket ticket;
  wire::exec_started event;
};
exec_decision decide_exec(const sandbox_record& rec, const exec_request& req);

/// The journal event for a finished exec.
wire::exec_finished decide_exec_end(std::uint64_t exec_id, const exec_outcome& o);

/// Events that close execs left open by a daemon that stopped while they ran.
std::vector<wire::event> decide_recovery(const sandbox_record& rec);

/// Checks an expose_port request: a TCP port, a label of at most 63 of a-z, 0-9, '-', '_',
/// and room for one more (re-exposing a port is always allowed).
error validate_expose(const sandbox_record& rec, std::uint32_t port, const std::string& label);

/// Checks lifecycle settings: sleep_after between 1 s and 30 days.
error validate_config(const sandbox_config& c);

/// Whether a sandbox may hibernate now: not kept alive, no exec running, and idle (no
/// activity, and no CPU use as seen by the caller) for sleep_after.
bool may_hibernate(const sandbox_record& rec, std::uint64_t now_ms, std::uint64_t last_activity_ms);

/// When to look again: the moment sleep_after elapses after the last activity.
std::uint64_t idle_deadline_ms(const sandbox_record& rec, std::uint64_t last_activity_ms);

/// State snapshots: the record as a snapshot and back (exact round trip).
wire::sandbox_snapshot to_snapshot(const sandbox_record& rec);
sandbox_record from_snapshot(const wire::sandbox_snapshot& snap);

/// The replayed state as a JSON object, for `warren journal --at`.
std::string record_json(const sandbox_record& rec);

/// Default working directory of commands.
inline constexpr const char* default_cwd = "/workspace";
/// Background processes a sandbox's state remembers (running ones always; then the newest).
inline constexpr std::size_t max_processes = 100;
/// Ports one sandbox may expose at once.
inline constexpr std::size_t max_exposed_ports = 64;

}  // namespace warren::actors
