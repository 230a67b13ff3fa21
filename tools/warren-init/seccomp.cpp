// System-call filter of a sandbox (libseccomp), installed once in PID 1 and inherited by every
// command. A denylist, like OCI runtimes' defaults: everything a sandbox has no business doing
// and that has a history of kernel escapes fails with EPERM. Capabilities already stop most of
// these; the filter also covers what needs none (user namespaces, io_uring, keyrings,
// terminal injection) and stays in force if a capability is ever granted by mistake.
#include <linux/sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>

#include "sys.hpp"

namespace warren::init {
namespace {

constexpr const char* denied[] = {
    // Mounts and root changes (also the new mount API).
    "mount", "umount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
    "open_tree", "mount_setattr",
    // Namespaces of other processes.
    "setns",
    // The kernel itself: modules, kexec, reboot, swap, accounting, logs, time.
    "init_module", "finit_module", "delete_module", "create_module", "kexec_load", "kexec_file_load", "reboot",
    "swapon", "swapoff", "acct", "syslog", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime",
    "iopl", "ioperm", "quotactl", "nfsservctl", "uselib", "vm86", "vm86old", "get_kernel_syms", "query_module",
    "lookup_dcookie",
    // Interfaces with a record of privilege escalations.
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "open_by_handle_at", "name_to_handle_at",
};

void add(scmp_filter_ctx ctx, std::uint32_t action, const char* name, unsigned count = 0,
         const scmp_arg_cmp* args = nullptr) {
  int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR) return;  // Not a system call on this architecture.
  int rc = args ? seccomp_rule_add_array(ctx, action, nr, count, args) : seccomp_rule_add(ctx, action, nr, 0);
  if (rc < 0) fail("seccomp_rule_add", name, -rc);
}

}  // namespace

void install_seccomp() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) fail("seccomp_init", "", ENOMEM);
  struct release {
    scmp_filter_ctx c;
    ~release() { seccomp_release(c); }
  } guard{ctx};
  for (auto name : denied) add(ctx, SCMP_ACT_ERRNO(EPERM), name);
  // New user namespaces: root inside one has every capability again (for its own objects),
  // which is the start of most unprivileged escapes.
  scmp_arg_cmp newuser[] = {SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)};
  add(ctx, SCMP_ACT_ERRNO(EPERM), "unshare", 1, newuser);
  add(ctx, SCMP_ACT_ERRNO(EPERM), "clone", 1, newuser);
  // clone3 passes its flags in memory a filter cannot read: refuse it as unknown, and libc
  // falls back to clone, which is filtered above.
  add(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3");
  // Typing into another program's terminal.
  scmp_arg_cmp sti[] = {SCMP_A1(SCMP_CMP_EQ, TIOCSTI)};
  add(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, sti);
  scmp_arg_cmp linux_tty[] = {SCMP_A1(SCMP_CMP_EQ, TIOCLINUX)};
  add(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, linux_tty);
  if (int rc = seccomp_load(ctx); rc < 0) fail("seccomp_load", "", -rc);
}

}  // namespace warren::init
