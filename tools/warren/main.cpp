// warren: the command-line client. Talks Cap'n Proto RPC to warrend.
//
// Exit codes: a command run with `exec` passes its own exit code through (128+N when killed
// by signal N, 124 when its timeout fired); warren's own failures exit 125 (daemon not
// reachable, invalid name, ...), usage errors 2.
#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/debug.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "tools/warren/cli.hpp"
#include "wire/errors.hpp"
#include "wire/json.hpp"
#include "wire/warren.capnp.h"

using namespace warren::cli;

// "90", "90s", "10m", "2h", "1d" -> milliseconds; 0 on a malformed value.
std::uint64_t warren::cli::parse_duration_ms(const std::string& v) {
  char* end = nullptr;
  double n = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || n <= 0) return 0;
  std::string unit(end);
  double scale = unit.empty() || unit == "s" ? 1000 : unit == "m" ? 60000 : unit == "h" ? 3600000 : unit == "d" ? 86400000 : 0;
  return static_cast<std::uint64_t>(n * scale);
}

namespace {


constexpr const char* usage = R"(usage: warren [global options] COMMAND [args]

commands:
  exec NAME [--env K=V]... [--cwd DIR] [--timeout SECONDS] [--shell] [--session S] [--stdin]
       [--finish-on-disconnect] -- CMD [ARGS...]
        run CMD in sandbox NAME (created if needed); output streams live, and warren exits
        with the command's exit code. --shell runs CMD as one bash command line. Execs run
        in a shell session (default: "default"), one after the other: `cd`, `export`,
        variables and functions of --shell commands persist to the next exec of the session;
        --env and --cwd apply to that call only. --stdin streams our stdin to the command.
        --finish-on-disconnect: if warren is interrupted, the command runs to its end
        (default: it is killed).
  create NAME [--sleep-after DURATION] [--keep-alive] [--memory SIZE] [--pids N] [--cpus N] [--disk SIZE]
        [--from SNAPSHOT]
        create a sandbox (exec creates one too, with the defaults: sleep after 10m and the
        daemon's limits); SIZE like 512M or 2G, --cpus like 0.5; --from: its files start as
        those of a snapshot (a copy on write: milliseconds)
  set NAME [--sleep-after DURATION] [--keep-alive on|off] [--memory SIZE] [--pids N] [--cpus N] [--disk SIZE]
        change when a sandbox hibernates, or its limits (at once if it runs)
  sleep NAME
        hibernate a sandbox now (its files stay; the next call wakes it)
  ls [--usage]
        list sandboxes (NAME, STATE, ID, CREATED, LAST ACTIVE, SLEEPS AFTER; with --usage
        also CPU seconds, memory, processes and disk of each)
  usage NAME
        what a sandbox uses now: CPU, memory (and peak), processes, disk, limits
  rm NAME...
        destroy sandboxes: processes, files and journal
  journal NAME [--json] [--follow] [--from SEQ]
        the sandbox's event history (--follow keeps printing new events)
  journal NAME --at SEQ
        the sandbox's state as it was right after event SEQ (time travel)
  journal --check
        replay every journal and report those that do not apply
  cp SRC DST
        copy a file or directory into (creating the sandbox if needed) or out of a sandbox;
        one of SRC and DST is NAME:PATH (a relative PATH is under /workspace), the other a
        local path; `-` is stdin/stdout
  start NAME [--id ID] [--env K=V]... [--cwd DIR] [--shell] [--session S] [--log-bytes N]
        [--restart-on-wake] [--auto-cleanup] -- CMD [ARGS...]
        start a background process (a dev server ...); prints its id. --session: start
        with that session's environment and directory (--shell: also its variables and
        functions), without changing it. --restart-on-wake: when the sandbox hibernates
        while it runs, start it again when the sandbox wakes. --auto-cleanup: forget it
        (ps, logs) once it ended; the journal keeps its start and end
  shell NAME [--session S] [--id ID] [--shell PROGRAM]
        a terminal in the sandbox (bash on a pty, with the session's environment and
        directory), attached to yours: raw mode, resize follows; Ctrl-] detaches and leaves
        it running; exits with the shell's exit code
  shell NAME --attach ID
        back to a terminal: its screen so far (its buffer), then live
  ps NAME [--status running|exited|killed|lost]...
        the sandbox's background processes: ID STATUS END PID COMMAND
  logs NAME ID [--follow]
        what a process printed (its ring buffer); --follow keeps streaming until it ends
  kill NAME ID [--signal N]
        end a process and its whole tree (TERM, then KILL after 2 s), or send signal N
  expose NAME PORT [--name LABEL]
        make the sandbox's server on PORT reachable at a preview URL (printed; --json also
        prints the path form); a request wakes a hibernated sandbox
  unexpose NAME PORT
        revoke that URL
  ports NAME
        the sandbox's exposed ports: PORT NAME URL
  snapshot NAME [--label LABEL] [--with-memory]
        capture the sandbox's files as a snapshot (prints its id); a running sandbox is
        frozen only for that moment and keeps running (--with-memory: also its processes'
        memory, with CRIU; not available yet, the error says what this host has)
  snapshots [rm ID...]
        list snapshots (ID LABEL SANDBOX PAUSE_MS PROCESSES), or delete some
  snapshots export ID | snapshots import BLOB SHA256 [--label LABEL]
        write a snapshot into the blob store (<data-dir>/blobs/BLOB; prints BLOB SHA256) to
        move it to another machine, and make a snapshot of such a blob there
  fork NAME [--count N] [--name NEW]...
        snapshot the sandbox and start N new sandboxes from it (default names NAME-1,
        NAME-2 ...; prints them)
  restore NAME SNAPSHOT
        roll the sandbox's files back to a snapshot's: its processes stop, it starts again
        on those files (restart-on-wake processes too)
  backup NAME DIR [--exclude PATTERN]... [--gitignore] [--ttl DURATION]
        archive a directory of the sandbox (tar + zstd, checksummed) into the daemon's
        blob store; prints the backup's id; kept 7 days unless --ttl says otherwise
  backups [rm ID...]
        list backups (ID SANDBOX BYTES DIR), or delete some
  restore NAME --backup ID [DIR]
        replace DIR (default: the directory backed up) of the sandbox, which may be another
        one, by a backup's contents; a corrupt archive is refused before anything changes
  sessions NAME
        list the sandbox's shell sessions and their working directories
  session NAME new SESSION [--env K=V]... [--cwd DIR]
        create a session with its own environment and directory
  session NAME rm SESSION
        forget a session's state
  cat NAME:PATH
        print a file of a sandbox (streamed)
  ls-files NAME:PATH [--recursive] [--all]
        list a directory of a sandbox (TYPE MODE SIZE MODIFIED PATH; --all shows dot files)
  version
        print the client's and the daemon's version

global options:
  --socket PATH       daemon socket (default: $WARREN_SOCKET or /run/warren/warren.sock)
  --connect HOST:PORT use the daemon's TCP API instead (needs --token-file)
  --token-file FILE   bearer token for --connect
  --json              machine-readable output (ls, version, journal, exec's final result on stderr)

DURATION: a number of seconds, or with a unit: 90s, 10m, 2h, 1d.
)";



bool write_all(int fd, const kj::byte* data, std::size_t size) {
  while (size > 0) {
    auto n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

struct output_counts {
  std::uint64_t out = 0, err = 0;
};

// Writes a command's output to our own stdout/stderr as it arrives, counting bytes.
class terminal_output final : public warren::wire::ExecOutput::Server {
 public:
  // With `io`, the command's stdin is fed from ours, streamed as it comes (a pipe, a terminal
  // or a file), until EOF.
  terminal_output(output_counts& counts, kj::AsyncIoContext* io) : counts_(counts), io_(io) {}

 protected:
  kj::Promise<void> writeStdout(WriteStdoutContext context) override {
    auto d = context.getParams().getData();
    if (!write_all(1, d.begin(), d.size())) return KJ_EXCEPTION(DISCONNECTED, "stdout closed");
    counts_.out += d.size();
    return kj::READY_NOW;
  }
  kj::Promise<void> writeStderr(WriteStderrContext context) override {
    auto d = context.getParams().getData();
    if (!write_all(2, d.begin(), d.size())) return KJ_EXCEPTION(DISCONNECTED, "stderr closed");
    counts_.err += d.size();
    return kj::READY_NOW;
  }

  kj::Promise<void> started(StartedContext context) override {
    if (!io_) return kj::READY_NOW;
    struct stat st {};
    // Pipes, sockets and terminals are waited on; files and devices like /dev/zero (which
    // epoll refuses) are read directly.
    bool regular = ::fstat(0, &st) == 0 && !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode) && !::isatty(0);
    if (!regular) in_ = io_->lowLevelProvider->wrapInputFd(0);
    feeding_ = feed(context.getParams().getStdin())
                   .catch_([](kj::Exception&&) {})  // The command stopped reading: fine.
                   .eagerlyEvaluate(nullptr);
    return kj::READY_NOW;
  }

 private:
  // One chunk of our stdin (a regular file is read directly: epoll does not take files).
  kj::Promise<std::size_t> read_chunk(kj::byte* buf, std::size_t size) {
    KJ_IF_MAYBE(in, in_) { return (*in)->tryRead(buf, 1, size); }
    ssize_t n;
    while ((n = ::read(0, buf, size)) < 0 && errno == EINTR) {
    }
    return n < 0 ? 0 : static_cast<std::size_t>(n);
  }

  kj::Promise<void> feed(warren::wire::ByteSink::Client sink) {
    auto buf = kj::heapArray<kj::byte>(64 * 1024);
    auto* p = buf.begin();
    return read_chunk(p, buf.size()).then([this, sink, buf = kj::mv(buf)](std::size_t n) mutable -> kj::Promise<void> {
      if (n == 0) return sink.endRequest().send().ignoreResult();
      auto req = sink.writeRequest();
      req.setData(buf.slice(0, n));
      return req.send().then([this, sink]() mutable { return feed(sink); });
    });
  }

  output_counts& counts_;  // Borrowed from cmd_exec, which outlives the connection's calls.
  kj::AsyncIoContext* io_;
  kj::Maybe<kj::Own<kj::AsyncInputStream>> in_;
  kj::Promise<void> feeding_ = kj::READY_NOW;
};


std::string format_time(std::uint64_t ms) {
  if (ms == 0) return "-";
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm;
  ::localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

const char* state_name(warren::wire::SandboxState s) {
  switch (s) {
    case warren::wire::SandboxState::RUNNING:
      return "running";
    case warren::wire::SandboxState::STARTING:
      return "starting";
    case warren::wire::SandboxState::HIBERNATED:
      return "hibernated";
    case warren::wire::SandboxState::NEEDS_REPAIR:
      return "needs-repair";
    default:
      return "stopped";
  }
}


kj::Own<connection> connect(kj::AsyncIoContext& io, const options& o) {
  auto c = kj::heap<connection>(io);
  if (!o.connect.empty()) {
    if (o.token_file.empty()) die("--connect needs --token-file", exit_usage);
    std::ifstream in(o.token_file);
    std::string token;
    if (!in || !std::getline(in, token)) die("cannot read token file " + o.token_file);
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
    try {
      auto addr = io.provider->getNetwork().parseAddress(o.connect).wait(io.waitScope);
      c->stream = addr->connect().wait(io.waitScope);
    } catch (const kj::Exception& e) {
      die("cannot reach warrend at " + o.connect + ": " + std::string(e.getDescription().cStr()));
    }
    c->client = kj::heap<capnp::TwoPartyClient>(*c->stream);
    auto req = c->client->bootstrap().castAs<warren::wire::Login>().loginRequest();
    req.setToken(token);
    c->root = req.send().getWarren();
    return c;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (o.socket.size() >= sizeof addr.sun_path) die("socket path is too long: " + o.socket, exit_usage);
  std::memcpy(addr.sun_path, o.socket.c_str(), o.socket.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) {
    int e = errno;
    std::string hint = (e == ENOENT || e == ECONNREFUSED)
                           ? "; is warrend running? Start it with `tools/dev run` (as root)"
                           : (e == EACCES ? "; the socket is only open to root (use sudo)" : "");
    die("cannot reach warrend at " + o.socket + ": " + std::strerror(e) + hint);
  }
  c->stream = io.lowLevelProvider->wrapSocketFd(fd, kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP);
  c->client = kj::heap<capnp::TwoPartyClient>(*c->stream);
  c->root = c->client->bootstrap().castAs<warren::wire::Warren>();
  return c;
}

}  // namespace

namespace warren::cli {

command_line parse_command_line(const options& o, const char* what,
                                const std::function<bool(const std::string&, const std::function<std::string()>&)>& extra) {
  auto& a = o.rest;
  std::string verb = what;
  if (a.size() < 2) die(verb + " needs a sandbox name and a command: warren " + verb + " NAME -- CMD [ARGS...]", exit_usage);
  command_line c;
  c.name = a[1];
  std::size_t i = 2;
  for (; i < a.size(); ++i) {
    auto& f = a[i];
    if (f == "--") {
      ++i;
      break;
    }
    auto value = [&]() -> std::string {
      if (i + 1 >= a.size()) die("option " + f + " needs a value", exit_usage);
      return a[++i];
    };
    if (f == "--env" || f == "-e") {
      auto kv = value();
      auto eq = kv.find('=');
      if (eq == std::string::npos) die("--env takes NAME=VALUE, got '" + kv + "'", exit_usage);
      c.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else if (f == "--cwd" || f == "-w") {
      c.cwd = value();
    } else if (f == "--shell") {
      c.shell = true;
    } else if (extra(f, value)) {
      continue;
    } else if (f.rfind("-", 0) == 0) {
      die("unknown " + verb + " option " + f + " (put the command after --)", exit_usage);
    } else {
      break;  // The command starts here (no -- given).
    }
  }
  if (i >= a.size()) die(verb + " needs a command after the sandbox name: warren " + verb + " NAME -- CMD [ARGS...]", exit_usage);
  c.command.assign(a.begin() + static_cast<std::ptrdiff_t>(i), a.end());
  return c;
}

void fill_request(wire::ExecRequest::Builder r, const command_line& c) {
  if (c.shell) {
    std::string line;
    for (auto& w : c.command) line += (line.empty() ? "" : " ") + w;
    r.initCommand().setShell(line);
  } else {
    auto argv = r.initCommand().initArgv(static_cast<unsigned>(c.command.size()));
    for (unsigned k = 0; k < c.command.size(); ++k) argv.set(k, c.command[k]);
  }
  auto e = r.initEnv(static_cast<unsigned>(c.env.size()));
  for (unsigned k = 0; k < c.env.size(); ++k) {
    e[k].setName(c.env[k].first);
    e[k].setValue(c.env[k].second);
  }
  r.setCwd(c.cwd);
}

}  // namespace warren::cli

namespace {

int cmd_exec(connection& c, const options& o) {
  std::uint64_t timeout_ms = 0;
  bool with_stdin = false, finish = false;
  std::string session;
  auto cmd = parse_command_line(o, "exec", [&](const std::string& f, const std::function<std::string()>& value) {
    if (f == "--timeout" || f == "-t") {
      auto v = value();
      char* end = nullptr;
      double s = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || s <= 0) die("--timeout takes a positive number of seconds, got '" + v + "'", exit_usage);
      timeout_ms = static_cast<std::uint64_t>(s * 1000);
    } else if (f == "--session" || f == "-s") {
      session = value();
    } else if (f == "--stdin" || f == "-i") {
      with_stdin = true;
    } else if (f == "--finish-on-disconnect") {
      finish = true;
    } else {
      return false;
    }
    return true;
  });

  auto sreq = c.root.sandboxRequest();
  sreq.setName(cmd.name);
  auto sandbox = sreq.send().getSandbox();  // Pipelined: one round trip for both calls.
  auto req = sandbox.execRequest();
  auto r = req.initRequest();
  fill_request(r, cmd);
  r.setTimeoutMs(timeout_ms);
  r.setSession(session);
  r.setStdinStream(with_stdin);
  r.setFinishOnCancel(finish);
  output_counts counts;
  req.setOutput(kj::heap<terminal_output>(counts, with_stdin ? &c.io : nullptr));
  auto res = req.send().wait(c.io.waitScope);
  auto result = res.getResult();
  // The result can be seen before the last output calls have been dispatched here (local
  // calls run on a later turn of the event loop): run the loop until every byte the daemon
  // delivered has been written.
  for (int turn = 0; turn < 5000 && (counts.out < result.getStdoutBytes() || counts.err < result.getStderrBytes()); ++turn)
    c.io.provider->getTimer().afterDelay(1 * kj::MILLISECONDS).wait(c.io.waitScope);
  if (counts.out < result.getStdoutBytes() || counts.err < result.getStderrBytes())
    std::fprintf(stderr, "warren: the command's output was cut short (connection problem)\n");
  if (o.json)
    std::fprintf(stderr, "{\"exitCode\":%d,\"signal\":%d,\"timedOut\":%s,\"oomKilled\":%s,\"durationMs\":%llu,\"execId\":%llu}\n",
                 result.getExitCode(), result.getSignal(), result.getTimedOut() ? "true" : "false",
                 result.getOomKilled() ? "true" : "false",
                 static_cast<unsigned long long>(result.getDurationMs()),
                 static_cast<unsigned long long>(result.getExecId()));
  if (result.getTimedOut()) {
    if (!o.json) std::fprintf(stderr, "warren: command timed out after %.3g s and was killed\n", timeout_ms / 1000.0);
    return exit_timed_out;
  }
  if (result.getOomKilled() && !o.json)
    std::fprintf(stderr, "warren: out of memory: the sandbox's memory limit was reached and the kernel killed %s\n",
                 result.getSignal() == 9 ? "the command" : "a process of the sandbox");
  if (result.getSignal() != 0) return 128 + result.getSignal();
  return result.getExitCode();
}


std::string format_duration(std::uint64_t ms) {
  if (ms % 86400000 == 0) return std::to_string(ms / 86400000) + "d";
  if (ms % 3600000 == 0) return std::to_string(ms / 3600000) + "h";
  if (ms % 60000 == 0) return std::to_string(ms / 60000) + "m";
  return std::to_string(ms / 1000) + "s";
}

std::string info_json(warren::wire::SandboxInfo::Reader s) {
  return std::string("{\"name\":") + warren::wire::json_quote(s.getName().cStr()) + ",\"state\":\"" + state_name(s.getState()) +
         "\",\"id\":" + std::to_string(s.getId()) + ",\"createdAtMs\":" + std::to_string(s.getCreatedAtMs()) +
         ",\"lastActivityMs\":" + std::to_string(s.getLastActivityMs()) +
         ",\"sleepAfterMs\":" + std::to_string(s.getSleepAfterMs()) +
         ",\"keepAlive\":" + (s.getKeepAlive() ? "true" : "false") + "}";
}

struct create_limits {
  std::uint64_t memory_bytes = 0, pids = 0, cpu_millis = 0, disk_bytes = 0;
};

// Parses --sleep-after / --keep-alive (and, for create, limits) from rest[2..]; unset fields
// keep their values.
void parse_lifecycle(const options& o, std::uint64_t& sleep_ms, bool& keep, bool keep_takes_value,
                     create_limits* limits = nullptr) {
  auto& a = o.rest;
  auto number = [&](std::size_t& i, double scale_default) -> std::uint64_t {
    if (i + 1 >= a.size()) die(a[i] + " needs a value", exit_usage);
    auto& v = a[++i];
    char* end = nullptr;
    double n = std::strtod(v.c_str(), &end);
    std::string unit(end);
    double scale = unit.empty() ? scale_default : unit == "K" ? 1024.0 : unit == "M" ? 1048576.0 : unit == "G" ? 1073741824.0 : -1;
    if (end == v.c_str() || n <= 0 || scale < 0) die(a[i - 1] + " takes a positive value, got '" + v + "'", exit_usage);
    return static_cast<std::uint64_t>(n * scale);
  };
  for (std::size_t i = 2; i < a.size(); ++i) {
    if (limits && a[i] == "--memory") {
      limits->memory_bytes = number(i, 1);
      continue;
    }
    if (limits && a[i] == "--pids") {
      limits->pids = number(i, 1);
      continue;
    }
    if (limits && a[i] == "--disk") {
      limits->disk_bytes = number(i, 1);
      continue;
    }
    if (limits && a[i] == "--cpus") {
      limits->cpu_millis = number(i, 1000);
      continue;
    }
    if (a[i] == "--sleep-after" && i + 1 < a.size()) {
      sleep_ms = parse_duration_ms(a[++i]);
      if (sleep_ms == 0) die("--sleep-after takes a duration like 90s, 10m or 2h, got '" + a[i] + "'", exit_usage);
    } else if (a[i] == "--keep-alive") {
      if (!keep_takes_value) {
        keep = true;
      } else {
        if (i + 1 >= a.size() || (a[i + 1] != "on" && a[i + 1] != "off")) die("--keep-alive takes on or off", exit_usage);
        keep = a[++i] == "on";
      }
    } else {
      die("unknown option " + a[i] + " (see --help)", exit_usage);
    }
  }
}

int cmd_create(connection& c, const options& given) {
  if (given.rest.size() < 2) die("create needs a sandbox name", exit_usage);
  // --from SNAPSHOT is ours; the rest are lifecycle and limits.
  auto o = given;
  std::uint64_t from = 0;
  for (std::size_t i = 2; i < o.rest.size(); ++i) {
    if (o.rest[i] != "--from") continue;
    if (i + 1 >= o.rest.size()) die("--from needs a snapshot id", exit_usage);
    char* end = nullptr;
    from = std::strtoull(o.rest[i + 1].c_str(), &end, 10);
    if (*end != '\0' || from == 0) die("--from takes a snapshot id (see warren snapshots), got '" + o.rest[i + 1] + "'", exit_usage);
    o.rest.erase(o.rest.begin() + static_cast<std::ptrdiff_t>(i), o.rest.begin() + static_cast<std::ptrdiff_t>(i + 2));
    break;
  }
  std::uint64_t sleep_ms = 600000;
  bool keep = false;
  create_limits limits;
  parse_lifecycle(o, sleep_ms, keep, false, &limits);
  auto req = c.root.sandboxRequest();
  req.setName(o.rest[1]);
  auto opts = req.initOptions();
  opts.setSleepAfterMs(sleep_ms);
  opts.setKeepAlive(keep);
  opts.setMemoryBytes(limits.memory_bytes);
  opts.setPidsMax(static_cast<std::uint32_t>(limits.pids));
  opts.setCpuMillis(static_cast<std::uint32_t>(limits.cpu_millis));
  opts.setDiskBytes(limits.disk_bytes);
  opts.setFromSnapshot(from);
  auto res = req.send().wait(c.io.waitScope);
  if (o.json) std::printf("%s\n", info_json(res.getInfo()).c_str());
  else std::printf("%s\n", res.getInfo().getName().cStr());
  return 0;
}

// The sandbox capability for an existing name: never creates it, and neither starts nor
// wakes it (the call made on it decides that).

int cmd_set(connection& c, const options& o) {
  if (o.rest.size() < 3) die("set needs a sandbox name and --sleep-after or --keep-alive", exit_usage);
  auto sandbox = existing(c, o.rest[1]);
  auto info = sandbox.infoRequest().send().wait(c.io.waitScope).getInfo();
  std::uint64_t sleep_ms = info.getSleepAfterMs();
  bool keep = info.getKeepAlive();
  create_limits limits;
  parse_lifecycle(o, sleep_ms, keep, true, &limits);
  if (limits.memory_bytes || limits.pids || limits.cpu_millis || limits.disk_bytes) {
    auto lreq = sandbox.setLimitsRequest();
    lreq.setMemoryBytes(limits.memory_bytes);
    lreq.setPidsMax(static_cast<std::uint32_t>(limits.pids));
    lreq.setCpuMillis(static_cast<std::uint32_t>(limits.cpu_millis));
    lreq.setDiskBytes(limits.disk_bytes);
    lreq.send().wait(c.io.waitScope);
    std::printf("%s: limits changed\n", o.rest[1].c_str());
    bool lifecycle = false;
    for (auto& a : o.rest) lifecycle = lifecycle || a == "--sleep-after" || a == "--keep-alive";
    if (!lifecycle) return 0;
  }
  auto req = sandbox.configureRequest();
  req.setSleepAfterMs(sleep_ms);
  req.setKeepAlive(keep);
  auto res = req.send().wait(c.io.waitScope);
  if (o.json) std::printf("%s\n", info_json(res.getInfo()).c_str());
  else std::printf("%s: %s\n", o.rest[1].c_str(), res.getInfo().getKeepAlive() ? "kept alive" : ("sleeps after " + format_duration(res.getInfo().getSleepAfterMs()) + " idle").c_str());
  return 0;
}

int cmd_sleep(connection& c, const options& o) {
  if (o.rest.size() != 2) die("sleep needs one sandbox name", exit_usage);
  auto res = existing(c, o.rest[1]).hibernateRequest().send().wait(c.io.waitScope);
  if (o.json) std::printf("%s\n", info_json(res.getInfo()).c_str());
  else std::printf("%s: hibernated\n", o.rest[1].c_str());
  return 0;
}

void print_entry(const options& o, warren::wire::JournalEntry::Reader e) {
  if (o.json) {
    std::printf("{\"seq\":%llu,\"atMs\":%llu,\"event\":%s}\n", static_cast<unsigned long long>(e.getSeq()),
                static_cast<unsigned long long>(e.getAtMs()), e.getJson().cStr());
  } else {
    std::printf("%6llu  %s  %-18s %s\n", static_cast<unsigned long long>(e.getSeq()), format_time(e.getAtMs()).c_str(),
                e.getKind().cStr(), e.getSummary().cStr());
  }
  std::fflush(stdout);
}

int cmd_journal(connection& c, const options& o) {
  auto& a = o.rest;
  if (a.size() == 2 && a[1] == "--check") {
    auto res = c.root.checkJournalsRequest().send().wait(c.io.waitScope);
    for (auto p : res.getProblems()) std::printf("problem: %s\n", p.cStr());
    std::printf("%u journals checked, %u with problems\n", res.getChecked(), res.getProblems().size());
    return res.getProblems().size() == 0 ? 0 : 1;
  }
  if (a.size() < 2 || a[1].rfind("--", 0) == 0) die("journal needs a sandbox name (or --check)", exit_usage);
  bool follow = false;
  std::uint64_t from = 1, at = 0;
  bool time_travel = false;
  for (std::size_t i = 2; i < a.size(); ++i) {
    auto number = [&](const std::string& flag) -> std::uint64_t {
      if (i + 1 >= a.size()) die(flag + " needs an event number", exit_usage);
      char* end = nullptr;
      auto v = std::strtoull(a[++i].c_str(), &end, 10);
      if (*end != '\0' || a[i].empty()) die(flag + " needs an event number, got '" + a[i] + "'", exit_usage);
      return v;
    };
    if (a[i] == "--follow" || a[i] == "-f") follow = true;
    else if (a[i] == "--from") from = number("--from");
    else if (a[i] == "--at") {
      at = number("--at");
      time_travel = true;
    } else die("unknown journal option " + a[i], exit_usage);
  }
  if (time_travel) {
    auto req = c.root.journalStateRequest();
    req.setName(a[1]);
    req.setAtSeq(at);
    std::printf("%s\n", req.send().wait(c.io.waitScope).getJson().cStr());
    return 0;
  }
  for (;;) {
    auto req = c.root.journalRequest();
    req.setName(a[1]);
    req.setFromSeq(from);
    auto res = req.send().wait(c.io.waitScope);
    for (auto e : res.getEntries()) {
      print_entry(o, e);
      from = e.getSeq() + 1;
    }
    if (!follow) return 0;
    if (res.getEntries().size() == 0) c.io.provider->getTimer().afterDelay(200 * kj::MILLISECONDS).wait(c.io.waitScope);
  }
}

std::string human_bytes(std::uint64_t b) {
  const char* units[] = {"B", "K", "M", "G", "T"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s" : "%.1f%s", v, units[u]);
  return buf;
}

std::string usage_json(warren::wire::Usage::Reader u) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "{\"cpuSeconds\":%.3f,\"memoryBytes\":%llu,\"memoryPeakBytes\":%llu,\"pids\":%u,\"diskBytes\":%llu,"
                "\"memoryLimitBytes\":%llu,\"pidsLimit\":%u,\"diskLimitBytes\":%llu}",
                u.getCpuSeconds(), static_cast<unsigned long long>(u.getMemoryBytes()),
                static_cast<unsigned long long>(u.getMemoryPeakBytes()), u.getPids(),
                static_cast<unsigned long long>(u.getDiskBytes()), static_cast<unsigned long long>(u.getMemoryLimitBytes()),
                u.getPidsLimit(), static_cast<unsigned long long>(u.getDiskLimitBytes()));
  return buf;
}

int cmd_usage(connection& c, const options& o) {
  if (o.rest.size() != 2) die("usage needs one sandbox name", exit_usage);
  auto u = existing(c, o.rest[1]).usageRequest().send().wait(c.io.waitScope).getUsage();
  if (o.json) {
    std::printf("%s\n", usage_json(u).c_str());
    return 0;
  }
  auto limit = [](std::uint64_t v, const std::string& text) { return v ? " (limit " + text + ")" : std::string(); };
  std::printf("cpu:       %.3f s since it last started\n", u.getCpuSeconds());
  std::printf("memory:    %s now, %s at peak%s\n", human_bytes(u.getMemoryBytes()).c_str(),
              human_bytes(u.getMemoryPeakBytes()).c_str(), limit(u.getMemoryLimitBytes(), human_bytes(u.getMemoryLimitBytes())).c_str());
  std::printf("processes: %u%s\n", u.getPids(), limit(u.getPidsLimit(), std::to_string(u.getPidsLimit())).c_str());
  std::printf("disk:      %s in its writable layer%s\n", human_bytes(u.getDiskBytes()).c_str(),
              limit(u.getDiskLimitBytes(), human_bytes(u.getDiskLimitBytes())).c_str());
  return 0;
}

int cmd_ls(connection& c, const options& o) {
  bool with_usage = false;
  for (std::size_t i = 1; i < o.rest.size(); ++i) {
    if (o.rest[i] == "--usage") with_usage = true;
    else die("unknown ls option " + o.rest[i], exit_usage);
  }
  auto res = c.root.listRequest().send().wait(c.io.waitScope);
  auto all = res.getSandboxes();
  // Usage of every sandbox, asked for all at once (pipelined), never waking one.
  std::vector<kj::Promise<capnp::Response<warren::wire::Sandbox::UsageResults>>> pending;
  if (with_usage)
    for (auto s : all) pending.push_back(existing(c, s.getName().cStr()).usageRequest().send());
  std::vector<capnp::Response<warren::wire::Sandbox::UsageResults>> usages;
  for (auto& p : pending) usages.push_back(p.wait(c.io.waitScope));
  if (o.json) {
    std::string out = "[";
    for (unsigned i = 0; i < all.size(); ++i) {
      auto info = info_json(all[i]);
      if (with_usage) info = info.substr(0, info.size() - 1) + ",\"usage\":" + usage_json(usages[i].getUsage()) + "}";
      out += (i ? "," : "") + info;
    }
    std::printf("%s]\n", out.c_str());
    return 0;
  }
  std::printf("%-24s %-12s %-6s %-20s %-20s %-12s%s\n", "NAME", "STATE", "ID", "CREATED", "LAST ACTIVE", "SLEEPS AFTER",
              with_usage ? " CPU(s)   MEMORY   PIDS  DISK" : "");
  for (unsigned i = 0; i < all.size(); ++i) {
    auto s = all[i];
    std::string extra;
    if (with_usage) {
      auto u = usages[i].getUsage();
      char buf[96];
      std::snprintf(buf, sizeof buf, " %-8.2f %-8s %-5u %s", u.getCpuSeconds(), human_bytes(u.getMemoryBytes()).c_str(),
                    u.getPids(), human_bytes(u.getDiskBytes()).c_str());
      extra = buf;
    }
    std::printf("%-24s %-12s %-6llu %-20s %-20s %-12s%s\n", s.getName().cStr(), state_name(s.getState()),
                static_cast<unsigned long long>(s.getId()), format_time(s.getCreatedAtMs()).c_str(),
                format_time(s.getLastActivityMs()).c_str(),
                s.getKeepAlive() ? "never" : format_duration(s.getSleepAfterMs()).c_str(), extra.c_str());
  }
  return 0;
}

int cmd_rm(connection& c, const options& o) {
  if (o.rest.size() < 2) die("rm needs at least one sandbox name", exit_usage);
  int code = 0;
  for (std::size_t i = 1; i < o.rest.size(); ++i) {
    auto req = c.root.destroyRequest();
    req.setName(o.rest[i]);
    try {
      bool existed = req.send().wait(c.io.waitScope).getExisted();
      if (!existed) std::fprintf(stderr, "warren: no sandbox is called %s (nothing to remove)\n", o.rest[i].c_str());
      else std::printf("%s\n", o.rest[i].c_str());
    } catch (const kj::Exception& e) {
      std::fprintf(stderr, "warren: %s\n", describe(e).c_str());
      code = exit_warren_error;
    }
  }
  return code;
}

// warren sessions NAME | warren session NAME new S [--env K=V]... [--cwd DIR] | warren session NAME rm S
int cmd_sessions(connection& c, const options& o) {
  auto& a = o.rest;
  if (a[0] == "sessions") {
    if (a.size() != 2) die("sessions needs a sandbox name", exit_usage);
    auto res = existing(c, a[1]).listSessionsRequest().send().wait(c.io.waitScope);
    for (auto s : res.getSessions()) std::printf("%-20s %s\n", s.getName().cStr(), s.getCwd().cStr());
    return 0;
  }
  if (a.size() < 4 || (a[2] != "new" && a[2] != "rm"))
    die("usage: warren session NAME new SESSION [--env K=V]... [--cwd DIR] | warren session NAME rm SESSION", exit_usage);
  auto sandbox = existing(c, a[1]);
  if (a[2] == "rm") {
    auto req = sandbox.deleteSessionRequest();
    req.setName(a[3]);
    if (!req.send().wait(c.io.waitScope).getExisted()) std::fprintf(stderr, "warren: no session %s\n", a[3].c_str());
    return 0;
  }
  auto req = sandbox.createSessionRequest();
  req.setName(a[3]);
  std::vector<std::pair<std::string, std::string>> env;
  for (std::size_t i = 4; i < a.size(); ++i) {
    if (a[i] == "--cwd" && i + 1 < a.size()) {
      req.setCwd(a[++i]);
    } else if (a[i] == "--env" && i + 1 < a.size()) {
      auto kv = a[++i];
      auto eq = kv.find('=');
      if (eq == std::string::npos) die("--env takes NAME=VALUE, got '" + kv + "'", exit_usage);
      env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else {
      die("unknown session option " + a[i], exit_usage);
    }
  }
  auto list = req.initEnv(env.size());
  for (unsigned i = 0; i < env.size(); ++i) {
    list[i].setName(env[i].first);
    list[i].setValue(env[i].second);
  }
  req.send().wait(c.io.waitScope);
  return 0;
}

int cmd_version(connection& c, const options& o) {
  auto res = c.root.versionRequest().send().wait(c.io.waitScope);
  if (o.json) std::printf("{\"client\":\"0.1.0\",\"daemon\":%s,\"api\":%u}\n", warren::wire::json_quote(res.getDaemon().cStr()).c_str(), res.getApi());
  else std::printf("warren 0.1.0, warrend %s (API %u)\n", res.getDaemon().cStr(), res.getApi());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  const char* env_socket = std::getenv("WARREN_SOCKET");
  o.socket = env_socket && *env_socket ? env_socket : "/run/warren/warren.sock";
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (a == "--json") o.json = true;
    else if ((a == "--socket" || a == "--connect" || a == "--token-file") && i + 1 < argc) {
      std::string v = argv[++i];
      (a == "--socket" ? o.socket : a == "--connect" ? o.connect : o.token_file) = v;
    } else if (a.rfind("--", 0) == 0) die("unknown option " + a + " (see --help)", exit_usage);
    else break;
  }
  for (; i < argc; ++i) o.rest.emplace_back(argv[i]);
  if (o.rest.empty()) {
    std::fputs(usage, stderr);
    return exit_usage;
  }
  // `--json` may also follow the command (warren ls --json).
  for (auto it = o.rest.begin() + 1; it != o.rest.end(); ++it) {
    if (*it == "--") break;
    if (*it == "--json" && o.rest[0] != "exec") {
      o.json = true;
      o.rest.erase(it);
      break;
    }
  }
  auto& cmd = o.rest[0];
  static const char* commands[] = {"exec", "ls", "rm", "version", "create", "set", "sleep", "journal", "usage", "cp", "cat", "ls-files", "sessions", "session", "start", "ps", "logs", "kill", "expose", "unexpose", "ports", "snapshot", "snapshots", "fork", "restore", "backup", "backups", "shell"};
  if (std::find(std::begin(commands), std::end(commands), cmd) == std::end(commands))
    die("unknown command '" + cmd + "' (see --help)", exit_usage);

  auto io = kj::setupAsyncIo();
  auto c = connect(io, o);
  try {
    if (cmd == "exec") return cmd_exec(*c, o);
    if (cmd == "ls") return cmd_ls(*c, o);
    if (cmd == "rm") return cmd_rm(*c, o);
    if (cmd == "create") return cmd_create(*c, o);
    if (cmd == "set") return cmd_set(*c, o);
    if (cmd == "sleep") return cmd_sleep(*c, o);
    if (cmd == "journal") return cmd_journal(*c, o);
    if (cmd == "usage") return cmd_usage(*c, o);
    if (cmd == "cp") return cmd_cp(*c, o);
    if (cmd == "sessions" || cmd == "session") return cmd_sessions(*c, o);
    if (cmd == "start") return cmd_start(*c, o);
    if (cmd == "shell") return cmd_shell(*c, o);
    if (cmd == "ps") return cmd_ps(*c, o);
    if (cmd == "logs") return cmd_logs(*c, o);
    if (cmd == "kill") return cmd_kill(*c, o);
    if (cmd == "expose") return cmd_expose(*c, o);
    if (cmd == "snapshot") return cmd_snapshot(*c, o);
    if (cmd == "snapshots") return cmd_snapshots(*c, o);
    if (cmd == "fork") return cmd_fork(*c, o);
    if (cmd == "restore") return cmd_restore(*c, o);
    if (cmd == "backup") return cmd_backup(*c, o);
    if (cmd == "backups") return cmd_backups(*c, o);
    if (cmd == "unexpose") return cmd_unexpose(*c, o);
    if (cmd == "ports") return cmd_ports(*c, o);
    if (cmd == "cat") return cmd_cat(*c, o);
    if (cmd == "ls-files") return cmd_ls_files(*c, o);
    return cmd_version(*c, o);
  } catch (const kj::Exception& e) {
    if (e.getType() == kj::Exception::Type::DISCONNECTED)
      die("lost the connection to warrend (" + describe(e) + ")");
    die(describe(e));
  }
}
