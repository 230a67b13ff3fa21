// Hibernation, waking, restart recovery and the journal tools, end to end with a real daemon.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>

#include <filesystem>
#include <fcntl.h>
#include <spawn.h>

#include <fstream>
#include <random>
#include <set>

#include "integration/harness.hpp"

extern char** environ;

using namespace warren::testing;
namespace fs = std::filesystem;

TEST_CASE("an idle sandbox hibernates, costs no process, and wakes on the next call with its files", "[e2e][hibernate]") {
  warrend_process d;
  REQUIRE(d.warren({"create", "nap", "--sleep-after", "1s"}).code == 0);
  REQUIRE(d.warren({"exec", "nap", "--", "sh", "-c", "echo dream > /workspace/f"}).code == 0);
  REQUIRE_FALSE(processes_with("warren-init --name nap ").empty());
  CHECK(eventually([&] { return d.warren({"ls", "--json"}).out.find("\"hibernated\"") != std::string::npos; }, 15000));
  CHECK(eventually([] { return processes_with("warren-init --name nap ").empty(); }));
  auto id = d.sandbox_id("nap");
  CHECK_FALSE(fs::exists(d.cgroup_parent() + "/sb-" + std::to_string(id)));
  CHECK(fs::exists(d.view(d.data_dir + "/sandboxes/" + std::to_string(id) + "/upper/root/workspace/f")));

  auto r = d.warren({"exec", "nap", "--", "cat", "/workspace/f"});
  CHECK(r.code == 0);
  CHECK(r.out == "dream\n");
  auto history = d.warren({"journal", "nap"}).out;
  CHECK(history.find("hibernated (idle)") != std::string::npos);
  CHECK(history.find("woke") != std::string::npos);
}

TEST_CASE("warren sleep hibernates now, keep-alive prevents idle sleep, and a running exec refuses sleep", "[e2e][hibernate]") {
  warrend_process d;
  REQUIRE(d.warren({"exec", "sleepy", "--", "true"}).code == 0);
  auto s = d.warren({"sleep", "sleepy"});
  CHECK(s.code == 0);
  CHECK(processes_with("warren-init --name sleepy ").empty());
  CHECK(d.warren({"ls"}).out.find("hibernated") != std::string::npos);
  CHECK(d.warren({"exec", "sleepy", "--", "echo", "up"}).out == "up\n");

  REQUIRE(d.warren({"create", "kept", "--sleep-after", "1s", "--keep-alive"}).code == 0);
  auto bg = spawn({bin("warren"), "--socket", d.socket, "exec", "sleepy", "--", "sleep", "4545"});
  REQUIRE(eventually([] { return !commands("sleep 4545").empty(); }));
  auto refused = d.warren({"sleep", "sleepy"});
  CHECK(refused.code == 125);
  CHECK(refused.err.find("a command or file operation is running") != std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  CHECK_FALSE(processes_with("warren-init --name kept ").empty());
  ::kill(bg, SIGKILL);
  ::waitpid(bg, nullptr, 0);

  auto set = d.warren({"set", "kept", "--keep-alive", "off"});
  CHECK(set.code == 0);
  CHECK(set.out.find("sleeps after 1s idle") != std::string::npos);
  CHECK(eventually([] { return processes_with("warren-init --name kept ").empty(); }, 15000));
  auto bad = d.warren({"set", "kept", "--sleep-after", "0.1s"});
  CHECK(bad.code == 125);
  CHECK(bad.err.find("between 1 second and 30 days") != std::string::npos);
}

TEST_CASE("the journal tools print history, follow it, time-travel and check every journal", "[e2e][journal]") {
  warrend_process d;
  REQUIRE(d.warren({"exec", "j", "--", "sh", "-c", "exit 4"}).code == 4);
  REQUIRE(d.warren({"exec", "j", "--", "true"}).code == 0);
  auto h = d.warren({"journal", "j"});
  CHECK(h.code == 0);
  CHECK(h.out.find("sandbox j created") != std::string::npos);
  CHECK(h.out.find("exec 1 started: sh -c \"exit 4\"") != std::string::npos);
  CHECK(h.out.find("exec 1 finished: exit 4") != std::string::npos);
  auto json = d.warren({"journal", "j", "--json"});
  CHECK(json.out.find("{\"seq\":1,") == 0);
  CHECK(json.out.find("\"exitCode\":4") != std::string::npos);

  // Time travel: after event 3 (exec 1 started) that exec was open.
  auto at3 = d.warren({"journal", "j", "--at", "3"}).out;
  CHECK(at3.find("\"execCount\":1") != std::string::npos);
  CHECK(at3.find("\"openExecs\":[1]") != std::string::npos);
  auto now = d.warren({"journal", "j", "--at", "0"}).out;
  CHECK(now.find("\"execCount\":2") != std::string::npos);
  CHECK(now.find("\"openExecs\":[]") != std::string::npos);
  CHECK(d.warren({"journal", "j", "--at", "99"}).err.find("only 6 events") != std::string::npos);

  // --follow prints new events as they happen.
  auto out_path = d.dir.path + "/follow.txt";
  pid_t follower;
  {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<std::string> argv = {bin("warren"), "--socket", d.socket, "journal", "j", "--follow"};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    REQUIRE(::posix_spawn(&follower, args[0], &fa, nullptr, args.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
  }
  auto followed = [&] {
    std::ifstream in(out_path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  CHECK(eventually([&] { return followed().find("exec 2 finished") != std::string::npos; }));
  REQUIRE(d.warren({"exec", "j", "--", "echo", "later"}).code == 0);
  CHECK(eventually([&] { return followed().find("exec 3 started: echo later") != std::string::npos; }));
  ::kill(follower, SIGTERM);
  ::waitpid(follower, nullptr, 0);

  auto check = d.warren({"journal", "--check"});
  CHECK(check.code == 0);
  CHECK(check.out.find("2 journals checked, 0 with problems") != std::string::npos);
  CHECK(d.warren({"journal", "nobody"}).err.find("no sandbox is called nobody") != std::string::npos);
}

TEST_CASE("kill -9 at random moments under load never loses an acknowledged change", "[e2e][durability][crash]") {
  warrend_process d;
  std::mt19937 rng(12345);
  std::set<std::string> acknowledged;  // Sandboxes whose creation (and a file) was acknowledged.
  for (int round = 0; round < 6; ++round) {
    // Load: several clients create sandboxes and write files while the daemon is killed.
    std::vector<pid_t> clients;
    for (int c = 0; c < 4; ++c) {
      auto name = "r" + std::to_string(round) + "c" + std::to_string(c);
      clients.push_back(spawn({bin("warren"), "--socket", d.socket, "exec", name, "--", "sh", "-c",
                               "echo " + name + " > /workspace/mark"}));
    }
    // Some work is acknowledged before the kill, and remembered only if it was.
    auto name = "ack" + std::to_string(round);
    auto r = d.warren({"exec", name, "--", "sh", "-c", "echo " + name + " > /workspace/mark"});
    REQUIRE(r.code == 0);
    acknowledged.insert(name);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 60)(rng)));
    REQUIRE(d.stop(SIGKILL) == 128 + SIGKILL);
    for (auto c : clients) ::waitpid(c, nullptr, 0);
    // Nothing of the old daemon survives it.
    CHECK(eventually([&] { return processes_with("--sandbox-dir " + d.data_dir).empty(); }));
    d.start();
    // Invariants: every acknowledged sandbox is there with its file, awake again; the journals
    // replay; no cgroup of a dead incarnation is left.
    for (auto& n : acknowledged) {
      INFO(n);
      auto cat = d.warren({"exec", n, "--", "cat", "/workspace/mark"});
      CHECK(cat.code == 0);
      CHECK(cat.out == n + "\n");
    }
    auto check = d.warren({"journal", "--check"});
    CHECK(check.code == 0);
    INFO(check.out);
    CHECK(check.out.find(" 0 with problems") != std::string::npos);
  }
  CHECK(d.warren({"ls"}).out.find("needs-repair") == std::string::npos);
}

TEST_CASE("a full disk makes a start fail cleanly with the reason, and it works once there is room", "[e2e][faults]") {
  test_dir dir;
  auto mnt = dir.path + "/small";
  fs::create_directories(mnt);
  REQUIRE(::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=256m") == 0);
  struct unmount {
    std::string path;
    ~unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } guard{mnt};
  {
    // The data dir's own filesystem fills (by someone else): no disk pool here, whose image
    // would be the first thing to fail.
    warrend_process d({"--data-dir", mnt + "/data", "--disk-pool", "off"});
    REQUIRE(d.warren({"create", "before"}).code == 0);
    {
      int fd = ::open((mnt + "/filler").c_str(), O_WRONLY | O_CREAT, 0600);
      std::vector<char> block(1 << 20, 'x');
      while (::write(fd, block.data(), block.size()) > 0) {
      }
      ::close(fd);
    }
    auto full = d.warren({"exec", "after", "--", "true"});
    INFO(full.err);
    CHECK(full.code == 125);
    CHECK(full.err.find("No space left on device") != std::string::npos);
    CHECK(full.err.find("text = ") == std::string::npos);  // A sentence, not a KJ dump.
    // The daemon and the running sandbox carry on (the journal has its preallocated room).
    CHECK(d.warren({"exec", "before", "--", "echo", "still"}).out == "still\n");
    CHECK(d.warren({"journal", "--check"}).code == 0);
    fs::remove(mnt + "/filler");
    CHECK(d.warren({"exec", "after", "--", "echo", "ok"}).out == "ok\n");
  }
}
