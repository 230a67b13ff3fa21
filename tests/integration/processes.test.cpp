// Background processes over the API: readiness waits, and reconnecting to a process's output
// with the offsets a client has seen.
#include <catch2/catch.hpp>

#include "integration/api.hpp"
#include "wire/process.capnp.h"

using namespace warren::testing;
using warren::wire::LogSink;
using warren::wire::Process;

namespace {

// Collects what streamLogs sends.
struct collected {
  std::string out, err;
  std::uint64_t next_out = 0;
  bool ended = false;
};

class collect_sink final : public LogSink::Server {
 public:
  explicit collect_sink(collected& c) : c_(c) {}

 protected:
  kj::Promise<void> write(WriteContext context) override {
    auto p = context.getParams();
    auto data = text(p.getData());
    if (p.getStream() == 2) {
      c_.err += data;
    } else {
      CHECK(p.getOffset() == c_.next_out);  // Contiguous: nothing skipped, nothing twice.
      c_.out += data;
      c_.next_out = p.getOffset() + data.size();
    }
    return kj::READY_NOW;
  }
  kj::Promise<void> dropped(DroppedContext) override { return kj::READY_NOW; }
  kj::Promise<void> ended(EndedContext) override {
    c_.ended = true;
    return kj::READY_NOW;
  }

 private:
  collected& c_;
};

Process::Client start(api& a, const std::string& sandbox, const std::string& id, const std::string& line) {
  auto s = a.root.sandboxRequest();
  s.setName(sandbox);
  auto req = s.send().getSandbox().startProcessRequest();
  req.initRequest().initCommand().setShell(line);
  req.initOptions().setId(id);
  return req.send().getProcess();
}

}  // namespace

TEST_CASE("processes: wait for a log line and for the exit, reconnect to the output from an offset", "[e2e][processes]") {
  warrend_process d;
  api a(d);
  auto p = start(a, "w", "srv", "echo booting; sleep 0.3; echo 'listening on 8080'; sleep 0.3; echo bye; exit 4");
  auto wait_log = p.waitForLogRequest();
  wait_log.setPattern("listening");
  wait_log.setFromStart(true);
  wait_log.setTimeoutMs(10000);
  auto hit = wait_log.send().wait(a.io.waitScope);
  CHECK(std::string(hit.getLine().cStr()) == "listening on 8080");
  CHECK(hit.getStream() == 1);
  CHECK(hit.getOffset() == 8);  // After "booting\n".

  // A client that saw the first 8 bytes reconnects and gets exactly the rest.
  collected got;
  got.next_out = 8;
  auto stream = p.streamLogsRequest();
  stream.setStdoutFrom(8);
  stream.setSink(kj::heap<collect_sink>(got));
  stream.send().wait(a.io.waitScope);
  CHECK(got.out == "listening on 8080\nbye\n");
  CHECK(got.ended);

  auto exit = p.waitForExitRequest();
  auto info = exit.send().wait(a.io.waitScope).getInfo();
  CHECK(info.getStatus() == warren::wire::ProcessStatus::EXITED);
  CHECK(info.getExitCode() == 4);

  // Waits that cannot be met end with a reason, never hang.
  auto never = p.waitForLogRequest();
  never.setPattern("never printed");
  CHECK(a.error_of(never).rfind("not_found", 0) == 0);
  auto slow = start(a, "w", "slow", "sleep 30");
  auto timed = slow.waitForExitRequest();
  timed.setTimeoutMs(200);
  CHECK(a.error_of(timed).rfind("timeout", 0) == 0);
  REQUIRE(a.error_of(slow.killRequest()) == "");
}

TEST_CASE("processes: wait until a dev server answers HTTP on its port", "[e2e][processes]") {
  warrend_process d;
  api a(d);
  auto p = start(a, "h", "web", "sleep 0.5; exec python3 -m http.server 8123 --bind 127.0.0.1");
  auto wait = p.waitForPortRequest();
  wait.setPort(8123);
  wait.setHttp(true);
  wait.setTimeoutMs(20000);
  CHECK(wait.send().wait(a.io.waitScope).getStatus() == 200);
  // A port nobody will open: the wait ends with the process, or at its timeout.
  auto quick = start(a, "h", "quick", "sleep 0.3");
  auto never = quick.waitForPortRequest();
  never.setPort(8999);
  CHECK(a.error_of(never).rfind("not_found", 0) == 0);
  auto tcp = p.waitForPortRequest();
  tcp.setPort(8998);
  tcp.setTimeoutMs(300);
  CHECK(a.error_of(tcp).rfind("timeout", 0) == 0);
  REQUIRE(a.error_of(p.killRequest()) == "");
}

namespace {

Process::Client start_terminal(api& a, const std::string& sandbox, const std::string& id) {
  auto s = a.root.sandboxRequest();
  s.setName(sandbox);
  auto req = s.send().getSandbox().startProcessRequest();
  auto argv = req.initRequest().initCommand().initArgv(4);
  argv.set(0, "/bin/bash");
  argv.set(1, "--norc");
  argv.set(2, "--noprofile");
  argv.set(3, "-i");
  auto env = req.getRequest().initEnv(1);
  env[0].setName("PS1");
  env[0].setValue("$ ");
  auto o = req.initOptions();
  o.setId(id);
  o.setPty(true);
  o.setCols(100);
  o.setRows(30);
  return req.send().getProcess();
}

void type(api& a, Process::Client& p, const std::string& keys) {
  auto w = p.writeRequest();
  w.setData(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(keys.data()), keys.size()));
  w.send().wait(a.io.waitScope);
  // A streaming call may still sit in this client's queue: a call after it, answered, means
  // the keys were delivered (calls on one capability arrive in order).
  p.infoRequest().send().wait(a.io.waitScope);
}

// Waits for `pattern` in what the terminal shows from now on (typed input is echoed, so
// patterns are results that the typed text does not contain).
void expect(api& a, Process::Client& p, const std::string& keys, const std::string& pattern) {
  auto wait = p.waitForLogRequest();
  wait.setPattern(pattern);
  wait.setTimeoutMs(10000);
  auto pending = wait.send();
  type(a, p, keys);
  INFO(keys << " -> " << pattern);
  CHECK_NOTHROW(pending.wait(a.io.waitScope));
}

// The error of a streaming write: a streaming call's own promise resolves on flow control,
// its failure comes back on the next call of the stream.
std::string write_error(api& a, Process::Client& p, const std::string& data) {
  try {
    for (int i = 0; i < 2; ++i) {
      auto w = p.writeRequest();
      w.setData(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(data.data()), data.size()));
      w.send().wait(a.io.waitScope);
    }
    p.infoRequest().send().wait(a.io.waitScope);
    return "";
  } catch (const kj::Exception& e) {
    return e.getDescription().cStr();
  }
}

}  // namespace

TEST_CASE("terminals: a shell on a pty, resize, job control, replay to two clients, exit code", "[e2e][processes][terminals]") {
  warrend_process d;
  api a(d);
  auto t = start_terminal(a, "term", "t1");
  expect(a, t, "stty size; tty\n", "30 100");
  expect(a, t, "echo $TERM-$((6*7))\n", "xterm-256color-42");
  auto r = t.resizeRequest();
  r.setCols(120);
  r.setRows(40);
  r.send().wait(a.io.waitScope);
  expect(a, t, "stty size\n", "40 120");
  // ^C interrupts the foreground job, the shell goes on.
  type(a, t, "sleep 4545\n");
  CHECK(eventually([] { return !commands("sleep 4545").empty(); }));
  expect(a, t, "\x03", "$ ");
  CHECK(eventually([] { return commands("sleep 4545").empty(); }));
  expect(a, t, "echo $((40+3))x\n", "43x");
  // ^Z stops it, fg brings it back, ^C ends it.
  type(a, t, "sleep 4646\n");
  CHECK(eventually([] { return !commands("sleep 4646").empty(); }));
  expect(a, t, "\x1a", "Stopped");
  expect(a, t, "fg\n", "sleep 4646");
  bool ended = false;  // fg hands the job the terminal a moment after naming it.
  for (int i = 0; i < 20 && !ended; ++i) {
    type(a, t, "\x03");
    ended = eventually([] { return commands("sleep 4646").empty(); }, 300);
  }
  CHECK(ended);

  // Two clients replay the whole screen from offset 0, then follow until the end.
  collected one, two;
  auto follow = [&](collected& c) {
    auto req = t.streamLogsRequest();
    req.setSink(kj::heap<collect_sink>(c));
    return req.send();
  };
  auto f1 = follow(one);
  auto f2 = follow(two);
  expect(a, t, "echo $((50+5))end\n", "55end");
  type(a, t, "exit 7\n");
  f1.wait(a.io.waitScope);
  f2.wait(a.io.waitScope);
  CHECK(one.ended);
  CHECK(one.out == two.out);
  CHECK(one.out.find("30 100") != std::string::npos);
  CHECK(one.out.find("/dev/pts/") != std::string::npos);
  CHECK(one.out.find("55end") != std::string::npos);
  auto wait = t.waitForExitRequest();
  auto info = wait.send().wait(a.io.waitScope).getInfo();
  CHECK(info.getExitCode() == 7);
  CHECK(info.getPty());

  // Bad input.
  auto ended_write = write_error(a, t, "x");
  INFO(ended_write);
  CHECK(ended_write.find("not_found: the process has ended") != std::string::npos);
  auto plain = start(a, "term", "plain", "sleep 30");
  auto plain_write = write_error(a, plain, "x");
  INFO(plain_write);
  CHECK(plain_write.find("invalid_argument: this process has no terminal") != std::string::npos);
  auto t2 = start_terminal(a, "term", "t2");
  auto bad = t2.resizeRequest();
  bad.setCols(0);
  bad.setRows(10);
  CHECK(a.error_of(bad).rfind("invalid_argument", 0) == 0);
  auto big_write = write_error(a, t2, std::string(100 * 1024, 'x'));
  INFO(big_write);
  CHECK(big_write.find("too_large") != std::string::npos);
}

TEST_CASE("warren shell: a terminal from the CLI, its exit code, detach and reattach with the screen replayed", "[e2e][terminals]") {
  warrend_process d;
  auto shell = [&](const std::string& keys, const std::string& args) {
    return run({"/bin/sh", "-c", "printf '" + keys + "' | " + bin("warren") + " --socket " + d.socket + " shell " + args});
  };
  auto r = shell("cd /tmp && echo at:$(pwd)\\nexit 3\\n", "term");
  INFO(r.out << r.err);
  CHECK(r.code == 3);
  CHECK(r.out.find("at:/tmp") != std::string::npos);
  CHECK(r.err.find("Ctrl-] detaches") != std::string::npos);

  // A session's environment and directory.
  REQUIRE(d.warren({"exec", "term", "--session", "dev", "--shell", "--", "mkdir -p /srv/app && cd /srv/app && export X=42"}).code == 0);
  auto s = shell("echo $X:$(pwd)\\nexit\\n", "term --session dev");
  INFO(s.out);
  CHECK(s.out.find("42:/srv/app") != std::string::npos);

  // Ctrl-] detaches and the shell goes on; --attach shows its screen, then takes keys.
  auto detached = shell("echo $((2+3))five\\n\\035", "term --id keep");
  CHECK(detached.code == 0);
  CHECK(detached.err.find("detached") != std::string::npos);
  CHECK(eventually([&] { return d.warren({"logs", "term", "keep"}).out.find("5five") != std::string::npos; }));
  auto back = shell("exit 4\\n", "term --attach keep");
  INFO(back.out << back.err);
  CHECK(back.code == 4);
  CHECK(back.out.find("5five") != std::string::npos);  // Replayed.
  REQUIRE(d.warren({"start", "term", "--id", "plain", "--", "sleep", "30"}).code == 0);
  CHECK(shell("", "term --attach plain").err.find("not a terminal") != std::string::npos);
}

TEST_CASE("a followed terminal keeps its sandbox awake, and once nobody follows it sleeps", "[e2e][terminals]") {
  warrend_process d;
  api a(d);
  auto s = a.root.sandboxRequest();
  s.setName("nap");
  s.initOptions().setSleepAfterMs(1500);
  s.send().wait(a.io.waitScope);
  auto t = start_terminal(a, "nap", "t");
  collected seen;
  auto follow = t.streamLogsRequest();
  follow.setSink(kj::heap<collect_sink>(seen));
  auto following = follow.send();
  expect(a, t, "echo $((3*3))nine\n", "9nine");
  a.io.provider->getTimer().afterDelay(4 * kj::SECONDS).wait(a.io.waitScope);  // Idle, but followed.
  auto ls = d.warren({"ls", "--json"}).out;
  INFO(ls);
  CHECK(ls.find("\"name\":\"nap\",\"state\":\"running\"") != std::string::npos);
  { auto drop = kj::mv(following); }  // The client goes away (the cancellation goes out with
  a.root.versionRequest().send().wait(a.io.waitScope);  // the next message this client sends).
  CHECK(eventually([&] { return d.warren({"ls", "--json"}).out.find("\"state\":\"hibernated\"") != std::string::npos; },
                   15000));
  // A terminal opened on the sleeping sandbox wakes it: a new shell, the same files.
  REQUIRE(d.warren({"exec", "nap", "--shell", "--", "echo kept > /workspace/mark"}).code == 0);
  REQUIRE(d.warren({"sleep", "nap"}).code == 0);
  auto woken = start_terminal(a, "nap", "t2");
  expect(a, woken, "cat /workspace/mark; echo $((5+5))ten\n", "10ten");
  CHECK(text(woken.logsRequest().send().wait(a.io.waitScope).getStdout().getData()).find("kept") != std::string::npos);
}
