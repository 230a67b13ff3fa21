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
