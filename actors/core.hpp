// The actor system behind a plain, asynchronous facade. The gateway calls these methods
// from its KJ thread; each completes through a callback on a CAF worker thread. No CAF
// header is needed to use it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/journal_tools.hpp"
#include "actors/runtime.hpp"
#include "actors/types.hpp"

namespace warren::storage {
class journal;
struct layout;
}  // namespace warren::storage

namespace warren::actors {

/// Tuning of the actor system.
struct core_options {
  /// CAF scheduler threads. Default: 2 (this project's reference machine has 2 cores).
  std::size_t scheduler_threads = 2;
  /// Timeout of every internal request, e.g. waiting for a journal sync. Default: 30 s.
  std::uint64_t request_timeout_ms = 30000;
  /// Longest wait for a sandbox's init to come up. Default: 30 s.
  std::uint64_t start_timeout_ms = 30000;
  /// A sandbox's state is snapshotted every this many events, so that waking replays only
  /// the tail. Default: 100.
  std::uint64_t snapshot_every = 100;
  /// The registry's state is snapshotted every this many registry events (its snapshot holds
  /// every sandbox, so it is taken less often). Default: 1000.
  std::uint64_t registry_snapshot_every = 1000;
};

class core {
 public:
  /// Replays the registry stream and starts the actor system. `journal`, `layout` and
  /// `runtime` are borrowed and must outlive the core. Returns nullptr with `err` set when
  /// the journal cannot be replayed.
  static std::unique_ptr<core> start(const core_options& options, storage::journal& journal,
                                     const storage::layout& layout, sandbox_runtime& runtime,
                                     error& err);

  /// Stops the actor system; call shutdown() and wait for it first.
  ~core();

  /// Get-or-create: returns once the sandbox runs (and, if new, once its creation is durable).
  /// `settings` apply when it is created; an existing sandbox keeps its own (see configure).
  void get_sandbox(std::string name, bool create, sandbox_settings settings, callback<sandbox_info> done);

  /// Every known sandbox, sorted by name.
  void list(callback<std::vector<sandbox_info>> done);

  /// Stops the sandbox and erases it (journal, files, cgroup). Value: whether it existed.
  void destroy(std::string name, callback<bool> done);

  /// Current info of one incarnation (fails with sandbox_gone if destroyed). Does not wake it.
  void sandbox_info(std::string name, std::uint64_t id, callback<actors::sandbox_info> done);

  /// Changes sleep_after / keep_alive and/or the limits, as `settings` says (journaled).
  void configure(std::string name, std::uint64_t id, sandbox_settings settings, callback<actors::sandbox_info> done);

  /// Current resource use (cgroup and writable layer); does not wake a hibernated sandbox.
  void usage(std::string name, std::uint64_t id, callback<sandbox_usage> done);

  /// Hibernates now (fails with busy while a command runs).
  void hibernate(std::string name, std::uint64_t id, callback<actors::sandbox_info> done);

  /// Validates and journals an exec, starting the sandbox if needed; returns the ticket.
  void begin_exec(std::string name, std::uint64_t id, exec_request request,
                  callback<exec_ticket> done);

  /// Journals how an exec ended. Value: true when recorded.
  void end_exec(std::string name, std::uint64_t id, std::uint64_t exec_id, exec_outcome outcome,
                callback<bool> done);

  /// Starts the sandbox if needed and keeps it from hibernating until release() (file
  /// operations: work that is not a journaled command). Value: its id, for the runtime.
  /// A soft hold (preview requests) keeps it from hibernating when idle, but an explicit
  /// hibernate still goes ahead.
  void hold(std::string name, std::uint64_t id, callback<std::uint64_t> done, bool soft = false);
  /// Ends one hold (of the same kind); counts as activity. Fire and forget.
  void release(std::string name, std::uint64_t id, bool soft = false);

  /// Journals a background process's start (status 0) or end. Value: true when recorded.
  void process_event(std::string name, std::uint64_t id, process_update update, callback<bool> done);
  /// The background processes the sandbox's state remembers (journaled), oldest first.
  void processes(std::string name, std::uint64_t id, callback<std::vector<process_update>> done);

  /// Preview URLs (journaled; do not wake the sandbox). list: every exposed port, by port.
  /// expose: the port with its token (a port exposed again keeps its token; the label is
  /// replaced). unexpose: the ports removed (empty when it was not exposed).
  void ports(std::string name, std::uint64_t id, ports_op op, std::uint32_t port, std::string label,
             callback<std::vector<exposed_port>> done);
  /// The current incarnation of `name` and its exposed ports (the preview proxy's lookup).
  struct preview_target {
    std::uint64_t sandbox_id = 0;
    std::vector<exposed_port> ports;
  };
  void find_preview(std::string name, callback<preview_target> done);

  /// Captures the sandbox's files as a snapshot (journaled in the registry; it outlives the
  /// sandbox). A running sandbox is frozen for the moment it takes and keeps running; a
  /// hibernated one is not woken. Fails with unavailable without the disk pool.
  void snapshot(std::string name, std::uint64_t id, std::string label, callback<snapshot_info> done);
  /// Replaces the sandbox's files by a snapshot's: its processes stop (running ones are
  /// recorded as lost), then it starts again on the snapshot's files (restart_on_wake
  /// processes come back). Fails with busy while a command runs.
  void restore(std::string name, std::uint64_t id, std::uint64_t snapshot_id, callback<actors::sandbox_info> done);
  /// Backups (archives in the blob store, made and read by the gateway): journals one that
  /// was made (its archive is durable already); lists them (oldest first); journals the
  /// deletion of one (value: whether it existed; the caller removes the archive after).
  void record_backup(backup_info backup, callback<backup_info> done);
  void backups(callback<std::vector<backup_info>> done);
  void delete_backup(std::string id, callback<bool> done);
  /// Importing a snapshot exported elsewhere: begin_import gives an id and a staging
  /// directory (`dir`) for `btrfs receive`; finish_import (with that info) adopts what was
  /// received as the snapshot and journals it.
  void begin_import(std::string label, callback<snapshot_info> done);
  void finish_import(snapshot_info staged, callback<snapshot_info> done);
  /// Every snapshot, by id.
  void list_snapshots(callback<std::vector<snapshot_info>> done);
  /// Deletes a snapshot and its files. Value: whether it existed. Sandboxes made from it keep
  /// their files (copies on write, not references).
  void delete_snapshot(std::uint64_t snapshot_id, callback<bool> done);

  /// A sandbox's journal from `from_seq`, at most `limit` entries (0: 10000), and its last seq.
  struct journal_page {
    std::vector<journal_entry> entries;
    std::uint64_t last_seq = 0;
  };
  void read_journal(std::string name, std::uint64_t from_seq, std::uint32_t limit, callback<journal_page> done);

  /// The sandbox's state replayed up to event `at_seq` (0: all), as JSON.
  void journal_state(std::string name, std::uint64_t at_seq, callback<std::string> done);

  /// Replays every journal; value: streams checked and one line per problem.
  struct check_report {
    std::uint32_t checked = 0;
    std::vector<std::string> problems;
  };
  void check_journals(callback<check_report> done);

  /// Refuses new work and stops every running sandbox; `done` runs when all are stopped.
  void shutdown(std::function<void()> done);

  struct impl;

 private:
  explicit core(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace warren::actors
