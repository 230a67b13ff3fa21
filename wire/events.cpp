#include "wire/events.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstdio>
#include <cstring>
#include <iterator>

#include "wire/journal.capnp.h"
#include "wire/snapshot_codec.hpp"
#include "wire/json.hpp"
#include "wire/message_bytes.hpp"

namespace warren::wire {
namespace {

namespace j = warren::wire::journal;

template <class>
inline constexpr bool always_false = false;

void set_texts(capnp::List<capnp::Text>::Builder out, const std::vector<std::string>& in) {
  for (unsigned i = 0; i < in.size(); ++i) out.set(i, in[i]);
}

std::vector<std::string> get_texts(capnp::List<capnp::Text>::Reader in) {
  std::vector<std::string> out;
  out.reserve(in.size());
  for (auto t : in) out.emplace_back(t.cStr(), t.size());
  return out;
}

std::string str(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

}  // namespace

void encode_snapshot_taken(journal::SnapshotTaken::Builder b, const snapshot_taken& x) {
  b.setSnapshotId(x.snapshot_id);
  b.setLabel(x.label);
  b.setName(x.name);
  b.setSandboxId(x.sandbox_id);
  b.setPauseUs(x.pause_us);
  auto ports = b.initPorts(static_cast<unsigned>(x.ports.size()));
  for (unsigned i = 0; i < x.ports.size(); ++i) ports.set(i, x.ports[i]);
  auto procs = b.initProcesses(static_cast<unsigned>(x.processes.size()));
  for (unsigned i = 0; i < x.processes.size(); ++i) {
    procs[i].setProcessId(x.processes[i].process_id);
    set_texts(procs[i].initArgv(static_cast<unsigned>(x.processes[i].argv.size())), x.processes[i].argv);
  }
}

void encode_backup_created(journal::BackupCreated::Builder b, const backup_created& x) {
  b.setBackupId(x.backup_id);
  b.setName(x.name);
  b.setSandboxId(x.sandbox_id);
  b.setDir(x.dir);
  b.setSha256(x.sha256);
  b.setBytes(x.bytes);
  b.setExpiresAtMs(x.expires_at_ms);
}

backup_created decode_backup_created(journal::BackupCreated::Reader r) {
  return {str(r.getBackupId()), str(r.getName()), r.getSandboxId(), str(r.getDir()), str(r.getSha256()), r.getBytes(),
          r.getExpiresAtMs()};
}

snapshot_taken decode_snapshot_taken(journal::SnapshotTaken::Reader r) {
  snapshot_taken x{r.getSnapshotId(), str(r.getLabel()), str(r.getName()), r.getSandboxId(), r.getPauseUs(), {}, {}};
  for (auto p : r.getPorts()) x.ports.push_back(p);
  for (auto p : r.getProcesses()) x.processes.push_back({str(p.getProcessId()), get_texts(p.getArgv())});
  return x;
}

std::string encode_envelope(const envelope& e) {
  capnp::MallocMessageBuilder message(256);
  auto root = message.initRoot<j::Envelope>();
  root.setSeq(e.seq);
  root.setAtMs(e.at_ms);
  root.setSkippable(e.skippable);
  auto ev = root.getEvent();
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, sandbox_created>) {
          auto b = ev.initSandboxCreated();
          b.setName(x.name);
          b.setSandboxId(x.sandbox_id);
          b.setFromSnapshot(x.from_snapshot);
        } else if constexpr (std::is_same_v<T, sandbox_destroyed>) {
          auto b = ev.initSandboxDestroyed();
          b.setName(x.name);
          b.setSandboxId(x.sandbox_id);
        } else if constexpr (std::is_same_v<T, exec_started>) {
          auto b = ev.initExecStarted();
          b.setExecId(x.exec_id);
          set_texts(b.initArgv(x.argv.size()), x.argv);
          b.setCwd(x.cwd);
          set_texts(b.initEnvNames(x.env_names.size()), x.env_names);
          b.setTimeoutMs(x.timeout_ms);
          b.setSession(x.session);
        } else if constexpr (std::is_same_v<T, exec_finished>) {
          auto b = ev.initExecFinished();
          b.setExecId(x.exec_id);
          b.setExitCode(x.exit_code);
          b.setSignal(x.signal);
          b.setTimedOut(x.timed_out);
          b.setCancelled(x.cancelled);
          b.setDurationMs(x.duration_ms);
          b.setStdoutBytes(x.stdout_bytes);
          b.setStderrBytes(x.stderr_bytes);
          b.setFailed(x.failed);
          b.setOomKilled(x.oom_killed);
        } else if constexpr (std::is_same_v<T, sandbox_hibernated>) {
          auto b = ev.initSandboxHibernated();
          b.setSandboxId(x.sandbox_id);
          b.setReason(x.reason);
          b.setName(x.name);
        } else if constexpr (std::is_same_v<T, sandbox_woke>) {
          auto b = ev.initSandboxWoke();
          b.setSandboxId(x.sandbox_id);
          b.setName(x.name);
        } else if constexpr (std::is_same_v<T, sandbox_configured>) {
          auto b = ev.initSandboxConfigured();
          b.setSleepAfterMs(x.sleep_after_ms);
          b.setKeepAlive(x.keep_alive);
          b.setName(x.name);
          b.setSandboxId(x.sandbox_id);
          b.setMemoryBytes(x.memory_bytes);
          b.setPidsMax(x.pids_max);
          b.setCpuMillis(x.cpu_millis);
          b.setDiskBytes(x.disk_bytes);
        } else if constexpr (std::is_same_v<T, process_started>) {
          auto b = ev.initProcessStarted();
          b.setProcessId(x.process_id);
          set_texts(b.initArgv(x.argv.size()), x.argv);
          b.setCwd(x.cwd);
          set_texts(b.initEnvNames(x.env_names.size()), x.env_names);
          b.setRestartOnWake(x.restart_on_wake);
          b.setSession(x.session);
          b.setAutoCleanup(x.auto_cleanup);
        } else if constexpr (std::is_same_v<T, process_ended>) {
          auto b = ev.initProcessEnded();
          b.setProcessId(x.process_id);
          b.setStatus(x.status);
          b.setExitCode(x.exit_code);
          b.setSignal(x.signal);
        } else if constexpr (std::is_same_v<T, port_exposed>) {
          auto b = ev.initPortExposed();
          b.setPort(x.port);
          b.setLabel(x.label);
          b.setToken(x.token);
        } else if constexpr (std::is_same_v<T, port_unexposed>) {
          ev.initPortUnexposed().setPort(x.port);
        } else if constexpr (std::is_same_v<T, snapshot_taken>) {
          encode_snapshot_taken(ev.initSnapshotTaken(), x);
        } else if constexpr (std::is_same_v<T, snapshot_deleted>) {
          ev.initSnapshotDeleted().setSnapshotId(x.snapshot_id);
        } else if constexpr (std::is_same_v<T, sandbox_restored>) {
          ev.initSandboxRestored().setSnapshotId(x.snapshot_id);
        } else if constexpr (std::is_same_v<T, backup_created>) {
          encode_backup_created(ev.initBackupCreated(), x);
        } else if constexpr (std::is_same_v<T, backup_deleted>) {
          ev.initBackupDeleted().setBackupId(x.backup_id);
        } else {
          static_assert(always_false<T>, "event kind without an encoder");
        }
      },
      e.body);
  return message_bytes(message);
}

decoded decode_envelope(std::string_view bytes) {
  decoded out;
  std::string error;
  decoded d;
  bool ok = read_message(bytes, [&](capnp::MessageReader& reader) {
    auto root = reader.getRoot<j::Envelope>();
    envelope e;
    e.seq = root.getSeq();
    e.at_ms = root.getAtMs();
    e.skippable = root.getSkippable();
    auto ev = root.getEvent();
    switch (ev.which()) {
      case j::Envelope::Event::SANDBOX_CREATED: {
        auto r = ev.getSandboxCreated();
        e.body = sandbox_created{str(r.getName()), r.getSandboxId(), r.getFromSnapshot()};
        break;
      }
      case j::Envelope::Event::SANDBOX_DESTROYED: {
        auto r = ev.getSandboxDestroyed();
        e.body = sandbox_destroyed{str(r.getName()), r.getSandboxId()};
        break;
      }
      case j::Envelope::Event::EXEC_STARTED: {
        auto r = ev.getExecStarted();
        e.body = exec_started{r.getExecId(), get_texts(r.getArgv()), str(r.getCwd()),
                              get_texts(r.getEnvNames()), r.getTimeoutMs(), str(r.getSession())};
        break;
      }
      case j::Envelope::Event::EXEC_FINISHED: {
        auto r = ev.getExecFinished();
        exec_finished f;
        f.exec_id = r.getExecId();
        f.exit_code = r.getExitCode();
        f.signal = r.getSignal();
        f.timed_out = r.getTimedOut();
        f.cancelled = r.getCancelled();
        f.duration_ms = r.getDurationMs();
        f.stdout_bytes = r.getStdoutBytes();
        f.stderr_bytes = r.getStderrBytes();
        f.failed = str(r.getFailed());
        f.oom_killed = r.getOomKilled();
        e.body = std::move(f);
        break;
      }
      case j::Envelope::Event::SANDBOX_HIBERNATED: {
        auto r = ev.getSandboxHibernated();
        e.body = sandbox_hibernated{r.getSandboxId(), str(r.getReason()), str(r.getName())};
        break;
      }
      case j::Envelope::Event::SANDBOX_WOKE: {
        auto r = ev.getSandboxWoke();
        e.body = sandbox_woke{r.getSandboxId(), str(r.getName())};
        break;
      }
      case j::Envelope::Event::SANDBOX_CONFIGURED: {
        auto r = ev.getSandboxConfigured();
        e.body = sandbox_configured{r.getSleepAfterMs(), r.getKeepAlive(), str(r.getName()), r.getSandboxId(),
                                    r.getMemoryBytes(), r.getPidsMax(), r.getCpuMillis(), r.getDiskBytes()};
        break;
      }
      case j::Envelope::Event::PROCESS_STARTED: {
        auto r = ev.getProcessStarted();
        e.body = process_started{str(r.getProcessId()), get_texts(r.getArgv()), str(r.getCwd()), get_texts(r.getEnvNames()),
                                 r.getRestartOnWake(), str(r.getSession()), r.getAutoCleanup()};
        break;
      }
      case j::Envelope::Event::PROCESS_ENDED: {
        auto r = ev.getProcessEnded();
        e.body = process_ended{str(r.getProcessId()), r.getStatus(), r.getExitCode(), r.getSignal()};
        break;
      }
      case j::Envelope::Event::PORT_EXPOSED: {
        auto r = ev.getPortExposed();
        e.body = port_exposed{r.getPort(), str(r.getLabel()), str(r.getToken())};
        break;
      }
      case j::Envelope::Event::PORT_UNEXPOSED:
        e.body = port_unexposed{ev.getPortUnexposed().getPort()};
        break;
      case j::Envelope::Event::SNAPSHOT_TAKEN:
        e.body = decode_snapshot_taken(ev.getSnapshotTaken());
        break;
      case j::Envelope::Event::SNAPSHOT_DELETED:
        e.body = snapshot_deleted{ev.getSnapshotDeleted().getSnapshotId()};
        break;
      case j::Envelope::Event::BACKUP_CREATED:
        e.body = decode_backup_created(ev.getBackupCreated());
        break;
      case j::Envelope::Event::BACKUP_DELETED:
        e.body = backup_deleted{str(ev.getBackupDeleted().getBackupId())};
        break;
      case j::Envelope::Event::SANDBOX_RESTORED:
        e.body = sandbox_restored{ev.getSandboxRestored().getSnapshotId()};
        break;
      default:
        // A kind written by a newer daemon.
        if (e.skippable) {
          d.skipped = true;
        } else {
          d.error = "journal entry seq " + std::to_string(e.seq) +
                      " has an event kind this daemon does not know (" +
                      std::to_string(static_cast<unsigned>(ev.which())) + ")";
        }
        return;
    }
    d.value = std::move(e);
  }, error);
  if (!ok) {
    out.error = "journal " + error;
    return out;
  }
  return d;
}

const char* event_kind(const event& e) {
  static constexpr const char* kinds[] = {"sandbox_created",    "sandbox_destroyed", "exec_started",
                                          "exec_finished",      "sandbox_hibernated", "sandbox_woke",
                                          "sandbox_configured", "process_started",  "process_ended",
                                          "port_exposed",       "port_unexposed",   "snapshot_taken",
                                          "snapshot_deleted",   "sandbox_restored",
                                          "backup_created",     "backup_deleted"};
  static_assert(std::size(kinds) == std::variant_size_v<event>);
  return kinds[e.index()];
}

namespace {

std::string json_list(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + json_quote(v[i]);
  return out + "]";
}

std::string shell_words(const std::vector<std::string>& argv) {
  std::string out;
  for (auto& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`;&|<>()*?") == std::string::npos;
    out += plain ? a : json_quote(a);
  }
  return out.size() > 200 ? out.substr(0, 197) + "..." : out;
}

}  // namespace

std::string event_json(const event& e) {
  auto kind = json_quote(event_kind(e));
  return std::visit(
      [&](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        std::string f = "{\"kind\":" + kind;
        if constexpr (std::is_same_v<T, sandbox_created>) {
          f += ",\"name\":" + json_quote(x.name) + ",\"sandboxId\":" + std::to_string(x.sandbox_id) +
               ",\"fromSnapshot\":" + std::to_string(x.from_snapshot);
        } else if constexpr (std::is_same_v<T, sandbox_destroyed>) {
          f += ",\"name\":" + json_quote(x.name) + ",\"sandboxId\":" + std::to_string(x.sandbox_id);
        } else if constexpr (std::is_same_v<T, snapshot_taken>) {
          f += ",\"snapshotId\":" + std::to_string(x.snapshot_id) + ",\"label\":" + json_quote(x.label) +
               ",\"name\":" + json_quote(x.name) + ",\"sandboxId\":" + std::to_string(x.sandbox_id) +
               ",\"pauseUs\":" + std::to_string(x.pause_us) + ",\"ports\":[";
          for (std::size_t i = 0; i < x.ports.size(); ++i) f += (i ? "," : "") + std::to_string(x.ports[i]);
          f += "],\"processes\":[";
          for (std::size_t i = 0; i < x.processes.size(); ++i)
            f += std::string(i ? "," : "") + "{\"processId\":" + json_quote(x.processes[i].process_id) +
                 ",\"argv\":" + json_list(x.processes[i].argv) + "}";
          f += "]";
        } else if constexpr (std::is_same_v<T, backup_created>) {
          f += ",\"backupId\":" + json_quote(x.backup_id) + ",\"name\":" + json_quote(x.name) +
               ",\"sandboxId\":" + std::to_string(x.sandbox_id) + ",\"dir\":" + json_quote(x.dir) +
               ",\"sha256\":" + json_quote(x.sha256) + ",\"bytes\":" + std::to_string(x.bytes) +
               ",\"expiresAtMs\":" + std::to_string(x.expires_at_ms);
        } else if constexpr (std::is_same_v<T, backup_deleted>) {
          f += ",\"backupId\":" + json_quote(x.backup_id);
        } else if constexpr (std::is_same_v<T, snapshot_deleted> || std::is_same_v<T, sandbox_restored>) {
          f += ",\"snapshotId\":" + std::to_string(x.snapshot_id);
        } else if constexpr (std::is_same_v<T, exec_started>) {
          f += ",\"execId\":" + std::to_string(x.exec_id) + ",\"argv\":" + json_list(x.argv) +
               ",\"cwd\":" + json_quote(x.cwd) + ",\"envNames\":" + json_list(x.env_names) +
               ",\"timeoutMs\":" + std::to_string(x.timeout_ms) + ",\"session\":" + json_quote(x.session);
        } else if constexpr (std::is_same_v<T, exec_finished>) {
          f += ",\"execId\":" + std::to_string(x.exec_id) + ",\"exitCode\":" + std::to_string(x.exit_code) +
               ",\"signal\":" + std::to_string(x.signal) + ",\"timedOut\":" + (x.timed_out ? "true" : "false") +
               ",\"cancelled\":" + (x.cancelled ? "true" : "false") +
               ",\"durationMs\":" + std::to_string(x.duration_ms) +
               ",\"stdoutBytes\":" + std::to_string(x.stdout_bytes) +
               ",\"stderrBytes\":" + std::to_string(x.stderr_bytes) + ",\"failed\":" + json_quote(x.failed) +
               ",\"oomKilled\":" + (x.oom_killed ? "true" : "false");
        } else if constexpr (std::is_same_v<T, sandbox_hibernated>) {
          f += ",\"sandboxId\":" + std::to_string(x.sandbox_id) + ",\"reason\":" + json_quote(x.reason);
        } else if constexpr (std::is_same_v<T, sandbox_woke>) {
          f += ",\"sandboxId\":" + std::to_string(x.sandbox_id);
        } else if constexpr (std::is_same_v<T, sandbox_configured>) {
          f += ",\"sleepAfterMs\":" + std::to_string(x.sleep_after_ms) +
               ",\"keepAlive\":" + (x.keep_alive ? "true" : "false") +
               ",\"memoryBytes\":" + std::to_string(x.memory_bytes) + ",\"pidsMax\":" + std::to_string(x.pids_max) +
               ",\"cpuMillis\":" + std::to_string(x.cpu_millis) + ",\"diskBytes\":" + std::to_string(x.disk_bytes);
        } else if constexpr (std::is_same_v<T, process_started>) {
          f += ",\"processId\":" + json_quote(x.process_id) + ",\"argv\":" + json_list(x.argv) +
               ",\"cwd\":" + json_quote(x.cwd) + ",\"envNames\":" + json_list(x.env_names) +
               ",\"restartOnWake\":" + (x.restart_on_wake ? "true" : "false") + ",\"session\":" + json_quote(x.session) +
               ",\"autoCleanup\":" + (x.auto_cleanup ? "true" : "false");
        } else if constexpr (std::is_same_v<T, process_ended>) {
          f += ",\"processId\":" + json_quote(x.process_id) + ",\"status\":" + std::to_string(x.status) +
               ",\"exitCode\":" + std::to_string(x.exit_code) + ",\"signal\":" + std::to_string(x.signal);
        } else if constexpr (std::is_same_v<T, port_exposed>) {
          // The token stays out: journal readers see that a URL exists, not the URL.
          f += ",\"port\":" + std::to_string(x.port) + ",\"label\":" + json_quote(x.label);
        } else if constexpr (std::is_same_v<T, port_unexposed>) {
          f += ",\"port\":" + std::to_string(x.port);
        }
        return f + "}";
      },
      e);
}

std::string event_summary(const event& e) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, sandbox_created>) {
          return "sandbox " + x.name + " created (id " + std::to_string(x.sandbox_id) +
                 (x.from_snapshot ? ", from snapshot " + std::to_string(x.from_snapshot) : std::string()) + ")";
        } else if constexpr (std::is_same_v<T, sandbox_destroyed>) {
          return "sandbox " + x.name + " destroyed (id " + std::to_string(x.sandbox_id) + ")";
        } else if constexpr (std::is_same_v<T, exec_started>) {
          std::string where;
          if (!x.cwd.empty()) where = "in " + x.cwd;
          if (!x.session.empty()) where += (where.empty() ? "" : ", ") + std::string("session ") + x.session;
          return "exec " + std::to_string(x.exec_id) + " started: " + shell_words(x.argv) +
                 (where.empty() ? "" : " (" + where + ")");
        } else if constexpr (std::is_same_v<T, exec_finished>) {
          std::string how;
          if (!x.failed.empty()) how = "failed: " + x.failed;
          else if (x.cancelled) how = "cancelled by the caller";
          else if (x.timed_out) how = "timed out";
          else if (x.oom_killed) how = "killed: out of memory";
          else if (x.signal != 0) how = "killed by signal " + std::to_string(x.signal);
          else how = "exit " + std::to_string(x.exit_code);
          return "exec " + std::to_string(x.exec_id) + " finished: " + how + " in " + std::to_string(x.duration_ms) + " ms";
        } else if constexpr (std::is_same_v<T, sandbox_hibernated>) {
          return "hibernated (" + x.reason + ")";
        } else if constexpr (std::is_same_v<T, sandbox_woke>) {
          return "woke";
        } else if constexpr (std::is_same_v<T, process_started>) {
          std::string how;
          if (!x.session.empty()) how = "session " + x.session;
          if (x.restart_on_wake) how += (how.empty() ? "" : ", ") + std::string("restart on wake");
          if (x.auto_cleanup) how += (how.empty() ? "" : ", ") + std::string("auto cleanup");
          return "process " + x.process_id + " started: " + shell_words(x.argv) + (how.empty() ? "" : " (" + how + ")");
        } else if constexpr (std::is_same_v<T, process_ended>) {
          return "process " + x.process_id + (x.status == 1   ? " exited " + std::to_string(x.exit_code)
                                              : x.status == 2 ? " killed by signal " + std::to_string(x.signal)
                                                              : std::string(" lost: the sandbox stopped while it ran"));
        } else if constexpr (std::is_same_v<T, port_exposed>) {
          return "port " + std::to_string(x.port) + " exposed" + (x.label.empty() ? "" : " as " + x.label);
        } else if constexpr (std::is_same_v<T, port_unexposed>) {
          return "port " + std::to_string(x.port) + " unexposed";
        } else if constexpr (std::is_same_v<T, snapshot_taken>) {
          return "snapshot " + std::to_string(x.snapshot_id) + (x.label.empty() ? "" : " (" + x.label + ")") +
                 " taken of " + x.name + (x.pause_us ? ", paused " + std::to_string(x.pause_us) + " us" : "");
        } else if constexpr (std::is_same_v<T, snapshot_deleted>) {
          return "snapshot " + std::to_string(x.snapshot_id) + " deleted";
        } else if constexpr (std::is_same_v<T, sandbox_restored>) {
          return "restored from snapshot " + std::to_string(x.snapshot_id);
        } else if constexpr (std::is_same_v<T, backup_created>) {
          return "backup " + x.backup_id + " of " + x.name + ":" + x.dir + " (" + std::to_string(x.bytes) + " bytes)";
        } else if constexpr (std::is_same_v<T, backup_deleted>) {
          return "backup " + x.backup_id + " deleted";
        } else {
          return "configured: " + (x.keep_alive ? std::string("keep alive") : "sleep after " + std::to_string(x.sleep_after_ms / 1000) + " s");
        }
      },
      e);
}

}  // namespace warren::wire
