// Starting a helper process for tests and benchmarks: stdin from /dev/null, stdout and
// stderr appended to `out_path`, PATH lookup for argv[0].
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/types.h>

#include <string>
#include <vector>

extern char** environ;

/// Returns 0 and sets `pid`, or the error number posix_spawnp reported.
inline int spawn_process(const std::vector<std::string>& argv, const std::string& out_path, pid_t& pid) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc;
}
