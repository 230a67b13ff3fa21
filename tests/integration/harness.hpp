// Integration harness: a real warrend on a temporary data dir and socket, the real CLI,
// and helpers that look at the host (processes, cgroups, mounts) the way an attacker or an
// operator would.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <cstdint>

#include <string>
#include <vector>

#include "test_dir.hpp"

namespace warren::testing {

struct run_result {
  int code = -1;  ///< Exit code, or 128+signal.
  std::string out;
  std::string err;
};

/// Runs a program to completion (killed after timeout_ms), capturing stdout and stderr.
run_result run(const std::vector<std::string>& argv, int timeout_ms = 60000);

/// Starts a program in the background with output to /dev/null; returns its pid.
pid_t spawn(const std::vector<std::string>& argv);

/// Path of one of the built binaries (warrend, warren, warren-init).
std::string bin(const std::string& name);

/// Pids of host processes whose command line contains `needle` (NULs read as spaces).
std::vector<pid_t> processes_with(const std::string& needle);

/// Pids of host processes whose command line is `command` or starts with it and a space
/// (so "sleep 42" finds the sleep, not a `warren exec ... -- sleep 42` client).
std::vector<pid_t> commands(const std::string& command);

/// Waits up to timeout_ms for pred(); returns its last value.
template <class Pred>
bool eventually(Pred pred, int timeout_ms = 10000);

/// Does any mount in the host's mount table mention `path`?
bool host_mounts_mention(const std::string& path);

/// Is a loop device attached to the file `path`?
bool loop_backs(const std::string& path);

class warrend_process {
 public:
  /// Starts warrend with a fresh data dir; `extra` flags are appended.
  explicit warrend_process(std::vector<std::string> extra = {});
  /// Stops it with SIGTERM if it still runs.
  ~warrend_process();

  void start();
  /// Sends `sig` and waits for the exit; returns the exit code (128+N for a signal).
  int stop(int sig = SIGTERM);

  /// Runs the CLI against this daemon.
  run_result warren(std::vector<std::string> args, int timeout_ms = 60000) const;

  std::string log() const;
  /// The port of its preview HTTP listener (from its log; the last start's).
  std::uint16_t http_port() const;
  /// The daemon's cgroup directory (from its start-up log line).
  std::string cgroup_parent() const;
  /// The data-dir directory of a sandbox by name (via `warren ls --json`).
  std::uint64_t sandbox_id(const std::string& name) const;
  /// A path as the daemon sees it: sandbox directories live in its disk pool, mounted in
  /// its own mount namespace only.
  std::string view(const std::string& path) const { return "/proc/" + std::to_string(pid) + "/root" + path; }
  /// Does any mount in the daemon's mount namespace mention `path`?
  bool mounts_mention(const std::string& path) const;

  test_dir dir;
  std::string data_dir, socket, log_path;
  std::vector<std::string> extra_args;
  pid_t pid = -1;
};

}  // namespace warren::testing

#include <chrono>
#include <thread>

template <class Pred>
bool warren::testing::eventually(Pred pred, int timeout_ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}
