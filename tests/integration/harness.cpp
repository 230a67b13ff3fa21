#include "integration/harness.hpp"

#include "spawn.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

extern char** environ;

namespace warren::testing {

namespace fs = std::filesystem;

std::string bin(const std::string& name) { return std::string(WARREN_BIN_DIR) + "/" + name; }

run_result run(const std::vector<std::string>& argv, int timeout_ms) {
  int out[2], err[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = ::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  ::close(err[1]);
  REQUIRE(rc == 0);
  run_result r;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int open_fds = 2;
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      break;
    }
    if (::poll(fds, 2, static_cast<int>(left)) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[65536];
      auto n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<std::size_t>(n));
      }
    }
  }
  for (auto& p : fds)
    if (p.fd >= 0) ::close(p.fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

pid_t spawn(const std::vector<std::string>& argv) {
  pid_t pid = -1;
  REQUIRE(spawn_process(argv, "/dev/null", pid) == 0);
  return pid;
}

namespace {

template <class Match>
std::vector<pid_t> scan_processes(Match match) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/proc", ec)) {
    auto name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    // Plain read(2): the process may vanish while we read, which a stream would throw on.
    std::string cmd;
    int fd = ::open((e.path() / "cmdline").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) cmd.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    for (auto& c : cmd)
      if (c == '\0') c = ' ';
    if (match(cmd)) out.push_back(std::stoi(name));
  }
  return out;
}

}  // namespace

std::vector<pid_t> processes_with(const std::string& needle) {
  return scan_processes([&](const std::string& cmd) { return cmd.find(needle) != std::string::npos; });
}

std::vector<pid_t> commands(const std::string& command) {
  return scan_processes([&](const std::string& cmd) { return cmd == command + " " || cmd == command; });
}

bool host_mounts_mention(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all.find(path) != std::string::npos;
}

bool loop_backs(const std::string& path) {
  std::error_code ec;
  for (auto& entry : std::filesystem::directory_iterator("/sys/block", ec)) {
    std::ifstream in(entry.path() / "loop" / "backing_file");
    std::string backing;
    if (std::getline(in, backing) && backing == path) return true;
  }
  return false;
}

bool warrend_process::mounts_mention(const std::string& path) const {
  std::ifstream in("/proc/" + std::to_string(pid) + "/mountinfo");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all.find(path) != std::string::npos;
}

warrend_process::warrend_process(std::vector<std::string> extra) : extra_args(std::move(extra)) {
  data_dir = dir.path + "/data";
  socket = dir.path + "/warren.sock";
  log_path = dir.path + "/warrend.log";
  start();
}

warrend_process::~warrend_process() {
  if (pid > 0) stop(SIGTERM);
}

void warrend_process::start() {
  auto log_before = log().size();  // A restart appends to the same log.
  std::vector<std::string> argv = {bin("warrend"), "--data-dir", data_dir, "--socket", socket, "--log-level", "debug"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  // Tests run in parallel: each daemon's preview listener gets a free port of its own.
  if (std::find(extra_args.begin(), extra_args.end(), "--http-listen") == extra_args.end())
    argv.insert(argv.end(), {"--http-listen", "127.0.0.1:0"});
  REQUIRE(spawn_process(argv, log_path, pid) == 0);
  bool up = eventually([&] { return log().find("event=daemon_ready", log_before) != std::string::npos; }, 20000);
  INFO(log());
  REQUIRE(up);
}

int warrend_process::stop(int sig) {
  ::kill(pid, sig);
  int status = 0;
  for (int i = 0; i < 3000; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      pid = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  pid = -1;
  FAIL("warrend did not stop within 30 s after signal " << sig);
  return -1;
}

run_result warrend_process::warren(std::vector<std::string> args, int timeout_ms) const {
  args.insert(args.begin(), {bin("warren"), "--socket", socket});
  return run(args, timeout_ms);
}

std::string warrend_process::log() const {
  std::ifstream in(log_path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::uint16_t warrend_process::http_port() const {
  auto l = log();
  auto at = l.rfind("transport=http");
  REQUIRE(at != std::string::npos);
  at = l.find(" port=", at);
  return static_cast<std::uint16_t>(std::stoul(l.substr(at + 6)));
}

std::string warrend_process::cgroup_parent() const {
  auto l = log();
  auto at = l.find("cgroup=");
  REQUIRE(at != std::string::npos);
  auto end = l.find_first_of(" \n", at);
  return l.substr(at + 7, end - at - 7);
}

std::uint64_t warrend_process::sandbox_id(const std::string& name) const {
  auto r = warren({"ls", "--json"});
  REQUIRE(r.code == 0);
  auto at = r.out.find("\"name\":\"" + name + "\"");
  REQUIRE(at != std::string::npos);
  auto id = r.out.find("\"id\":", at);
  return std::stoull(r.out.substr(id + 5));
}

}  // namespace warren::testing
