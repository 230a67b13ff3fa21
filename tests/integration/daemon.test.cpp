// warrend + warren end to end: real sandboxes, real kernel isolation. Needs root.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "integration/harness.hpp"
#include "storage/journal.hpp"
#include "wire/events.hpp"

using namespace warren::testing;
namespace fs = std::filesystem;

TEST_CASE("warren exec runs a command in a new sandbox and propagates its output and exit code", "[e2e]") {
  warrend_process d;
  auto r = d.warren({"exec", "demo", "--", "echo", "hello"});
  CHECK(r.out == "hello\n");
  CHECK(r.err.empty());
  CHECK(r.code == 0);

  r = d.warren({"exec", "demo", "--", "sh", "-c", "echo out; echo err >&2; exit 7"});
  CHECK(r.out == "out\n");
  CHECK(r.err == "err\n");
  CHECK(r.code == 7);

  r = d.warren({"exec", "demo", "--shell", "--", "kill -TERM $$"});
  CHECK(r.code == 128 + SIGTERM);

  // Options reach the command; the sandbox's default working directory is /workspace.
  r = d.warren({"exec", "demo", "--env", "GREETING=hi there", "--cwd", "/tmp", "--", "sh", "-c", "echo \"$GREETING\"; pwd"});
  CHECK(r.out == "hi there\n/tmp\n");
  CHECK(d.warren({"exec", "demo", "--", "pwd"}).out == "/workspace\n");
}

TEST_CASE("output streams in order and large output arrives whole", "[e2e]") {
  warrend_process d;
  // 8 MiB through the flow-controlled stream; every byte counted.
  auto r = d.warren({"exec", "big", "--", "sh", "-c", "head -c 8388608 /dev/zero | tr '\\0' x"});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out.size() == 8388608);
  CHECK(r.out.find_first_not_of('x') == std::string::npos);
}

TEST_CASE("a command that does not exist exits 127 with a message", "[e2e][bad-input]") {
  warrend_process d;
  auto r = d.warren({"exec", "demo", "--", "no-such-command-here"});
  CHECK(r.code == 127);
  CHECK(r.err.find("no-such-command-here: command not found") != std::string::npos);
  auto cwd = d.warren({"exec", "demo", "--cwd", "/does/not/exist", "--", "true"});
  CHECK(cwd.code == 126);
  CHECK(cwd.err.find("/does/not/exist") != std::string::npos);
}

TEST_CASE("invalid names get a precise error and create nothing", "[e2e][bad-input]") {
  warrend_process d;
  for (std::string name : {"", "Demo", "../x", "a b", std::string(64, 'a').c_str(), "-x"}) {
    auto r = d.warren({"exec", name, "--", "true"});
    INFO(name);
    CHECK(r.code == 125);
    CHECK(r.err.find("sandbox name") != std::string::npos);
  }
  auto rm = d.warren({"rm", "../etc"});
  CHECK(rm.code == 125);
  CHECK(rm.err.find("a-z") != std::string::npos);
  CHECK(d.warren({"ls", "--json"}).out == "[]\n");
  CHECK(fs::is_empty(d.view(d.data_dir + "/sandboxes")));
}

TEST_CASE("the timeout kills the command and says so", "[e2e]") {
  warrend_process d;
  auto start = std::chrono::steady_clock::now();
  auto r = d.warren({"exec", "demo", "--timeout", "0.5", "--", "sleep", "30"});
  CHECK(r.code == 124);
  CHECK(r.err.find("timed out") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  CHECK(commands("sleep 30").empty());
}

TEST_CASE("a client that disconnects mid-exec does not leak the process", "[e2e]") {
  warrend_process d;
  REQUIRE(d.warren({"exec", "demo", "--", "true"}).code == 0);
  auto cli = spawn({bin("warren"), "--socket", d.socket, "exec", "demo", "--", "sleep", "4242"});
  REQUIRE(eventually([] { return !commands("sleep 4242").empty(); }));
  ::kill(cli, SIGKILL);
  ::waitpid(cli, nullptr, 0);
  CHECK(eventually([] { return commands("sleep 4242").empty(); }));
  // The sandbox is still usable, and the cancelled exec is journaled.
  CHECK(d.warren({"exec", "demo", "--", "echo", "ok"}).out == "ok\n");
}

TEST_CASE("with finish-on-disconnect, a command outlives its client and its end is journaled", "[e2e]") {
  warrend_process d;
  REQUIRE(d.warren({"exec", "fin", "--", "true"}).code == 0);
  auto cli = spawn({bin("warren"), "--socket", d.socket, "exec", "fin", "--finish-on-disconnect", "--shell", "--",
                    "sleep 1.5; echo done > /workspace/marker; seq 1 100000"});
  REQUIRE(eventually([] { return !commands("sleep 1.5").empty(); }));
  ::kill(cli, SIGKILL);
  ::waitpid(cli, nullptr, 0);
  // It ran to its end although nobody reads its output any more.
  CHECK(eventually([&] { return d.warren({"exec", "fin", "--session", "check", "--", "cat", "/workspace/marker"}).out == "done\n"; }));
  CHECK(eventually([&] { return d.warren({"journal", "fin"}).out.find("exec 2 finished: exit 0") != std::string::npos; }));
}

TEST_CASE("warren ls lists sandboxes and warren rm removes every trace", "[e2e]") {
  warrend_process d;
  REQUIRE(d.warren({"exec", "one", "--", "sh", "-c", "echo data > /workspace/f"}).code == 0);
  REQUIRE(d.warren({"exec", "two", "--", "true"}).code == 0);
  auto ls = d.warren({"ls"});
  CHECK(ls.out.find("one") != std::string::npos);
  CHECK(ls.out.find("running") != std::string::npos);
  auto id = d.sandbox_id("one");
  auto dir = d.data_dir + "/sandboxes/" + std::to_string(id);
  auto cg = d.cgroup_parent() + "/sb-" + std::to_string(id);
  REQUIRE(fs::exists(d.view(dir + "/upper/root/workspace/f")));
  REQUIRE(fs::exists(cg));
  REQUIRE_FALSE(processes_with("--sandbox-dir " + dir).empty());

  auto rm = d.warren({"rm", "one"});
  CHECK(rm.code == 0);
  CHECK_FALSE(fs::exists(d.view(dir)));
  CHECK(fs::exists(d.view(d.data_dir + "/sandboxes")));  // (The view works.)
  CHECK_FALSE(fs::exists(cg));
  CHECK(processes_with("--sandbox-dir " + dir).empty());
  CHECK_FALSE(host_mounts_mention(dir));
  CHECK_FALSE(d.mounts_mention(dir));
  auto json = d.warren({"ls", "--json"}).out;
  CHECK(json.find("\"one\"") == std::string::npos);
  CHECK(json.find("\"two\"") != std::string::npos);
  // Removing again is not an error for the daemon; the CLI says there was nothing.
  auto again = d.warren({"rm", "one"});
  CHECK(again.err.find("no sandbox is called one") != std::string::npos);
  // A new sandbox of the same name starts empty.
  CHECK(d.warren({"exec", "one", "--", "ls", "/workspace"}).out.empty());
}

TEST_CASE("SIGTERM stops the daemon cleanly and leaves no process, cgroup or socket", "[e2e][lifecycle]") {
  warrend_process d;
  REQUIRE(d.warren({"exec", "a", "--", "true"}).code == 0);
  auto bg = spawn({bin("warren"), "--socket", d.socket, "exec", "b", "--", "sleep", "4343"});
  REQUIRE(eventually([] { return !commands("sleep 4343").empty(); }));
  auto cg = d.cgroup_parent();
  auto name = cg.substr(cg.rfind('/') + 1);
  CHECK(d.stop(SIGTERM) == 0);
  for (auto v1 : {"memory", "pids", "cpu"}) CHECK_FALSE(fs::exists(std::string("/sys/fs/cgroup/") + v1 + "/" + name));
  ::waitpid(bg, nullptr, 0);
  CHECK(commands("sleep 4343").empty());
  CHECK(processes_with("--sandbox-dir " + d.data_dir).empty());
  CHECK_FALSE(fs::exists(cg));
  CHECK_FALSE(fs::exists(d.socket));
  // The disk pool was mounted in the daemon's namespace only; its loop device is free.
  CHECK_FALSE(host_mounts_mention(d.data_dir));
  CHECK(eventually([&] { return !loop_backs(d.data_dir + "/disk.img"); }));
  CHECK(d.log().find("event=daemon_stopped") != std::string::npos);
}

TEST_CASE("after kill -9 and a restart, sandboxes, files and the journal are intact", "[e2e][durability]") {
  warrend_process d;
  REQUIRE(d.warren({"exec", "keep", "--", "sh", "-c", "echo precious > /workspace/f"}).code == 0);
  auto id = d.sandbox_id("keep");
  CHECK(d.stop(SIGKILL) == 128 + SIGKILL);
  // The sandbox dies with the daemon (PDEATHSIG), nothing keeps running unowned.
  CHECK(eventually([&] { return processes_with("--sandbox-dir " + d.data_dir).empty(); }));
  // Nothing of the pool outlives the daemon either: its mount went with its namespace.
  CHECK_FALSE(host_mounts_mention(d.data_dir));
  CHECK(eventually([&] { return !loop_backs(d.data_dir + "/disk.img"); }));
  d.start();
  // It was running, so the restarted daemon brings it back by itself (a wake).
  CHECK(eventually([&] { return !processes_with("warren-init --name keep ").empty(); }));
  CHECK(eventually([&] { return d.warren({"ls", "--json"}).out.find("\"running\"") != std::string::npos; }));
  CHECK(d.warren({"ls", "--json"}).out.find("\"keep\"") != std::string::npos);
  auto r = d.warren({"exec", "keep", "--", "cat", "/workspace/f"});
  CHECK(r.out == "precious\n");
  CHECK(d.sandbox_id("keep") == id);
}

TEST_CASE("sandbox creation, each exec and destruction are journaled", "[e2e][journal]") {
  warrend_process d;
  REQUIRE(d.warren({"exec", "j", "--env", "SECRET=hunter2", "--", "sh", "-c", "exit 3"}).code == 3);
  auto id = d.sandbox_id("j");
  REQUIRE(d.warren({"exec", "gone", "--", "true"}).code == 0);
  REQUIRE(d.warren({"rm", "gone"}).code == 0);
  REQUIRE(d.stop() == 0);

  warren::error err;
  auto journal = warren::storage::journal::open({d.data_dir + "/journal", true}, err);
  REQUIRE(journal);
  std::vector<warren::wire::event> own;
  for (auto& [seq, bytes] : journal->read(id)) {
    CHECK(bytes.find("hunter2") == std::string::npos);
    own.push_back(warren::wire::decode_envelope(bytes).value->body);
  }
  REQUIRE(own.size() == 4);
  CHECK(std::get<warren::wire::sandbox_created>(own[0]).name == "j");
  CHECK(std::get<warren::wire::sandbox_configured>(own[1]).sleep_after_ms == 600000);
  auto& started = std::get<warren::wire::exec_started>(own[2]);
  CHECK(started.argv == std::vector<std::string>{"sh", "-c", "exit 3"});
  CHECK(started.env_names == std::vector<std::string>{"SECRET"});
  CHECK(std::get<warren::wire::exec_finished>(own[3]).exit_code == 3);
  std::vector<std::string> registry;
  for (auto& [seq, bytes] : journal->read(0))
    registry.push_back(warren::wire::event_kind(warren::wire::decode_envelope(bytes).value->body));
  CHECK(registry == std::vector<std::string>{"sandbox_created", "sandbox_configured", "sandbox_created",
                                            "sandbox_configured", "sandbox_destroyed"});
}

TEST_CASE("the API socket is private to root", "[e2e][security]") {
  warrend_process d;
  struct stat st;
  REQUIRE(::stat(d.socket.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(st.st_uid == 0);
}

TEST_CASE("a second daemon refuses to take over a socket in use", "[e2e][lifecycle]") {
  warrend_process d;
  auto r = run({bin("warrend"), "--data-dir", d.dir.path + "/other", "--socket", d.socket});
  CHECK(r.code != 0);
  CHECK(r.err.find("already listening") != std::string::npos);
  CHECK(d.warren({"exec", "x", "--", "true"}).code == 0);
}

TEST_CASE("warrend refuses to start without what it needs, with a clear message", "[e2e][bad-input]") {
  test_dir dir;
  auto r = run({bin("warrend"), "--data-dir", dir.path + "/d", "--socket", dir.path + "/s", "--init", "/nonexistent/warren-init"});
  CHECK(r.code == 2);
  CHECK(r.err.find("/nonexistent/warren-init") != std::string::npos);
  auto not_root = run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin("warrend"),
                       "--data-dir", dir.path + "/d", "--socket", dir.path + "/s"});
  CHECK(not_root.code == 2);
  CHECK(not_root.err.find("must run as root") != std::string::npos);
  auto bad_flag = run({bin("warrend"), "--no-such-flag", "x"});
  CHECK(bad_flag.code == 2);
  CHECK(bad_flag.err.find("unknown option --no-such-flag") != std::string::npos);
  std::ofstream(dir.path + "/bad.conf") << "data-dir = /x\nbogus = 1\n";
  auto bad_conf = run({bin("warrend"), "--config", dir.path + "/bad.conf"});
  CHECK(bad_conf.code == 2);
  CHECK(bad_conf.err.find("bad.conf:2: unknown option 'bogus'") != std::string::npos);
}

TEST_CASE("the CLI says clearly when the daemon is not running", "[e2e][bad-input]") {
  test_dir dir;
  auto r = run({bin("warren"), "--socket", dir.path + "/none.sock", "ls"});
  CHECK(r.code == 125);
  CHECK(r.err.find("cannot reach warrend") != std::string::npos);
  CHECK(r.err.find("is warrend running") != std::string::npos);
}

TEST_CASE("the TCP API needs the bearer token", "[e2e][security]") {
  test_dir dir;
  auto token_file = dir.path + "/token";
  std::ofstream(token_file) << "correct-horse-battery-staple-42\n";
  ::chmod(token_file.c_str(), 0600);
  auto port = std::to_string(20000 + ::getpid() % 20000);
  warrend_process d({"--listen", "127.0.0.1:" + port, "--token-file", token_file});
  std::ofstream(dir.path + "/wrong") << "correct-horse-battery-staple-43\n";
  auto wrong = run({bin("warren"), "--connect", "127.0.0.1:" + port, "--token-file", dir.path + "/wrong", "ls"});
  CHECK(wrong.code == 125);
  CHECK(wrong.err.find("wrong or missing token") != std::string::npos);
  auto right = run({bin("warren"), "--connect", "127.0.0.1:" + port, "--token-file", token_file, "exec", "t", "--", "echo", "over tcp"});
  CHECK(right.code == 0);
  CHECK(right.out == "over tcp\n");
  CHECK(d.log().find("correct-horse") == std::string::npos);  // Never logged.
}

TEST_CASE("a sandbox whose init died is started again by the next call, with its files", "[e2e][lifecycle]") {
  warrend_process d;
  REQUIRE(d.warren({"exec", "phoenix", "--", "sh", "-c", "echo kept > /workspace/f"}).code == 0);
  auto inits = processes_with("warren-init --name phoenix ");
  REQUIRE_FALSE(inits.empty());
  for (auto p : inits) ::kill(p, SIGKILL);
  CHECK(eventually([&] { return d.log().find("event=init_exited sandbox=phoenix") != std::string::npos; }));
  auto r = d.warren({"exec", "phoenix", "--", "cat", "/workspace/f"});
  CHECK(r.code == 0);
  CHECK(r.out == "kept\n");
}

TEST_CASE("sessions keep shell state between execs, per-call env and cwd stay per call, stdin is fed", "[e2e][sessions]") {
  warrend_process d;
  auto sh = [&](std::vector<std::string> extra, const std::string& line) {
    std::vector<std::string> args = {"exec", "s"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--shell", "--", line});
    return d.warren(args);
  };
  REQUIRE(sh({}, "cd /tmp && export FOO=bar && x=1 && greet() { echo hi $1; }").code == 0);
  CHECK(sh({}, "pwd; echo $FOO $x; greet you").out == "/tmp\nbar 1\nhi you\n");
  // Values with quotes, dollars and newlines, and arrays, come back exactly.
  REQUIRE(sh({}, "export Q='a \"b\" $c'; m=$'l1\\nl2'; arr=(1 'two words')").code == 0);
  CHECK(sh({}, "echo \"$Q\"; echo \"$m\"; echo \"${arr[1]}\"").out == "a \"b\" $c\nl1\nl2\ntwo words\n");
  CHECK(d.warren({"exec", "s", "--", "printenv", "Q"}).out == "a \"b\" $c\n");
  // argv commands get the session's environment and directory.
  CHECK(d.warren({"exec", "s", "--", "pwd"}).out == "/tmp\n");
  CHECK(d.warren({"exec", "s", "--", "printenv", "FOO"}).out == "bar\n");
  // --env and --cwd apply to one call only, even if the call changes them.
  CHECK(sh({"--env", "FOO=call", "--cwd", "/"}, "echo $FOO; pwd; cd /usr").out == "call\n/\n");
  CHECK(sh({}, "echo $FOO; pwd").out == "bar\n/tmp\n");
  // Another session has its own state; exit codes pass through and keep the state.
  CHECK(sh({"--session", "other"}, "pwd; echo ${FOO:-unset}").out == "/workspace\nunset\n");
  CHECK(sh({}, "y=2; exit 7").code == 7);
  CHECK(sh({}, "echo $y").out == "2\n");
  CHECK(d.warren({"exec", "s", "--session", "Bad Name", "--", "true"}).err.find("session names") != std::string::npos);
  // A hung command is killed at its timeout and the session carries on.
  CHECK(sh({"--timeout", "1"}, "z=3; sleep 100").code == 124);
  CHECK(sh({}, "echo $FOO").out == "bar\n");
  // stdin.
  test_dir t;
  std::ofstream(t.path + "/in") << "line one\nline two\n";
  auto fed = run({"/bin/sh", "-c", bin("warren") + " --socket " + d.socket + " exec s --stdin -- wc -l < " + t.path + "/in"});
  CHECK(fed.out == "2\n");
  // Streamed from a pipe as it comes (the command sees EOF when the pipe closes).
  auto piped = run({"/bin/sh", "-c", "(echo one; sleep 0.2; echo two) | " + bin("warren") + " --socket " + d.socket +
                                         " exec s --stdin -- sh -c 'while read l; do echo got $l; done'"});
  CHECK(piped.out == "got one\ngot two\n");
  CHECK(d.warren({"exec", "s", "--", "cat"}).out.empty());  // Without --stdin: /dev/null.
  // The state lives in the sandbox: it survives hibernation.
  REQUIRE(d.warren({"sleep", "s"}).code == 0);
  CHECK(sh({}, "pwd; echo $FOO; greet again").out == "/tmp\nbar\nhi again\n");
}

TEST_CASE("execs of one session run one after the other, sessions run in parallel", "[e2e][sessions]") {
  warrend_process d;
  REQUIRE(d.warren({"exec", "p", "--", "true"}).code == 0);
  auto slow = spawn({bin("warren"), "--socket", d.socket, "exec", "p", "--", "sleep", "2.5"});
  REQUIRE(eventually([] { return !commands("sleep 2.5").empty(); }));
  CHECK(d.warren({"exec", "p", "--session", "side", "--", "echo", "parallel"}).out == "parallel\n");
  CHECK_FALSE(commands("sleep 2.5").empty());  // Did not wait for the default session's sleep.
  CHECK(d.warren({"exec", "p", "--", "sh", "-c", "pgrep -c sleep || true"}).out == "0\n");  // Ran after it.
  ::waitpid(slow, nullptr, 0);
}

TEST_CASE("sessions can be created with their own env and cwd, listed and deleted", "[e2e][sessions]") {
  warrend_process d;
  REQUIRE(d.warren({"exec", "m", "--", "true"}).code == 0);
  REQUIRE(d.warren({"session", "m", "new", "build", "--env", "MODE=release", "--cwd", "/tmp"}).code == 0);
  CHECK(d.warren({"exec", "m", "--session", "build", "--shell", "--", "echo $MODE; pwd; echo $HOME"}).out ==
        "release\n/tmp\n/root\n");  // The sandbox's defaults (HOME) are there too.
  auto again = d.warren({"session", "m", "new", "build"});
  CHECK(again.code == 125);
  CHECK(again.err.find("exists") != std::string::npos);
  CHECK(d.warren({"session", "m", "new", "Bad!"}).err.find("session names") != std::string::npos);
  REQUIRE(d.warren({"exec", "m", "--session", "build", "--shell", "--", "cd /usr"}).code == 0);
  auto ls = d.warren({"sessions", "m"}).out;
  CHECK(ls.find("build") != std::string::npos);
  CHECK(ls.find("/usr") != std::string::npos);
  CHECK(ls.find("default") != std::string::npos);
  REQUIRE(d.warren({"session", "m", "rm", "build"}).code == 0);
  CHECK(d.warren({"sessions", "m"}).out.find("build") == std::string::npos);
  // A deleted session starts over.
  CHECK(d.warren({"exec", "m", "--session", "build", "--shell", "--", "pwd; echo ${MODE:-none}"}).out == "/workspace\nnone\n");
}

TEST_CASE("an exec never leaves processes behind, not even ones that left its process group", "[e2e]") {
  warrend_process d;
  // setsid puts the sleep in a session and process group of its own: only the exec's own
  // cgroup still holds it.
  CHECK(d.warren({"exec", "t", "--shell", "--", "setsid sleep 4747 > /dev/null 2>&1 & echo started"}).out == "started\n");
  CHECK(eventually([] { return commands("sleep 4747").empty(); }, 3000));
  CHECK(d.warren({"exec", "t", "--timeout", "1", "--shell", "--", "setsid sleep 4848 > /dev/null 2>&1 & sleep 100"}).code == 124);
  CHECK(eventually([] { return commands("sleep 4848").empty(); }, 3000));
  // Each exec's cgroup is removed once empty (the last one when the next exec starts).
  CHECK(d.warren({"exec", "t", "--", "true"}).code == 0);
  auto execs = d.cgroup_parent() + "/sb-" + std::to_string(d.sandbox_id("t")) + "/execs";
  int left = 0;
  for (auto& e : fs::directory_iterator(execs))
    if (e.is_directory()) ++left;
  CHECK(left <= 2);
}

TEST_CASE("background processes: start, list, logs replayed from a ring buffer, follow, exit codes, kill the tree", "[e2e][processes]") {
  warrend_process d;
  auto start = [&](std::vector<std::string> args) {
    std::vector<std::string> all = {"start", "bg"};
    all.insert(all.end(), args.begin(), args.end());
    return d.warren(all);
  };
  REQUIRE(start({"--id", "job", "--shell", "--", "echo one; sleep 0.5; echo two; echo oops >&2; exit 3"}).out == "job\n");
  // Following streams what is buffered, then live output, until the end.
  auto followed = d.warren({"logs", "bg", "job", "--follow"});
  CHECK(followed.out == "one\ntwo\n");
  CHECK(followed.err == "oops\n");
  // Asking again replays the same buffer; the listing has the exit code.
  CHECK(d.warren({"logs", "bg", "job"}).out == "one\ntwo\n");
  auto ps = d.warren({"ps", "bg"}).out;
  CHECK(ps.find("job") != std::string::npos);
  CHECK(ps.find("exit 3") != std::string::npos);

  // A small ring keeps the newest bytes and says how many fell out.
  REQUIRE(start({"--id", "loud", "--log-bytes", "4096", "--", "sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x; echo END"}).code == 0);
  REQUIRE(d.warren({"logs", "bg", "loud", "--follow"}).code == 0);
  auto tail = d.warren({"logs", "bg", "loud"});
  CHECK(tail.out.size() == 4096);
  CHECK(tail.out.substr(tail.out.size() - 4) == "END\n");
  CHECK(tail.err.find("no longer buffered") != std::string::npos);

  // A running id cannot be taken twice; kill ends the whole tree, children included.
  REQUIRE(start({"--id", "tree", "--shell", "--", "sleep 4949 & sleep 4950"}).code == 0);
  REQUIRE(eventually([] { return !commands("sleep 4949").empty() && !commands("sleep 4950").empty(); }));
  CHECK(start({"--id", "tree", "--", "true"}).err.find("already") != std::string::npos);
  CHECK(d.warren({"kill", "bg", "tree"}).out.find("tree: signal") != std::string::npos);
  CHECK(eventually([] { return commands("sleep 4949").empty() && commands("sleep 4950").empty(); }));
  CHECK(d.warren({"logs", "bg", "nope"}).err.find("no process nope") != std::string::npos);
}

TEST_CASE("background processes in a session read its state without changing it, auto_cleanup forgets ended ones", "[e2e][processes]") {
  warrend_process d;
  REQUIRE(d.warren({"exec", "ss", "--session", "work", "--shell", "--",
                    "mkdir -p /workspace/app && cd /workspace/app && export MODE=dev && v=local && f() { echo \"f:$1\"; }"})
              .code == 0);
  // A shell line gets the session's variables, functions and directory; what it changes
  // stays its own.
  REQUIRE(d.warren({"start", "ss", "--session", "work", "--shell", "--id", "sh", "--",
                    "echo \"$MODE $v $(pwd) $(f x)\"; cd /; export MODE=changed; v=other"})
              .code == 0);
  CHECK(d.warren({"logs", "ss", "sh", "--follow"}).out == "dev local /workspace/app f:x\n");
  CHECK(d.warren({"exec", "ss", "--session", "work", "--shell", "--", "echo $MODE $v $(pwd)"}).out ==
        "dev local /workspace/app\n");
  // A program gets the session's environment and directory; --env and --cwd win for it alone.
  REQUIRE(d.warren({"start", "ss", "--session", "work", "--id", "argv", "--", "sh", "-c", "echo $MODE; pwd"}).code == 0);
  CHECK(d.warren({"logs", "ss", "argv", "--follow"}).out == "dev\n/workspace/app\n");
  REQUIRE(d.warren({"start", "ss", "--session", "work", "--env", "MODE=mine", "--cwd", "/tmp", "--id", "own", "--shell",
                    "--", "echo $MODE $v $(pwd)"})
              .code == 0);
  CHECK(d.warren({"logs", "ss", "own", "--follow"}).out == "mine local /tmp\n");
  // It does not hold the session: execs of the session go on while it runs.
  REQUIRE(d.warren({"start", "ss", "--session", "work", "--id", "long", "--", "sleep", "6161"}).code == 0);
  CHECK(d.warren({"exec", "ss", "--session", "work", "--shell", "--", "echo $MODE"}).out == "dev\n");
  CHECK(d.warren({"start", "ss", "--session", "Bad Name", "--", "true"}).err.find("session") != std::string::npos);
  auto journal = d.warren({"journal", "ss"}).out;
  CHECK(journal.find("process argv started: sh -c \"echo $MODE; pwd\" (session work)") != std::string::npos);

  // auto_cleanup: listed while it runs, forgotten once it ended (the journal keeps both).
  REQUIRE(d.warren({"start", "ss", "--auto-cleanup", "--id", "tmp", "--", "sleep", "6262"}).code == 0);
  CHECK(d.warren({"ps", "ss"}).out.find("tmp") != std::string::npos);
  REQUIRE(d.warren({"kill", "ss", "tmp"}).code == 0);
  CHECK(eventually([&] { return d.warren({"ps", "ss"}).out.find("tmp") == std::string::npos; }));
  CHECK(d.warren({"logs", "ss", "tmp"}).err.find("no process tmp") != std::string::npos);
  REQUIRE(d.warren({"start", "ss", "--auto-cleanup", "--id", "once", "--", "true"}).code == 0);
  CHECK(eventually([&] { return d.warren({"ps", "ss"}).out.find("once") == std::string::npos; }));
  journal = d.warren({"journal", "ss"}).out;
  CHECK(journal.find("process tmp started: sleep 6262 (auto cleanup)") != std::string::npos);
  CHECK(journal.find("process once exited 0") != std::string::npos);
  // One that was running when the sandbox hibernated is forgotten too (not listed as lost).
  REQUIRE(d.warren({"start", "ss", "--auto-cleanup", "--id", "nap", "--", "sleep", "6363"}).code == 0);
  REQUIRE(d.warren({"sleep", "ss"}).code == 0);
  auto ps = d.warren({"ps", "ss"}).out;
  INFO(ps);
  CHECK(ps.find("nap") == std::string::npos);
  CHECK(ps.find("long") != std::string::npos);  // Lost, without auto_cleanup: still listed.
  CHECK(ps.find("argv") != std::string::npos);

  // The sandbox keeps the output of the last 64 ended processes; the journal lists more.
  for (int i = 0; i < 70; ++i) REQUIRE(d.warren({"start", "ss", "--id", "q" + std::to_string(i), "--", "true"}).code == 0);
  CHECK(eventually([&] { return d.warren({"logs", "ss", "q0"}).err.find("no process q0") != std::string::npos; }));
  CHECK(d.warren({"logs", "ss", "q69"}).code == 0);
  CHECK(d.warren({"ps", "ss"}).out.find("q0 ") != std::string::npos);
}

TEST_CASE("background processes are journaled: the history survives hibernation, running ones become lost", "[e2e][processes]") {
  warrend_process d;
  REQUIRE(d.warren({"start", "hist", "--id", "web", "--", "sleep", "5151"}).code == 0);
  REQUIRE(d.warren({"start", "hist", "--id", "job", "--shell", "--", "exit 5"}).code == 0);
  REQUIRE(d.warren({"start", "hist", "--id", "quick", "--", "true"}).code == 0);  // Ends at once.
  REQUIRE(d.warren({"logs", "hist", "job", "--follow"}).code == 0);
  CHECK(eventually([&] {
    auto h = d.warren({"journal", "hist"}).out;
    return h.find("process job exited 5") != std::string::npos && h.find("process quick exited 0") != std::string::npos;
  }));
  auto h = d.warren({"journal", "hist"}).out;
  CHECK(h.find("process web started: sleep 5151") != std::string::npos);
  // The start of `quick` is journaled before its end, although it ended at once.
  CHECK(h.find("process quick started") < h.find("process quick exited"));

  REQUIRE(d.warren({"sleep", "hist"}).code == 0);
  CHECK(eventually([] { return commands("sleep 5151").empty(); }));
  auto ps = d.warren({"ps", "hist", "--json"}).out;
  INFO(ps);
  CHECK(ps.find("{\"id\":\"web\",\"status\":\"lost\"") != std::string::npos);
  CHECK(ps.find("{\"id\":\"job\",\"status\":\"exited\",\"exitCode\":5") != std::string::npos);
  CHECK(d.warren({"journal", "hist"}).out.find("process web lost") != std::string::npos);
}
