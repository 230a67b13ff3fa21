// Internal to actors/: atoms and CAF inspection of the message types. Included only by
// the CAF translation units of this folder.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <unordered_map>
#include <utility>

#include "actors/types.hpp"

namespace warren::actors {

using wr_get_atom = caf::atom_constant<caf::atom("wr_get")>;
using wr_list_atom = caf::atom_constant<caf::atom("wr_list")>;
using wr_destroy_atom = caf::atom_constant<caf::atom("wr_destroy")>;
using wr_info_atom = caf::atom_constant<caf::atom("wr_info")>;
using wr_start_atom = caf::atom_constant<caf::atom("wr_start")>;
using wr_stop_atom = caf::atom_constant<caf::atom("wr_stop")>;
using wr_exec_atom = caf::atom_constant<caf::atom("wr_exec")>;
using wr_ended_atom = caf::atom_constant<caf::atom("wr_ended")>;
using wr_hold_atom = caf::atom_constant<caf::atom("wr_hold")>;
using wr_proc_atom = caf::atom_constant<caf::atom("wr_proc")>;
using wr_procs_atom = caf::atom_constant<caf::atom("wr_procs")>;
using wr_ports_atom = caf::atom_constant<caf::atom("wr_ports")>;
using wr_release_atom = caf::atom_constant<caf::atom("wr_release")>;
using wr_down_atom = caf::atom_constant<caf::atom("wr_shut")>;
using wr_status_atom = caf::atom_constant<caf::atom("wr_status")>;
using wr_synced_atom = caf::atom_constant<caf::atom("wr_synced")>;
using wr_started_atom = caf::atom_constant<caf::atom("wr_rtup")>;
using wr_exited_atom = caf::atom_constant<caf::atom("wr_rtexit")>;
using wr_stopped_atom = caf::atom_constant<caf::atom("wr_rtstop")>;
using wr_idle_atom = caf::atom_constant<caf::atom("wr_idle")>;
using wr_sleep_atom = caf::atom_constant<caf::atom("wr_sleep")>;
using wr_config_atom = caf::atom_constant<caf::atom("wr_config")>;
using wr_wakeall_atom = caf::atom_constant<caf::atom("wr_wakeall")>;
using wr_journal_atom = caf::atom_constant<caf::atom("wr_journal")>;
using wr_lookup_atom = caf::atom_constant<caf::atom("wr_lookup")>;
using wr_snap_atom = caf::atom_constant<caf::atom("wr_snap")>;
using wr_snaps_atom = caf::atom_constant<caf::atom("wr_snaps")>;
using wr_snapdel_atom = caf::atom_constant<caf::atom("wr_snapdel")>;
using wr_restore_atom = caf::atom_constant<caf::atom("wr_restore")>;
using wr_backup_atom = caf::atom_constant<caf::atom("wr_backup")>;
using wr_backups_atom = caf::atom_constant<caf::atom("wr_backups")>;
using wr_bkdel_atom = caf::atom_constant<caf::atom("wr_bkdel")>;
using wr_import_atom = caf::atom_constant<caf::atom("wr_import")>;
using wr_imported_atom = caf::atom_constant<caf::atom("wr_imptd")>;

/// CAF error category of warren::errc.
using wr_error_atom = caf::atom_constant<caf::atom("warren")>;

inline caf::error to_caf(const error& e) {
  return caf::error(static_cast<std::uint8_t>(e.code), wr_error_atom::value,
                    caf::make_message(e.message));
}

/// Translates any CAF error (ours, or CAF's own such as a request timeout) into ours.
error from_caf(const caf::error& e);

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_info& x) {
  return f(caf::meta::type_name("sandbox_info"), x.name, x.id, x.status, x.created_at_ms,
           x.last_activity_ms, x.sleep_after_ms, x.keep_alive);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_settings& x) {
  return f(caf::meta::type_name("sandbox_settings"), x.sleep_after_ms, x.keep_alive, x.start, x.limits.memory_bytes,
           x.limits.pids_max, x.limits.cpu_millis, x.limits.disk_bytes, x.change_lifecycle, x.change_limits, x.from_snapshot);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backup_info& x) {
  return f(caf::meta::type_name("backup_info"), x.id, x.sandbox, x.sandbox_id, x.dir, x.sha256, x.bytes,
           x.created_at_ms, x.expires_at_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, snapshot_info& x) {
  return f(caf::meta::type_name("snapshot_info"), x.id, x.label, x.sandbox, x.sandbox_id, x.created_at_ms, x.pause_us,
           x.ports, x.process_ids, x.process_argvs, x.dir);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_usage& x) {
  return f(caf::meta::type_name("sandbox_usage"), x.cpu_us, x.memory_bytes, x.memory_peak_bytes, x.pids, x.disk_bytes,
           x.memory_limit_bytes, x.pids_limit, x.disk_limit_bytes, x.disk_known);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_request& x) {
  return f(caf::meta::type_name("exec_request"), x.argv, x.env, x.cwd, x.timeout_ms, x.session, x.shell, x.stdin_data, x.stdin_stream);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_ticket& x) {
  return f(caf::meta::type_name("exec_ticket"), x.sandbox_id, x.exec_id, x.argv, x.env, x.cwd,
           x.timeout_ms, x.session, x.shell, x.stdin_data, x.stdin_stream, x.call_env, x.cwd_given);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, process_update& x) {
  return f(caf::meta::type_name("process_update"), x.process_id, x.argv, x.cwd, x.env_names, x.status, x.exit_code,
           x.signal, x.restart_on_wake, x.session, x.auto_cleanup);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exposed_port& x) {
  return f(caf::meta::type_name("exposed_port"), x.port, x.label, x.token);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_outcome& x) {
  return f(caf::meta::type_name("exec_outcome"), x.exit_code, x.signal, x.timed_out, x.cancelled,
           x.duration_ms, x.stdout_bytes, x.stderr_bytes, x.failed, x.oom_killed);
}

/// The input gate of an actor: while a journal write or a runtime call is in flight the
/// actor holds the gate, and further commands wait here in arrival order. Holds nest (a start
/// followed by a write); the held commands run when the last hold is released.
class input_gate {
 public:
  bool busy() const { return holds_ > 0; }
  void hold() { ++holds_; }
  /// Runs `f` now if nothing holds the gate, else queues it.
  void run(std::function<void()> f) {
    if (holds_ > 0) held_.push_back(std::move(f));
    else f();
  }
  /// Releases one hold; at zero, runs held commands until one holds the gate again.
  void release() {
    if (holds_ > 0) --holds_;
    while (holds_ == 0 && !held_.empty()) {
      auto f = std::move(held_.front());
      held_.pop_front();
      f();
    }
  }

 private:
  int holds_ = 0;
  std::deque<std::function<void()>> held_;
};

/// Pairs journal appends with their continuations. The journal's writer thread reports a
/// sync by sending (wr_synced, ticket, code, message) to the actor; the actor's handler calls
/// complete(), so continuations always run on the actor, never on the writer thread.
class write_tracker {
 public:
  /// Registers `then`; returns the callback to give to journal::append.
  std::function<void(const error&)> track(caf::actor me, std::function<void(const error&)> then) {
    auto ticket = next_++;
    pending_.emplace(ticket, std::move(then));
    return [me = std::move(me), ticket](const error& e) {
      caf::anon_send(me, wr_synced_atom::value, ticket, static_cast<std::uint8_t>(e.code), e.message);
    };
  }
  void complete(std::uint64_t ticket, std::uint8_t code, std::string message) {
    auto it = pending_.find(ticket);
    if (it == pending_.end()) return;
    auto f = std::move(it->second);
    pending_.erase(it);
    f(error{static_cast<errc>(code), std::move(message)});
  }

 private:
  std::uint64_t next_ = 1;
  std::unordered_map<std::uint64_t, std::function<void(const error&)>> pending_;
};

inline std::uint64_t now_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace warren::actors
