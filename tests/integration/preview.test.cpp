// Preview URLs end to end: a real dev server in a sandbox behind the gateway's HTTP proxy,
// fetched with curl and a WebSocket client; tokens, revocation, waking and restarts.
#include <catch2/catch.hpp>

#include <kj/compat/http.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

#include "free_port.hpp"
#include "integration/api.hpp"
#include "wire/process.capnp.h"

using namespace warren::testing;

namespace {

const std::string dev_server = std::string(WARREN_FIXTURES_DIR) + "/dev_server.py";

struct exposed {
  std::string url, path_url, token;
};

// `warren expose NAME PORT --json`, parsed.
exposed expose(const warrend_process& d, const std::string& name, int port) {
  auto r = d.warren({"expose", name, std::to_string(port), "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto field = [&](const std::string& key) {
    auto at = r.out.find("\"" + key + "\":\"");
    REQUIRE(at != std::string::npos);
    at += key.size() + 4;
    return r.out.substr(at, r.out.find('"', at) - at);
  };
  exposed e{field("url"), field("pathUrl"), ""};
  auto dot = e.url.find(".localhost");
  e.token = e.url.substr(e.url.rfind('-', dot) + 1, dot - e.url.rfind('-', dot) - 1);
  return e;
}

// curl, with the status line's code first: "<code>\n<body>".
run_result curl(std::vector<std::string> args) {
  args.insert(args.begin(), {"/usr/bin/curl", "-sS", "--max-time", "60"});
  return run(args, 70000);
}
std::string status_and_body(const std::string& url) {
  auto r = curl({"-w", "\n%{http_code}", url});
  auto nl = r.out.rfind('\n');
  return r.out.substr(nl + 1) + "\n" + r.out.substr(0, nl);
}

// Starts the dev server in `name` as background process `id`, ready when this returns.
void start_dev_server(api& a, const warrend_process& d, const std::string& name, const std::string& id, int port,
                      bool restart_on_wake, const std::string& greeting) {
  REQUIRE(d.warren({"cp", dev_server, name + ":/workspace/dev_server.py"}).code == 0);
  auto s = a.root.sandboxRequest();
  s.setName(name);
  auto req = s.send().getSandbox().startProcessRequest();
  req.initRequest().initCommand().initArgv(3);
  auto argv = req.getRequest().getCommand().getArgv();
  argv.set(0, "python3");
  argv.set(1, "/workspace/dev_server.py");
  argv.set(2, std::to_string(port));
  auto env = req.getRequest().initEnv(1);
  env[0].setName("GREETING");
  env[0].setValue(greeting);
  req.initOptions().setId(id);
  req.getOptions().setRestartOnWake(restart_on_wake);
  auto p = req.send().getProcess();
  auto log = p.waitForLogRequest();
  log.setPattern("ready on port");
  log.setFromStart(true);
  log.setTimeoutMs(20000);
  log.send().wait(a.io.waitScope);
  auto ready = p.waitForPortRequest();
  ready.setPort(static_cast<std::uint16_t>(port));
  ready.setHttp(true);
  ready.setTimeoutMs(20000);
  CHECK(ready.send().wait(a.io.waitScope).getStatus() == 200);
}

class random_entropy final : public kj::EntropySource {
 public:
  void generate(kj::ArrayPtr<kj::byte> buffer) override { REQUIRE(::getrandom(buffer.begin(), buffer.size(), 0) == static_cast<ssize_t>(buffer.size())); }
};


}  // namespace

TEST_CASE("preview: a dev server behind a preview URL: HTTP both ways, WebSocket, 404 and 502, revocation", "[e2e][preview]") {
  warrend_process d;
  api a(d);
  start_dev_server(a, d, "web", "dev", 8000, false, "hello-there");
  auto e = expose(d, "web", 8000);
  auto port = std::to_string(d.http_port());
  CHECK(e.url == "http://8000-web-" + e.token + ".localhost:" + port + "/");
  CHECK(e.path_url == "http://localhost:" + port + "/preview/web/8000/" + e.token + "/");
  CHECK(e.token.size() == 22);
  CHECK(expose(d, "web", 8000).url == e.url);  // Exposing again: the same URL.
  auto listed = d.warren({"ports", "web"});
  CHECK(listed.out.find(e.url) != std::string::npos);

  // Host form: the page sees its own host; path form: the prefix is cut.
  auto r = status_and_body(e.url);
  CHECK(r.find("200\n") == 0);
  CHECK(r.find("path=/ host=8000-web-" + e.token + ".localhost:" + port) != std::string::npos);
  CHECK(r.find("greeting=hello-there") != std::string::npos);
  CHECK(status_and_body(e.path_url + "sub/page?q=1").find("path=/sub/page?q=1 host=localhost:" + port) != std::string::npos);
  auto bare = curl({"-i", e.path_url.substr(0, e.path_url.size() - 1) + "?x=1"});
  CHECK(bare.out.find("308") != std::string::npos);
  CHECK(bare.out.find("Location: /preview/web/8000/" + e.token + "/?x=1") != std::string::npos);

  // Keep-alive to the client: two requests, one connection.
  auto two = curl({"-v", e.url + "a", e.url + "b"});
  CHECK(two.out.find("path=/a") != std::string::npos);
  CHECK(two.out.find("path=/b") != std::string::npos);
  CHECK(two.err.find("Re-using existing connection") != std::string::npos);

  // A streamed (chunked) response, and request bodies of 8 MiB, sized and chunked.
  auto stream = curl({e.url + "stream"});
  CHECK(stream.out.find("line 0\n") == 0);
  CHECK(stream.out.find("line 199\n") != std::string::npos);
  test_dir tmp;
  auto big = tmp.path + "/big";
  REQUIRE(run({"/usr/bin/dd", "if=/dev/urandom", "of=" + big, "bs=1M", "count=8", "status=none"}).code == 0);
  auto sha = run({"/usr/bin/sha256sum", big}).out.substr(0, 64);
  auto sized = curl({"--data-binary", "@" + big, e.url + "upload"});
  CHECK(sized.out == std::to_string(8 << 20) + " " + sha + "\n");
  auto chunked = curl({"-H", "Transfer-Encoding: chunked", "--data-binary", "@" + big, e.url + "upload"});
  CHECK(chunked.out == std::to_string(8 << 20) + " " + sha + "\n");

  // WebSocket through the preview: text and a 256 KiB binary message, then a clean close.
  {
    kj::HttpHeaderTable table;
    random_entropy entropy;
    kj::HttpClientSettings settings;
    settings.entropySource = entropy;
    auto addr = a.io.provider->getNetwork().parseAddress("127.0.0.1", d.http_port()).wait(a.io.waitScope);
    auto client = kj::newHttpClient(a.io.provider->getTimer(), table, *addr, settings);
    kj::HttpHeaders h(table);
    auto host = "8000-web-" + e.token + ".localhost:" + port;
    h.set(kj::HttpHeaderId::HOST, host.c_str());
    auto res = client->openWebSocket("/ws", h).wait(a.io.waitScope);
    REQUIRE(res.statusCode == 101);
    auto& ws = res.webSocketOrBody.get<kj::Own<kj::WebSocket>>();
    ws->send(kj::StringPtr("hello")).wait(a.io.waitScope);
    auto m = ws->receive().wait(a.io.waitScope);
    REQUIRE(m.is<kj::String>());
    CHECK(std::string(m.get<kj::String>().cStr()) == "echo: hello");
    auto payload = kj::heapArray<kj::byte>(256 * 1024);
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<kj::byte>(i * 7);
    ws->send(payload.asPtr().asConst()).wait(a.io.waitScope);
    auto back = ws->receive(1 << 20).wait(a.io.waitScope);
    REQUIRE(back.is<kj::Array<kj::byte>>());
    CHECK(back.get<kj::Array<kj::byte>>() == payload);
    ws->close(1000, "bye").wait(a.io.waitScope);
    auto closed = ws->receive().wait(a.io.waitScope);
    CHECK(closed.is<kj::WebSocket::Close>());
  }

  // Wrong token, unknown sandbox, port not exposed: a bare 404 that says nothing.
  std::string wrong = e.token;
  wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
  for (auto& url : {"http://8000-web-" + wrong + ".localhost:" + port + "/", "http://8000-nope-" + e.token + ".localhost:" + port + "/",
                    "http://8001-web-" + e.token + ".localhost:" + port + "/", "http://localhost:" + port + "/",
                    "http://localhost:" + port + "/preview/web/8000/" + wrong + "/"}) {
    INFO(url);
    CHECK(status_and_body(url) == "404\nnot found\n");
  }

  // Exposed, nothing listening: 502 that says so.
  auto idle = expose(d, "web", 9000);
  auto r502 = status_and_body(idle.url);
  CHECK(r502.find("502\n") == 0);
  CHECK(r502.find("port 9000") != std::string::npos);

  // The daemon's own ports are refused; a sandbox cannot reach the daemon's listener.
  auto own = d.warren({"expose", "web", port});
  CHECK(own.code != 0);
  CHECK(own.err.find("daemon's own") != std::string::npos);
  CHECK(d.warren({"expose", "web", "0"}).code != 0);
  CHECK(d.warren({"expose", "web", "70000"}).code != 0);
  auto inside = d.warren({"exec", "web", "--", "curl", "-sS", "--max-time", "3", "http://127.0.0.1:" + port + "/"});
  CHECK(inside.code != 0);
  CHECK(inside.out.empty());

  // Revoked: 404 at once; the token never reaches the journal's readers or the log.
  CHECK(d.warren({"unexpose", "web", "8000"}).code == 0);
  CHECK(status_and_body(e.url) == "404\nnot found\n");
  CHECK(d.warren({"unexpose", "web", "8000"}).code != 0);
  auto journal = d.warren({"journal", "web", "--json"});
  CHECK(journal.out.find("port_exposed") != std::string::npos);
  CHECK(journal.out.find(e.token) == std::string::npos);
  CHECK(d.log().find(e.token) == std::string::npos);
}

TEST_CASE("preview: a request wakes a hibernated sandbox and restarts its processes, and its links outlive a daemon restart", "[e2e][preview][hibernate]") {
  auto http = std::to_string(free_loopback_port());
  warrend_process d({"--http-listen", "127.0.0.1:" + http});
  const std::string secret = "greeting-value-7f3c91";
  {
    api a(d);
    start_dev_server(a, d, "app", "dev", 3000, true, secret);
  }
  auto e = expose(d, "app", 3000);
  CHECK(status_and_body(e.url).find("greeting=" + secret) != std::string::npos);
  // A process without restart_on_wake, and one that was killed by its client, stay down.
  REQUIRE(d.warren({"start", "app", "--id", "plain", "--", "sleep", "1000"}).code == 0);
  REQUIRE(d.warren({"start", "app", "--id", "done", "--restart-on-wake", "--", "sleep", "1000"}).code == 0);
  REQUIRE(d.warren({"kill", "app", "done"}).code == 0);

  // Sleep right after a request (the proxy's hold does not stand in the way), then fetch.
  auto slept = d.warren({"sleep", "app"});
  INFO(slept.err);
  REQUIRE(slept.code == 0);
  CHECK(commands("python3 /workspace/dev_server.py").empty());
  auto woke = status_and_body(e.url);
  CHECK(woke.find("200\n") == 0);
  CHECK(woke.find("greeting=" + secret) != std::string::npos);  // Its env came back from inside the sandbox.
  auto ps = d.warren({"ps", "app"}).out;
  INFO(ps);
  CHECK(ps.find("dev              running") != std::string::npos);
  CHECK(ps.find("plain            lost") != std::string::npos);
  CHECK(ps.find("done             killed") != std::string::npos);
  auto running = d.warren({"ps", "app", "--status", "running"}).out;
  CHECK(running.find("dev ") != std::string::npos);
  CHECK(running.find("plain") == std::string::npos);
  auto ended = d.warren({"ps", "app", "--status", "lost", "--status", "killed"}).out;
  CHECK(ended.find("plain") != std::string::npos);
  CHECK(ended.find("done") != std::string::npos);
  CHECK(ended.find("dev ") == std::string::npos);
  // Again, while the proxy still holds it from the last request: the request must not wait
  // for a port of a sandbox that is asleep (it did, for the whole wake window).
  REQUIRE(d.warren({"sleep", "app"}).code == 0);
  auto quick = curl({"--max-time", "15", "-w", "\n%{http_code}", e.url});
  CHECK(quick.out.find("greeting=" + secret) != std::string::npos);
  auto journal = d.warren({"journal", "app", "--json"}).out;
  CHECK(journal.find("\"restartOnWake\":true") != std::string::npos);
  CHECK(journal.find(secret) == std::string::npos);
  CHECK(d.log().find(secret) == std::string::npos);

  // The daemon dies; the link shared yesterday still works today.
  d.stop(SIGKILL);
  d.start();
  auto again = status_and_body(e.url);
  CHECK(again.find("200\n") == 0);
  CHECK(again.find("greeting=" + secret) != std::string::npos);
}

namespace {

// A terminal over the daemon's WebSocket endpoint, as a browser's xterm.js would use it.
struct terminal_socket {
  kj::HttpHeaderTable table;
  random_entropy entropy;
  kj::Own<kj::NetworkAddress> addr;  // The client keeps a reference to it.
  kj::Own<kj::HttpClient> client;
  kj::Own<kj::WebSocket> ws;
  std::string screen;  // Everything the binary frames carried.
  unsigned status = 0;

  terminal_socket(api& a, std::uint16_t port, const std::string& path, const std::string& bearer = "") {
    kj::HttpClientSettings settings;
    settings.entropySource = entropy;
    addr = a.io.provider->getNetwork().parseAddress("127.0.0.1", port).wait(a.io.waitScope);
    client = kj::newHttpClient(a.io.provider->getTimer(), table, *addr, settings);
    kj::HttpHeaders h(table);
    h.set(kj::HttpHeaderId::HOST, "localhost");
    std::string auth = "Bearer " + bearer;  // Headers keep pointers: it must outlive the request.
    if (!bearer.empty()) h.add("Authorization", auth.c_str());
    auto res = client->openWebSocket(kj::StringPtr(path.c_str()), h).wait(a.io.waitScope);
    status = res.statusCode;
    KJ_IF_MAYBE(w, res.webSocketOrBody.tryGet<kj::Own<kj::WebSocket>>()) { ws = kj::mv(*w); }
  }
  // The next text frame (binary frames on the way go to `screen`).
  std::string next_text(api& a) {
    for (;;) {
      auto m = ws->receive(1 << 20).wait(a.io.waitScope);
      if (m.is<kj::String>()) return m.get<kj::String>().cStr();
      if (m.is<kj::WebSocket::Close>()) return "<close " + std::to_string(m.get<kj::WebSocket::Close>().code) + ">";
      auto& b = m.get<kj::Array<kj::byte>>();
      screen.append(reinterpret_cast<const char*>(b.begin()), b.size());
    }
  }
  // Binary frames until `pattern` shows up.
  bool until(api& a, const std::string& pattern) {
    while (screen.find(pattern) == std::string::npos) {
      auto m = ws->receive(1 << 20).wait(a.io.waitScope);
      if (!m.is<kj::Array<kj::byte>>()) return false;
      auto& b = m.get<kj::Array<kj::byte>>();
      screen.append(reinterpret_cast<const char*>(b.begin()), b.size());
    }
    return true;
  }
  void keys(api& a, const std::string& k) {
    ws->send(kj::arrayPtr(reinterpret_cast<const kj::byte*>(k.data()), k.size())).wait(a.io.waitScope);
  }
  void control(api& a, const std::string& json) { ws->send(kj::StringPtr(json.c_str())).wait(a.io.waitScope); }
};

}  // namespace

namespace {
const std::string terminal_token = "terminal-token-0123456789";

// The flags of a daemon whose terminals over WebSocket are on: a token file in `dir`.
std::vector<std::string> with_token(const test_dir& dir, std::vector<std::string> more = {}) {
  auto file = dir.path + "/token";
  std::ofstream(file) << terminal_token << "\n";
  more.insert(more.begin(), {"--token-file", file});
  return more;
}

// {"type":"ready","id":"ID"} -> ID ("" when it is not a ready message).
std::string ready_id(const std::string& m) {
  const std::string head = "{\"type\":\"ready\",\"id\":\"";
  if (m.rfind(head, 0) != 0 || m.size() < head.size() + 2) return "";
  return m.substr(head.size(), m.size() - head.size() - 2);
}
}  // namespace

TEST_CASE("terminals over WebSocket: token, ready, keys and screen, resize, errors, reattach with replay, exit", "[e2e][terminals]") {
  test_dir dir;
  warrend_process d(with_token(dir));
  api a(d);
  REQUIRE(d.warren({"exec", "tw", "--", "true"}).code == 0);
  auto port = d.http_port();
  const std::string token = terminal_token;

  // No token, a wrong one, no sandbox: refused before any upgrade.
  CHECK(terminal_socket(a, port, "/terminal/tw/ws").status == 401);
  CHECK(terminal_socket(a, port, "/terminal/tw/ws?token=wrong").status == 401);
  CHECK(terminal_socket(a, port, "/terminal/nope/ws?token=" + token).status == 404);
  CHECK(terminal_socket(a, port, "/terminal/tw/ws?token=" + token + "&cols=0").status == 400);

  terminal_socket t(a, port, "/terminal/tw/ws?cols=90&rows=20", token);  // The header form.
  REQUIRE(t.status == 101);
  auto id = ready_id(t.next_text(a));
  REQUIRE_FALSE(id.empty());
  t.keys(a, "stty size\r");
  CHECK(t.until(a, "20 90"));
  t.control(a, "{\"type\":\"resize\",\"cols\":132,\"rows\":43}");
  t.keys(a, "stty size; echo $((7*6))z\r");
  CHECK(t.until(a, "42z"));
  CHECK(t.screen.find("43 132") != std::string::npos);
  // Bad control messages get an error frame; the terminal goes on.
  t.control(a, "not json");
  CHECK(t.next_text(a).find("\"type\":\"error\"") != std::string::npos);
  t.control(a, "{\"type\":\"resize\",\"cols\":0,\"rows\":5}");
  CHECK(t.next_text(a).find("1-1000") != std::string::npos);
  t.control(a, "{\"type\":\"launch\"}");
  CHECK(t.next_text(a).find("unknown control message") != std::string::npos);
  t.keys(a, "echo $((100+1))still\r");
  CHECK(t.until(a, "101still"));
  // Job control through the socket: ^C ends the foreground job, ^Z stops one, fg resumes it.
  t.keys(a, "sleep 4747\r");
  CHECK(eventually([] { return !commands("sleep 4747").empty(); }));
  t.keys(a, "\x03");
  CHECK(eventually([] { return commands("sleep 4747").empty(); }));
  t.keys(a, "sleep 4848\r");
  CHECK(eventually([] { return !commands("sleep 4848").empty(); }));
  t.keys(a, "\x1a");
  CHECK(t.until(a, "Stopped"));
  t.screen.clear();
  t.keys(a, "fg\r");
  CHECK(t.until(a, "sleep 4848"));  // fg names the job it resumes,
  // and hands it the terminal a moment later: ^C until it has ended (bash ignores the early ones).
  bool ended = false;
  for (int i = 0; i < 20 && !ended; ++i) {
    t.keys(a, "\x03");
    ended = eventually([] { return commands("sleep 4848").empty(); }, 300);
  }
  CHECK(ended);
  t.keys(a, "echo $((200+2))back\r");
  CHECK(t.until(a, "202back"));
  CHECK(d.warren({"ps", "tw", "--status", "running"}).out.find(id + " ") != std::string::npos);

  // A second client attaches: the screen so far, then both see new output.
  terminal_socket u(a, port, "/terminal/tw/ws?token=" + token + "&id=" + id);
  REQUIRE(u.status == 101);
  CHECK(ready_id(u.next_text(a)) == id);
  CHECK(u.until(a, "101still"));  // Replayed.
  u.keys(a, "exit 5\r");
  CHECK(t.next_text(a) == "{\"type\":\"exit\",\"code\":5}");
  CHECK(u.next_text(a) == "{\"type\":\"exit\",\"code\":5}");
  CHECK(t.next_text(a) == "<close 1000>");

  // An oversized frame closes the socket with 1009.
  terminal_socket big(a, port, "/terminal/tw/ws?token=" + token);
  REQUIRE(big.status == 101);
  CHECK_FALSE(ready_id(big.next_text(a)).empty());
  std::string end;
  try {
    big.keys(a, std::string(200 * 1024, 'x'));
    end = big.next_text(a);
  } catch (const kj::Exception& e) {
    end = "reset";  // The daemon closed while our frame was still on the way: also a refusal.
  }
  INFO(end);
  CHECK((end == "<close 1009>" || end == "reset"));
  // The daemon is fine: a new terminal works.
  terminal_socket after(a, port, "/terminal/tw/ws?token=" + token);
  REQUIRE(after.status == 101);
  CHECK_FALSE(ready_id(after.next_text(a)).empty());
}

namespace {
long rss_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}
}  // namespace

TEST_CASE("a terminal client that does not read cannot make the daemon buffer its output", "[e2e][terminals]") {
  test_dir dir;
  warrend_process d(with_token(dir));
  api a(d);
  REQUIRE(d.warren({"exec", "flood", "--", "true"}).code == 0);
  terminal_socket t(a, d.http_port(), "/terminal/flood/ws?token=" + terminal_token);
  REQUIRE(t.status == 101);
  CHECK_FALSE(ready_id(t.next_text(a)).empty());
  auto before = rss_kb(d.pid);
  // 300 MB of output while this client reads nothing.
  t.keys(a, "head -c 300000000 /dev/zero | tr '\\0' x; echo; echo flood-$((1+1))\r");
  CHECK(eventually([] { return commands("head -c 300000000 /dev/zero").empty(); }, 60000));  // Written.
  auto after = rss_kb(d.pid);
  INFO(before << " KB -> " << after << " KB");
  CHECK(after - before < 64 * 1024);
  // It still gets the end of the output (the terminal's buffer, not everything).
  CHECK(t.until(a, "flood-2"));
}

TEST_CASE("terminals over WebSocket are off without a token", "[e2e][terminals]") {
  warrend_process d;
  api a(d);
  REQUIRE(d.warren({"exec", "tw", "--", "true"}).code == 0);
  CHECK(terminal_socket(a, d.http_port(), "/terminal/tw/ws?token=anything").status == 403);
}

TEST_CASE("the terminal page works in headless Chromium: type, see the output, reload, see it replayed", "[e2e][terminals][browser]") {
  test_dir dir;
  warrend_process d(with_token(dir, {"--web-dir", WARREN_WEB_DIR}));
  REQUIRE(d.warren({"exec", "page", "--", "true"}).code == 0);
  auto base = "http://127.0.0.1:" + std::to_string(d.http_port());
  CHECK(status_and_body(base + "/terminal/page").rfind("401\n", 0) == 0);
  CHECK(status_and_body(base + "/terminal/-/xterm.js").rfind("200\n", 0) == 0);
  auto r = run({"/usr/bin/env", std::string("WARREN_WEB=") + WARREN_WEB_DIR, "node",
                std::string(WARREN_SOURCE_DIR) + "/tests/browser/terminal_page.cjs",
                base + "/terminal/page?token=" + terminal_token},
               120000);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out == "ok\n");
}
