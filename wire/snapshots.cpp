#include "wire/snapshots.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>

#include "wire/journal.capnp.h"
#include "wire/snapshot_codec.hpp"
#include "wire/message_bytes.hpp"

namespace warren::wire {
namespace {

namespace j = warren::wire::journal;

// A registry snapshot of 100,000 sandboxes is a few MB: allow for it.
constexpr std::uint64_t snapshot_traversal_limit = 1ull << 28;

std::string str(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

}  // namespace

std::string encode_snapshot(const sandbox_snapshot& s) {
  capnp::MallocMessageBuilder message;
  auto b = message.initRoot<j::SandboxSnapshot>();
  b.setVersion(s.version);
  b.setSeq(s.seq);
  b.setName(s.name);
  b.setSandboxId(s.sandbox_id);
  b.setCreatedAtMs(s.created_at_ms);
  b.setExecCount(s.exec_count);
  auto open = b.initOpenExecs(s.open_execs.size());
  for (unsigned i = 0; i < s.open_execs.size(); ++i) open.set(i, s.open_execs[i]);
  b.setSleepAfterMs(s.sleep_after_ms);
  b.setKeepAlive(s.keep_alive);
  b.setHibernated(s.hibernated);
  b.setHibernations(s.hibernations);
  b.setRestores(s.restores);
  b.setMemoryBytes(s.memory_bytes);
  b.setPidsMax(s.pids_max);
  b.setCpuMillis(s.cpu_millis);
  b.setDiskBytes(s.disk_bytes);
  auto procs = b.initProcesses(static_cast<unsigned>(s.processes.size()));
  for (unsigned i = 0; i < s.processes.size(); ++i) {
    auto& p = s.processes[i];
    auto o = procs[i];
    o.setProcessId(p.process_id);
    auto argv = o.initArgv(static_cast<unsigned>(p.argv.size()));
    for (unsigned k = 0; k < p.argv.size(); ++k) argv.set(k, p.argv[k]);
    o.setStatus(p.status);
    o.setExitCode(p.exit_code);
    o.setSignal(p.signal);
    o.setRestartOnWake(p.restart_on_wake);
    o.setAutoCleanup(p.auto_cleanup);
  }
  auto ports = b.initPorts(static_cast<unsigned>(s.ports.size()));
  for (unsigned i = 0; i < s.ports.size(); ++i) {
    ports[i].setPort(s.ports[i].port);
    ports[i].setLabel(s.ports[i].label);
    ports[i].setToken(s.ports[i].token);
  }
  return message_bytes(message);
}

std::string encode_snapshot(const registry_snapshot& s) {
  capnp::MallocMessageBuilder message;
  auto b = message.initRoot<j::RegistrySnapshot>();
  b.setVersion(s.version);
  b.setSeq(s.seq);
  b.setNextId(s.next_id);
  auto entries = b.initEntries(s.entries.size());
  for (unsigned i = 0; i < s.entries.size(); ++i) {
    auto& e = s.entries[i];
    auto o = entries[i];
    o.setName(e.name);
    o.setSandboxId(e.sandbox_id);
    o.setCreatedAtMs(e.created_at_ms);
    o.setSleepAfterMs(e.sleep_after_ms);
    o.setKeepAlive(e.keep_alive);
    o.setHibernated(e.hibernated);
  }
  auto snaps = b.initSnapshots(static_cast<unsigned>(s.snapshots.size()));
  for (unsigned i = 0; i < s.snapshots.size(); ++i) {
    encode_snapshot_taken(snaps[i].initTaken(), s.snapshots[i].taken);
    snaps[i].setAtMs(s.snapshots[i].at_ms);
  }
  auto backups = b.initBackups(static_cast<unsigned>(s.backups.size()));
  for (unsigned i = 0; i < s.backups.size(); ++i) {
    encode_backup_created(backups[i].initCreated(), s.backups[i].created);
    backups[i].setAtMs(s.backups[i].at_ms);
  }
  return message_bytes(message);
}

std::optional<sandbox_snapshot> decode_sandbox_snapshot(std::string_view bytes) {
  std::string error;
  std::optional<sandbox_snapshot> out;
  read_message(bytes, [&](capnp::MessageReader& reader) {
    auto r = reader.getRoot<j::SandboxSnapshot>();
    if (r.getVersion() != snapshot_version) return;
    sandbox_snapshot s;
    s.seq = r.getSeq();
    s.name = str(r.getName());
    s.sandbox_id = r.getSandboxId();
    s.created_at_ms = r.getCreatedAtMs();
    s.exec_count = r.getExecCount();
    for (auto id : r.getOpenExecs()) s.open_execs.push_back(id);
    s.sleep_after_ms = r.getSleepAfterMs();
    s.keep_alive = r.getKeepAlive();
    s.hibernated = r.getHibernated();
    s.hibernations = r.getHibernations();
    s.restores = r.getRestores();
    s.memory_bytes = r.getMemoryBytes();
    s.pids_max = r.getPidsMax();
    s.cpu_millis = r.getCpuMillis();
    s.disk_bytes = r.getDiskBytes();
    for (auto p : r.getProcesses()) {
      process_entry e{str(p.getProcessId()), {}, p.getStatus(), p.getExitCode(), p.getSignal(), p.getRestartOnWake(),
                      p.getAutoCleanup()};
      for (auto a : p.getArgv()) e.argv.push_back(str(a));
      s.processes.push_back(std::move(e));
    }
    for (auto p : r.getPorts()) s.ports.push_back(exposed_port{p.getPort(), str(p.getLabel()), str(p.getToken())});
    out = std::move(s);
  }, error, snapshot_traversal_limit);
  return out;
}

std::optional<registry_snapshot> decode_registry_snapshot(std::string_view bytes) {
  std::string error;
  std::optional<registry_snapshot> out;
  read_message(bytes, [&](capnp::MessageReader& reader) {
    auto r = reader.getRoot<j::RegistrySnapshot>();
    if (r.getVersion() != snapshot_version) return;
    registry_snapshot s;
    s.seq = r.getSeq();
    s.next_id = r.getNextId();
    s.entries.reserve(r.getEntries().size());
    for (auto e : r.getEntries())
      s.entries.push_back({str(e.getName()), e.getSandboxId(), e.getCreatedAtMs(), e.getSleepAfterMs(),
                           e.getKeepAlive(), e.getHibernated()});
    for (auto x : r.getSnapshots()) s.snapshots.push_back({decode_snapshot_taken(x.getTaken()), x.getAtMs()});
    for (auto x : r.getBackups()) s.backups.push_back({decode_backup_created(x.getCreated()), x.getAtMs()});
    out = std::move(s);
  }, error, snapshot_traversal_limit);
  return out;
}

}  // namespace warren::wire
