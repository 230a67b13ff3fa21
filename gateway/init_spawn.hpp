// Starting a sandbox's init: one clone() with new mount, pid, uts, ipc and network
// namespaces and vfork semantics (CLONE_VM|CLONE_VFORK: no copy of the daemon's page tables;
// the calling thread waits only until the child has exec'd), then execve of warren-init,
// which so starts as PID 1 of its sandbox. The daemon never enters a namespace or mounts
// anything itself; the child only moves file descriptors and resets signals before exec.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "wire/errors.hpp"

namespace warren::gateway {

struct init_spawn_request {
  std::string path;               ///< warren-init binary.
  std::vector<std::string> argv;  ///< argv[0] included.
  int agent_fd = -1;              ///< Becomes fd 3 in the child.
  int status_fd = -1;             ///< Becomes fd 4 in the child.
};

/// Clones and execs; returns the child's pid (a child of the calling thread, which must
/// live as long as the sandbox: the init dies with it through PR_SET_PDEATHSIG).
/// KJ thread only (one static child stack is reused, which vfork semantics make safe).
pid_t spawn_init(const init_spawn_request& request, error& err);

}  // namespace warren::gateway
