// warren start / ps / logs / kill: background processes of a sandbox (wire/process.capnp).
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <ctime>

#include "tools/warren/cli.hpp"
#include "wire/process.capnp.h"

namespace warren::cli {
namespace {

const char* status_name(wire::ProcessStatus s) {
  switch (s) {
    case wire::ProcessStatus::RUNNING: return "running";
    case wire::ProcessStatus::EXITED: return "exited";
    case wire::ProcessStatus::KILLED: return "killed";
    default: return "lost";
  }
}

std::string describe_end(wire::ProcessInfo::Reader i) {
  if (i.getStatus() == wire::ProcessStatus::EXITED) return "exit " + std::to_string(i.getExitCode());
  if (i.getStatus() == wire::ProcessStatus::KILLED) return std::string("signal ") + std::to_string(i.getSignal());
  return "";
}

std::string joined_command(wire::ProcessInfo::Reader i) {
  std::string s;
  for (auto a : i.getCommand()) s += (s.empty() ? "" : " ") + std::string(a.cStr());
  return s;
}

// Prints log chunks to our stdout/stderr as they come.
class print_sink final : public wire::LogSink::Server {
 protected:
  kj::Promise<void> write(WriteContext context) override {
    auto p = context.getParams();
    auto d = p.getData();
    int fd = p.getStream() == 2 ? 2 : 1;
    const kj::byte* at = d.begin();
    std::size_t left = d.size();
    while (left > 0) {
      auto n = ::write(fd, at, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return KJ_EXCEPTION(DISCONNECTED, "output closed");
      at += n;
      left -= static_cast<std::size_t>(n);
    }
    return kj::READY_NOW;
  }
  kj::Promise<void> dropped(DroppedContext context) override {
    auto p = context.getParams();
    std::fprintf(stderr, "warren: [%llu bytes of %s no longer buffered]\n",
                 static_cast<unsigned long long>(p.getToOffset() - p.getFromOffset()), p.getStream() == 2 ? "stderr" : "stdout");
    return kj::READY_NOW;
  }
  kj::Promise<void> ended(EndedContext) override { return kj::READY_NOW; }
};

}  // namespace

int cmd_start(connection& c, const options& o) {
  std::string id;
  std::uint32_t log_bytes = 0;
  bool restart = false, cleanup = false;
  std::string session;
  auto cmd = parse_command_line(o, "start", [&](const std::string& f, const std::function<std::string()>& value) {
    if (f == "--id") id = value();
    else if (f == "--restart-on-wake") restart = true;
    else if (f == "--auto-cleanup") cleanup = true;
    else if (f == "--session" || f == "-s") session = value();
    else if (f == "--log-bytes") log_bytes = static_cast<std::uint32_t>(std::strtoul(value().c_str(), nullptr, 10));
    else return false;
    return true;
  });
  auto sreq = c.root.sandboxRequest();
  sreq.setName(cmd.name);
  auto req = sreq.send().getSandbox().startProcessRequest();
  auto r = req.initRequest();
  fill_request(r, cmd);
  r.setSession(session);
  auto opts = req.initOptions();
  opts.setId(id);
  opts.setLogBytes(log_bytes);
  opts.setRestartOnWake(restart);
  opts.setAutoCleanup(cleanup);
  auto info = req.send().wait(c.io.waitScope).getInfo();
  std::printf("%s\n", info.getId().cStr());
  return 0;
}

int cmd_expose(connection& c, const options& o) {
  std::vector<std::string> pos;
  std::string label;
  for (std::size_t i = 1; i < o.rest.size(); ++i) {
    if (o.rest[i] == "--name" && i + 1 < o.rest.size()) label = o.rest[++i];
    else if (o.rest[i].rfind("--", 0) == 0) die("unknown expose option " + o.rest[i], exit_usage);
    else pos.push_back(o.rest[i]);
  }
  if (pos.size() != 2) die("expose needs a sandbox name and a port: warren expose NAME PORT [--name LABEL]", exit_usage);
  char* end = nullptr;
  auto port = std::strtoul(pos[1].c_str(), &end, 10);
  if (*end != '\0' || pos[1].empty() || port > 65535) die("expose: '" + pos[1] + "' is not a port (1-65535)", exit_usage);
  auto req = existing(c, pos[0]).exposePortRequest();
  req.setPort(static_cast<std::uint32_t>(port));
  req.setName(label);
  auto res = req.send().wait(c.io.waitScope).getPort();
  if (o.json)
    std::printf("{\"port\":%u,\"name\":\"%s\",\"url\":\"%s\",\"pathUrl\":\"%s\"}\n", res.getPort(), res.getName().cStr(),
                res.getUrl().cStr(), res.getPathUrl().cStr());
  else
    std::printf("%s\n", res.getUrl().cStr());
  return 0;
}

int cmd_unexpose(connection& c, const options& o) {
  if (o.rest.size() != 3) die("unexpose needs a sandbox name and a port", exit_usage);
  auto req = existing(c, o.rest[1]).unexposePortRequest();
  req.setPort(static_cast<std::uint32_t>(std::strtoul(o.rest[2].c_str(), nullptr, 10)));
  if (!req.send().wait(c.io.waitScope).getExisted()) die("port " + o.rest[2] + " of " + o.rest[1] + " was not exposed", 1);
  return 0;
}

int cmd_ports(connection& c, const options& o) {
  if (o.rest.size() != 2) die("ports needs a sandbox name", exit_usage);
  auto res = existing(c, o.rest[1]).listExposedPortsRequest().send().wait(c.io.waitScope);
  if (!o.json) std::printf("%-6s %-16s %s\n", "PORT", "NAME", "URL");
  else std::printf("[");
  bool first = true;
  for (auto p : res.getPorts()) {
    if (o.json)
      std::printf("%s{\"port\":%u,\"name\":\"%s\",\"url\":\"%s\",\"pathUrl\":\"%s\"}", first ? "" : ",", p.getPort(),
                  p.getName().cStr(), p.getUrl().cStr(), p.getPathUrl().cStr());
    else
      std::printf("%-6u %-16s %s\n", p.getPort(), p.getName().cStr(), p.getUrl().cStr());
    first = false;
  }
  if (o.json) std::printf("]\n");
  return 0;
}

int cmd_ps(connection& c, const options& o) {
  std::vector<wire::ProcessStatus> statuses;
  std::vector<std::string> pos;
  for (std::size_t i = 1; i < o.rest.size(); ++i) {
    if (o.rest[i] == "--status" && i + 1 < o.rest.size()) {
      auto v = o.rest[++i];
      if (v == "running") statuses.push_back(wire::ProcessStatus::RUNNING);
      else if (v == "exited") statuses.push_back(wire::ProcessStatus::EXITED);
      else if (v == "killed") statuses.push_back(wire::ProcessStatus::KILLED);
      else if (v == "lost") statuses.push_back(wire::ProcessStatus::LOST);
      else die("--status takes running, exited, killed or lost", exit_usage);
    } else {
      pos.push_back(o.rest[i]);
    }
  }
  if (pos.size() != 1) die("ps needs a sandbox name: warren ps NAME [--status S]...", exit_usage);
  auto req = existing(c, pos[0]).listProcessesRequest();
  auto st = req.initStatuses(static_cast<unsigned>(statuses.size()));
  for (unsigned i = 0; i < statuses.size(); ++i) st.set(i, statuses[i]);
  auto res = req.send().wait(c.io.waitScope);
  if (!o.json) std::printf("%-16s %-8s %-8s %7s %s\n", "ID", "STATUS", "END", "PID", "COMMAND");
  else std::printf("[");
  bool first = true;
  for (auto p : res.getProcesses()) {
    if (o.json) {
      std::printf("%s{\"id\":\"%s\",\"status\":\"%s\",\"exitCode\":%d,\"signal\":%d,\"pid\":%d,\"stdoutBytes\":%llu,"
                  "\"stderrBytes\":%llu}",
                  first ? "" : ",", p.getId().cStr(), status_name(p.getStatus()), p.getExitCode(), p.getSignal(),
                  p.getPid(), static_cast<unsigned long long>(p.getStdoutBytes()),
                  static_cast<unsigned long long>(p.getStderrBytes()));
      first = false;
      continue;
    }
    std::printf("%-16s %-8s %-8s %7d %s\n", p.getId().cStr(), status_name(p.getStatus()), describe_end(p).c_str(),
                p.getPid(), joined_command(p).c_str());
  }
  if (o.json) std::printf("]\n");
  return 0;
}

int cmd_logs(connection& c, const options& o) {
  bool follow = false;
  std::vector<std::string> pos;
  for (std::size_t i = 1; i < o.rest.size(); ++i) {
    if (o.rest[i] == "--follow" || o.rest[i] == "-f") follow = true;
    else pos.push_back(o.rest[i]);
  }
  if (pos.size() != 2) die("logs needs a sandbox name and a process id: warren logs NAME ID [--follow]", exit_usage);
  auto g = existing(c, pos[0]).getProcessRequest();
  g.setId(pos[1]);
  auto process = g.send().getProcess();
  if (follow) {
    auto req = process.streamLogsRequest();
    req.setSink(kj::heap<print_sink>());
    req.send().wait(c.io.waitScope);
    return 0;
  }
  auto res = process.logsRequest().send().wait(c.io.waitScope);
  for (auto [chunk, fd] : {std::pair{res.getStdout(), 1}, std::pair{res.getStderr(), 2}}) {
    if (chunk.getDroppedBytes() > 0)
      std::fprintf(stderr, "warren: [%llu earlier bytes of %s no longer buffered]\n",
                   static_cast<unsigned long long>(chunk.getDroppedBytes()), fd == 2 ? "stderr" : "stdout");
    auto d = chunk.getData();
    if (d.size() && ::write(fd, d.begin(), d.size()) < 0) return exit_warren_error;
  }
  return 0;
}

int cmd_kill(connection& c, const options& o) {
  int signal = 0;
  std::vector<std::string> pos;
  for (std::size_t i = 1; i < o.rest.size(); ++i) {
    if (o.rest[i] == "--signal" && i + 1 < o.rest.size()) signal = std::atoi(o.rest[++i].c_str());
    else pos.push_back(o.rest[i]);
  }
  if (pos.size() != 2) die("kill needs a sandbox name and a process id: warren kill NAME ID [--signal N]", exit_usage);
  auto g = existing(c, pos[0]).getProcessRequest();
  g.setId(pos[1]);
  auto process = g.send().getProcess();
  auto k = process.killRequest();
  k.setSignal(signal);
  k.send().wait(c.io.waitScope);
  if (signal == 0) {
    auto w = process.waitForExitRequest();
    w.setTimeoutMs(10000);
    auto info = w.send().wait(c.io.waitScope).getInfo();
    std::printf("%s: %s\n", info.getId().cStr(), describe_end(info).c_str());
  }
  return 0;
}

}  // namespace warren::cli
