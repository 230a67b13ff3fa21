// warren shell: a terminal in a sandbox (a background process on a pty, wire/process.capnp),
// attached to ours: raw mode, keys in, screen out, size on SIGWINCH, Ctrl-] to detach.
// Reattaching (--attach ID) prints what the terminal's buffer holds first, then goes on live.
#include <kj/async-unix.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

#include "tools/warren/cli.hpp"
#include "wire/process.capnp.h"

namespace warren::cli {
namespace {

constexpr kj::byte detach_key = 0x1d;  // Ctrl-]

bool write_all_fd(int fd, const kj::byte* p, std::size_t n) {
  while (n > 0) {
    auto w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// Our terminal in raw mode while attached; restored however we leave.
struct raw_mode {
  termios saved {};
  bool active = false;
  raw_mode() {
    if (!::isatty(0) || ::tcgetattr(0, &saved) < 0) return;
    auto raw = saved;
    ::cfmakeraw(&raw);
    active = ::tcsetattr(0, TCSANOW, &raw) == 0;
  }
  ~raw_mode() {
    if (active) ::tcsetattr(0, TCSANOW, &saved);
  }
};

struct shell_state {
  bool ended = false, detached = false;
  int exit_code = 0;
};

class screen_sink final : public wire::LogSink::Server {
 public:
  explicit screen_sink(shell_state& s) : s_(s) {}

 protected:
  kj::Promise<void> write(WriteContext context) override {
    auto d = context.getParams().getData();
    if (!write_all_fd(1, d.begin(), d.size())) return KJ_EXCEPTION(DISCONNECTED, "output closed");
    return kj::READY_NOW;
  }
  kj::Promise<void> dropped(DroppedContext) override { return kj::READY_NOW; }
  kj::Promise<void> ended(EndedContext context) override {
    auto i = context.getParams().getInfo();
    s_.ended = true;
    s_.exit_code = i.getStatus() == wire::ProcessStatus::EXITED ? i.getExitCode() : 128 + i.getSignal();
    return kj::READY_NOW;
  }

 private:
  shell_state& s_;
};

void local_size(std::uint16_t& cols, std::uint16_t& rows) {
  winsize ws {};
  if (::isatty(1) && ::ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    cols = ws.ws_col;
    rows = ws.ws_row;
  }
}

// Our keys to the terminal, until Ctrl-] (detach) or the end of our input.
kj::Promise<void> pump_keys(kj::AsyncInputStream& in, wire::Process::Client process, shell_state& s) {
  auto buf = kj::heapArray<kj::byte>(4096);
  auto* p = buf.begin();
  return in.tryRead(p, 1, buf.size())
      .then([&in, process, &s, buf = kj::mv(buf)](std::size_t n) mutable -> kj::Promise<void> {
        if (n == 0) return kj::NEVER_DONE;  // Our input ended: stay until the terminal does.
        std::size_t keep = n;
        for (std::size_t i = 0; i < n; ++i)
          if (buf[i] == detach_key) {
            keep = i;
            s.detached = true;
            break;
          }
        kj::Promise<void> sent = kj::READY_NOW;
        if (keep > 0) {
          auto w = process.writeRequest();
          w.setData(kj::arrayPtr(buf.begin(), keep));
          sent = w.send();
        }
        if (s.detached) return sent.then([process]() mutable { return process.infoRequest().send().ignoreResult(); });
        return sent.then([&in, process, &s]() mutable { return pump_keys(in, process, s); });
      });
}

kj::Promise<void> follow_size(kj::UnixEventPort& port, wire::Process::Client process) {
  return port.onSignal(SIGWINCH).then([&port, process](siginfo_t) mutable {
    std::uint16_t cols = 0, rows = 0;
    local_size(cols, rows);
    kj::Promise<void> sent = kj::READY_NOW;
    if (cols && rows) {
      auto r = process.resizeRequest();
      r.setCols(cols);
      r.setRows(rows);
      sent = r.send().ignoreResult();
    }
    return sent.then([&port, process]() mutable { return follow_size(port, process); });
  });
}

}  // namespace

// warren shell NAME [--session S] [--id ID] [--shell PROGRAM] | warren shell NAME --attach ID
int cmd_shell(connection& c, const options& o) {
  std::vector<std::string> pos;
  std::string session, id, attach, program = "/bin/bash";
  for (std::size_t i = 1; i < o.rest.size(); ++i) {
    auto& a = o.rest[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= o.rest.size()) die(a + " needs a value", exit_usage);
      return o.rest[++i];
    };
    if (a == "--session" || a == "-s") session = value();
    else if (a == "--id") id = value();
    else if (a == "--attach") attach = value();
    else if (a == "--shell") program = value();
    else if (a.rfind("-", 0) == 0) die("unknown shell option " + a, exit_usage);
    else pos.push_back(a);
  }
  if (pos.size() != 1) die("usage: warren shell NAME [--session S] [--id ID] [--shell PROGRAM] | warren shell NAME --attach ID", exit_usage);
  kj::UnixEventPort::captureSignal(SIGWINCH);
  auto sreq = c.root.sandboxRequest();
  sreq.setName(pos[0]);
  if (!attach.empty()) sreq.initOptions().setCreateIfMissing(false);
  auto sandbox = sreq.send().getSandbox();
  wire::Process::Client process = nullptr;
  std::uint64_t from = 0;
  if (attach.empty()) {
    std::uint16_t cols = 80, rows = 24;
    local_size(cols, rows);
    auto req = sandbox.startProcessRequest();
    auto argv = req.initRequest().initCommand().initArgv(1);
    argv.set(0, program);
    req.getRequest().setSession(session);
    auto opts = req.initOptions();
    opts.setId(id);
    opts.setPty(true);
    opts.setCols(cols);
    opts.setRows(rows);
    auto res = req.send().wait(c.io.waitScope);
    process = res.getProcess();
    std::fprintf(stderr, "warren: terminal %s in %s (Ctrl-] detaches; warren shell %s --attach %s comes back)\r\n",
                 res.getInfo().getId().cStr(), pos[0].c_str(), pos[0].c_str(), res.getInfo().getId().cStr());
  } else {
    auto g = sandbox.getProcessRequest();
    g.setId(attach);
    auto res = g.send().wait(c.io.waitScope);
    if (!res.getInfo().getPty()) die(attach + " is not a terminal (see warren logs)", exit_usage);
    process = res.getProcess();
    // The screen so far (what its buffer holds), then live output from there.
    auto logs = process.logsRequest().send().wait(c.io.waitScope).getStdout();
    auto d = logs.getData();
    write_all_fd(1, d.begin(), d.size());
    from = logs.getEndOffset();
    std::uint16_t cols = 0, rows = 0;
    local_size(cols, rows);
    if (cols && rows) {
      auto r = process.resizeRequest();
      r.setCols(cols);
      r.setRows(rows);
      r.send().wait(c.io.waitScope);
    }
  }

  raw_mode raw;
  shell_state state;
  auto follow = process.streamLogsRequest();
  follow.setStdoutFrom(from);
  follow.setSink(kj::heap<screen_sink>(state));
  auto screen = follow.send().ignoreResult();
  auto in = c.io.lowLevelProvider->wrapInputFd(0);
  auto keys = pump_keys(*in, process, state);
  auto size = follow_size(c.io.unixEventPort, process);
  // Whichever comes first: the terminal's end (its output drained) or a detach.
  screen.exclusiveJoin(kj::mv(keys)).exclusiveJoin(kj::mv(size)).wait(c.io.waitScope);
  if (state.detached && !state.ended) {
    std::fprintf(stderr, "\r\nwarren: detached; warren shell %s --attach ID comes back\r\n", pos[0].c_str());
    return 0;
  }
  return state.exit_code;
}

}  // namespace warren::cli
