// cgroup membership of the sandbox. warrend creates the sandbox's cgroup directory (so it
// can kill and remove it later); warren-init only joins it before it forks anything, so
// that every process of the sandbox is born inside.
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "sys.hpp"

namespace warren::init {

void join_cgroup(const std::string& path) {
  auto procs = path + "/cgroup.procs";
  unique_fd fd(static_cast<int>(check(::open(procs.c_str(), O_WRONLY | O_CLOEXEC), "open", procs)));
  auto pid = std::to_string(::getpid());
  if (!write_all(fd.get(), pid.data(), pid.size())) fail("write", procs, errno);
}

}  // namespace warren::init

namespace warren::init {

int prepare_exec_cgroups(const std::vector<std::string>& dirs, std::uint32_t owner) {
  for (auto& dir : dirs) {
    struct statfs fs {};
    if (::statfs(dir.c_str(), &fs) < 0 || fs.f_type != CGROUP2_SUPER_MAGIC) continue;
    auto execs = dir + "/execs";
    if (::mkdir(execs.c_str(), 0755) < 0 && errno != EEXIST) fail("mkdir", execs, errno);
    if (owner != 0) {
      // Delegation, as cgroup v2 defines it: the sandbox's root may create cgroups below
      // execs/ and move its own processes between them and the sandbox's cgroup, never out.
      check(::chown(execs.c_str(), owner, owner), "chown", execs);
      check(::chown((dir + "/cgroup.procs").c_str(), owner, owner), "chown", dir + "/cgroup.procs");
    }
    return static_cast<int>(check(::open(execs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC), "open", execs));
  }
  return -1;
}

}  // namespace warren::init
