// cgroup membership of the sandbox. warrend creates the sandbox's cgroup directory (so it
// can kill and remove it later); warren-init only joins it before it forks anything, so
// that every process of the sandbox is born inside.
#include <fcntl.h>

#include "sys.hpp"

namespace warren::init {

void join_cgroup(const std::string& path) {
  auto procs = path + "/cgroup.procs";
  unique_fd fd(static_cast<int>(check(::open(procs.c_str(), O_WRONLY | O_CLOEXEC), "open", procs)));
  auto pid = std::to_string(::getpid());
  if (!write_all(fd.get(), pid.data(), pid.size())) fail("write", procs, errno);
}

}  // namespace warren::init
