// The sandbox's user namespace: its ids 0..65535 are the host ids base..base+65535, an
// unprivileged range of its own, so root inside is not root outside (DESIGN.md "Isolation").
//
// The other namespaces (mount, pid, net, uts, ipc) stay owned by the host's user namespace:
// PID 1 builds the root filesystem as host root, then enters the user namespace, so root
// inside holds capabilities over its own files and processes only, and none over mounts,
// network devices or the hostname. Files keep host-neutral ownership on disk (0..65535):
// every layer is mounted idmapped into the sandbox's range, so layers can later be shared
// by sandboxes with different ranges.
#include <fcntl.h>
#include <grp.h>
#include <linux/mount.h>
#include <linux/securebits.h>
#include <sched.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "sys.hpp"

namespace warren::init {
namespace {

// The helper: its own copy of the write end closed, it waits for the parent's to close.
int wait_for_eof(void* arg) {
  auto* ends = static_cast<int*>(arg);
  ::close(ends[1]);
  char c;
  while (::read(ends[0], &c, 1) < 0 && errno == EINTR) {
  }
  return 0;
}

void write_file(const std::string& path, const std::string& text) {
  unique_fd fd(static_cast<int>(check(::open(path.c_str(), O_WRONLY | O_CLOEXEC), "open", path)));
  if (!write_all(fd.get(), text.data(), text.size())) fail("write", path, errno);
}

alignas(64) char helper_stack[16 * 1024];

}  // namespace

unique_fd create_user_namespace(std::uint32_t base) {
  // A user namespace needs a process to be born in; a helper sharing our memory waits
  // while we write its maps (as root of the parent namespace, which may map any range)
  // and open the namespace, then exits.
  int hold[2];
  check(::pipe2(hold, O_CLOEXEC), "pipe2");
  unique_fd hold_read(hold[0]), hold_write(hold[1]);
  int ends[2] = {hold_read.get(), hold_write.get()};
  pid_t pid = static_cast<pid_t>(check(
      ::clone(wait_for_eof, helper_stack + sizeof helper_stack, CLONE_VM | CLONE_NEWUSER | SIGCHLD, ends),
      "clone", "CLONE_NEWUSER"));
  auto proc = "/proc/" + std::to_string(pid);
  auto map = "0 " + std::to_string(base) + " " + std::to_string(ids_per_sandbox) + "\n";
  unique_fd ns;
  try {
    write_file(proc + "/uid_map", map);
    write_file(proc + "/gid_map", map);
    ns.reset(static_cast<int>(check(::open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC), "open", proc + "/ns/user")));
  } catch (...) {
    hold_write.reset();
    ::waitpid(pid, nullptr, 0);
    throw;
  }
  hold_write.reset();
  ::waitpid(pid, nullptr, 0);
  return ns;
}

void mount_idmapped(const std::string& source, const std::string& target, int userns_fd) {
  unique_fd tree(static_cast<int>(check(
      ::syscall(SYS_open_tree, AT_FDCWD, source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC), "open_tree", source)));
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_IDMAP;
  attr.userns_fd = static_cast<std::uint64_t>(userns_fd);
  check(::syscall(SYS_mount_setattr, tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr),
        "idmapped mount (mount_setattr MOUNT_ATTR_IDMAP; the filesystem must support idmapped mounts)", source);
  check(::syscall(SYS_move_mount, tree.get(), "", AT_FDCWD, target.c_str(), MOVE_MOUNT_F_EMPTY_PATH), "move_mount", target);
}

void act_as_sandbox_root(std::uint32_t base) {
  // Changing the filesystem ids away from 0 would clear the filesystem capabilities that
  // overlayfs needs for copy-up; keep them while PID 1 works as the sandbox's root.
  check(::prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0), "prctl PR_SET_SECUREBITS");
  ::setfsuid(base);
  ::setfsgid(base);
}

void enter_user_namespace(int userns_fd) {
  ::setfsuid(0);
  ::setfsgid(0);
  check(::setns(userns_fd, CLONE_NEWUSER), "setns", "user namespace");
  // Inside, the usual rules again: a setuid() away from root drops capabilities.
  check(::prctl(PR_SET_SECUREBITS, 0, 0, 0, 0), "prctl PR_SET_SECUREBITS");
  check(::setgroups(0, nullptr), "setgroups");
  check(::setresgid(0, 0, 0), "setresgid");
  check(::setresuid(0, 0, 0), "setresuid");
}

}  // namespace warren::init
