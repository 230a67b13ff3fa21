// warren snapshot / snapshots / fork: snapshots of sandboxes' files and sandboxes made from them.
#include <cstdio>
#include <cstdlib>
#include <set>

#include "tools/warren/cli.hpp"
#include "wire/json.hpp"

namespace warren::cli {
namespace {

std::string snapshot_json(wire::SnapshotInfo::Reader s) {
  std::string ports, procs;
  for (auto p : s.getPorts()) ports += (ports.empty() ? "" : ",") + std::to_string(p);
  for (auto p : s.getProcesses()) {
    std::string cmd;
    for (auto a : p.getCommand()) cmd += (cmd.empty() ? "" : ",") + wire::json_quote(a.cStr());
    procs += std::string(procs.empty() ? "" : ",") + "{\"id\":" + wire::json_quote(p.getId().cStr()) + ",\"command\":[" +
             cmd + "]}";
  }
  return "{\"id\":" + std::to_string(s.getId()) + ",\"label\":" + wire::json_quote(s.getLabel().cStr()) +
         ",\"sandbox\":" + wire::json_quote(s.getSandbox().cStr()) + ",\"sandboxId\":" + std::to_string(s.getSandboxId()) +
         ",\"createdAtMs\":" + std::to_string(s.getCreatedAtMs()) + ",\"pauseUs\":" + std::to_string(s.getPauseUs()) +
         ",\"ports\":[" + ports + "],\"processes\":[" + procs + "]}";
}

std::uint64_t snapshot_id(const std::string& text) {
  char* end = nullptr;
  auto id = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || id == 0) die("'" + text + "' is not a snapshot id (see warren snapshots)", exit_usage);
  return id;
}

}  // namespace

// warren snapshot NAME [--label L]
int cmd_snapshot(connection& c, const options& o) {
  std::vector<std::string> pos;
  std::string label;
  bool memory = false;
  for (std::size_t i = 1; i < o.rest.size(); ++i) {
    if (o.rest[i] == "--label" && i + 1 < o.rest.size()) label = o.rest[++i];
    else if (o.rest[i] == "--with-memory") memory = true;
    else if (o.rest[i].rfind("--", 0) == 0) die("unknown snapshot option " + o.rest[i], exit_usage);
    else pos.push_back(o.rest[i]);
  }
  if (pos.size() != 1) die("usage: warren snapshot NAME [--label LABEL]", exit_usage);
  auto req = existing(c, pos[0]).snapshotRequest();
  req.setLabel(label);
  req.setWithMemory(memory);
  auto s = req.send().wait(c.io.waitScope).getSnapshot();
  if (o.json) std::printf("%s\n", snapshot_json(s).c_str());
  else std::printf("%llu\n", static_cast<unsigned long long>(s.getId()));
  return 0;
}

// warren snapshots | warren snapshots rm ID... | export ID | import BLOB SHA256 [--label L]
int cmd_snapshots(connection& c, const options& o) {
  if (o.rest.size() == 3 && o.rest[1] == "export") {
    auto req = c.root.exportSnapshotRequest();
    req.setId(snapshot_id(o.rest[2]));
    auto res = req.send().wait(c.io.waitScope);
    if (o.json)
      std::printf("{\"blob\":%s,\"sha256\":%s,\"bytes\":%llu}\n", wire::json_quote(res.getBlob().cStr()).c_str(),
                  wire::json_quote(res.getSha256().cStr()).c_str(), static_cast<unsigned long long>(res.getBytes()));
    else
      std::printf("%s %s\n", res.getBlob().cStr(), res.getSha256().cStr());
    return 0;
  }
  if (o.rest.size() >= 4 && o.rest[1] == "import") {
    std::string label;
    if (o.rest.size() == 6 && o.rest[4] == "--label") label = o.rest[5];
    else if (o.rest.size() != 4) die("usage: warren snapshots import BLOB SHA256 [--label LABEL]", exit_usage);
    auto req = c.root.importSnapshotRequest();
    req.setBlob(o.rest[2]);
    req.setSha256(o.rest[3]);
    req.setLabel(label);
    auto s = req.send().wait(c.io.waitScope).getSnapshot();
    if (o.json) std::printf("%s\n", snapshot_json(s).c_str());
    else std::printf("%llu\n", static_cast<unsigned long long>(s.getId()));
    return 0;
  }
  if (o.rest.size() >= 2 && o.rest[1] == "rm") {
    if (o.rest.size() < 3) die("usage: warren snapshots rm ID...", exit_usage);
    int code = 0;
    for (std::size_t i = 2; i < o.rest.size(); ++i) {
      auto req = c.root.deleteSnapshotRequest();
      req.setId(snapshot_id(o.rest[i]));
      if (!req.send().wait(c.io.waitScope).getExisted()) {
        std::fprintf(stderr, "warren: no snapshot %s\n", o.rest[i].c_str());
        code = exit_usage;
      }
    }
    return code;
  }
  if (o.rest.size() != 1) die("usage: warren snapshots [rm ID...]", exit_usage);
  auto all = c.root.listSnapshotsRequest().send().wait(c.io.waitScope).getSnapshots();
  if (o.json) {
    std::string out;
    for (auto s : all) out += (out.empty() ? "" : ",") + snapshot_json(s);
    std::printf("[%s]\n", out.c_str());
    return 0;
  }
  std::printf("%-8s %-16s %-24s %10s  %s\n", "ID", "LABEL", "SANDBOX", "PAUSE_MS", "PROCESSES");
  for (auto s : all) {
    std::string procs;
    for (auto p : s.getProcesses()) procs += (procs.empty() ? "" : ",") + std::string(p.getId().cStr());
    std::printf("%-8llu %-16s %-24s %10.2f  %s\n", static_cast<unsigned long long>(s.getId()),
                s.getLabel().size() ? s.getLabel().cStr() : "-", s.getSandbox().cStr(), s.getPauseUs() / 1000.0,
                procs.empty() ? "-" : procs.c_str());
  }
  return 0;
}

// warren fork NAME [--count N] [--name NEW]...
int cmd_fork(connection& c, const options& o) {
  std::vector<std::string> pos, names;
  unsigned long count = 0;
  for (std::size_t i = 1; i < o.rest.size(); ++i) {
    if (o.rest[i] == "--count" && i + 1 < o.rest.size()) {
      char* end = nullptr;
      count = std::strtoul(o.rest[++i].c_str(), &end, 10);
      if (*end != '\0' || count == 0 || count > 16) die("--count takes 1 to 16", exit_usage);
    } else if (o.rest[i] == "--name" && i + 1 < o.rest.size()) {
      names.push_back(o.rest[++i]);
    } else if (o.rest[i].rfind("--", 0) == 0) {
      die("unknown fork option " + o.rest[i], exit_usage);
    } else {
      pos.push_back(o.rest[i]);
    }
  }
  if (pos.size() != 1) die("usage: warren fork NAME [--count N] [--name NEW]...", exit_usage);
  if (names.empty()) {
    // NAME-1, NAME-2 ... skipping names that are taken.
    std::set<std::string> taken;
    for (auto s : c.root.listRequest().send().wait(c.io.waitScope).getSandboxes()) taken.insert(s.getName().cStr());
    for (unsigned k = 1; names.size() < (count ? count : 1); ++k) {
      auto n = pos[0] + "-" + std::to_string(k);
      if (!taken.count(n)) names.push_back(n);
    }
  } else if (count && count != names.size()) {
    die("--count and the number of --name differ", exit_usage);
  }
  auto req = existing(c, pos[0]).forkRequest();
  auto list = req.initNames(static_cast<unsigned>(names.size()));
  for (unsigned i = 0; i < names.size(); ++i) list.set(i, names[i]);
  auto res = req.send().wait(c.io.waitScope);
  if (o.json) {
    std::string made;
    for (auto s : res.getSandboxes()) made += (made.empty() ? "" : ",") + wire::json_quote(s.getName().cStr());
    std::printf("{\"snapshot\":%s,\"sandboxes\":[%s]}\n", snapshot_json(res.getSnapshot()).c_str(), made.c_str());
  } else {
    for (auto s : res.getSandboxes()) std::printf("%s\n", s.getName().cStr());
  }
  return 0;
}

// warren restore NAME SNAPSHOT | warren restore NAME --backup ID [DIR]
int cmd_restore(connection& c, const options& o) {
  if (o.rest.size() >= 4 && o.rest[2] == "--backup") {
    if (o.rest.size() > 5) die("usage: warren restore NAME --backup ID [DIR]", exit_usage);
    auto req = existing(c, o.rest[1]).restoreBackupRequest();
    req.setId(o.rest[3]);
    if (o.rest.size() == 5) req.setDir(o.rest[4]);
    req.send().wait(c.io.waitScope);
    std::printf("%s: restored backup %s\n", o.rest[1].c_str(), o.rest[3].c_str());
    return 0;
  }
  if (o.rest.size() != 3) die("usage: warren restore NAME SNAPSHOT | warren restore NAME --backup ID [DIR]", exit_usage);
  auto req = existing(c, o.rest[1]).restoreRequest();
  req.setSnapshotId(snapshot_id(o.rest[2]));
  auto info = req.send().wait(c.io.waitScope).getInfo();
  std::printf("%s: restored from snapshot %s\n", info.getName().cStr(), o.rest[2].c_str());
  return 0;
}

namespace {
std::string backup_json(wire::BackupInfo::Reader b) {
  return "{\"id\":" + wire::json_quote(b.getId().cStr()) + ",\"sandbox\":" + wire::json_quote(b.getSandbox().cStr()) +
         ",\"dir\":" + wire::json_quote(b.getDir().cStr()) + ",\"bytes\":" + std::to_string(b.getBytes()) +
         ",\"sha256\":" + wire::json_quote(b.getSha256().cStr()) + ",\"createdAtMs\":" + std::to_string(b.getCreatedAtMs()) +
         ",\"expiresAtMs\":" + std::to_string(b.getExpiresAtMs()) + "}";
}
}  // namespace

// warren backup NAME DIR [--exclude PATTERN]... [--gitignore] [--ttl DURATION]
int cmd_backup(connection& c, const options& o) {
  std::vector<std::string> pos, excludes;
  bool gitignore = false;
  std::uint64_t ttl = 0;
  for (std::size_t i = 1; i < o.rest.size(); ++i) {
    auto& a = o.rest[i];
    if (a == "--exclude" && i + 1 < o.rest.size()) excludes.push_back(o.rest[++i]);
    else if (a == "--gitignore") gitignore = true;
    else if (a == "--ttl" && i + 1 < o.rest.size()) {
      ttl = parse_duration_ms(o.rest[++i]);
      if (ttl == 0) die("--ttl takes a duration like 90m, 12h or 7d, got '" + o.rest[i] + "'", exit_usage);
    } else if (a.rfind("--", 0) == 0) die("unknown backup option " + a, exit_usage);
    else pos.push_back(a);
  }
  if (pos.size() != 2) die("usage: warren backup NAME DIR [--exclude PATTERN]... [--gitignore] [--ttl DURATION]", exit_usage);
  auto req = existing(c, pos[0]).backupRequest();
  req.setDir(pos[1]);
  auto list = req.initExcludes(static_cast<unsigned>(excludes.size()));
  for (unsigned i = 0; i < excludes.size(); ++i) list.set(i, excludes[i]);
  req.setRespectGitignore(gitignore);
  req.setTtlMs(ttl);
  auto b = req.send().wait(c.io.waitScope).getBackup();
  if (o.json) std::printf("%s\n", backup_json(b).c_str());
  else std::printf("%s\n", b.getId().cStr());
  return 0;
}

// warren backups | warren backups rm ID...
int cmd_backups(connection& c, const options& o) {
  if (o.rest.size() >= 2 && o.rest[1] == "rm") {
    if (o.rest.size() < 3) die("usage: warren backups rm ID...", exit_usage);
    int code = 0;
    for (std::size_t i = 2; i < o.rest.size(); ++i) {
      auto req = c.root.deleteBackupRequest();
      req.setId(o.rest[i]);
      if (!req.send().wait(c.io.waitScope).getExisted()) {
        std::fprintf(stderr, "warren: no backup %s\n", o.rest[i].c_str());
        code = exit_usage;
      }
    }
    return code;
  }
  if (o.rest.size() != 1) die("usage: warren backups [rm ID...]", exit_usage);
  auto all = c.root.listBackupsRequest().send().wait(c.io.waitScope).getBackups();
  if (o.json) {
    std::string out;
    for (auto b : all) out += (out.empty() ? "" : ",") + backup_json(b);
    std::printf("[%s]\n", out.c_str());
    return 0;
  }
  std::printf("%-32s %-20s %12s  %s\n", "ID", "SANDBOX", "BYTES", "DIR");
  for (auto b : all)
    std::printf("%-32s %-20s %12llu  %s\n", b.getId().cStr(), b.getSandbox().cStr(),
                static_cast<unsigned long long>(b.getBytes()), b.getDir().cStr());
  return 0;
}

}  // namespace warren::cli
