// System-call filter of a sandbox, installed once in PID 1 and inherited by every command. A
// denylist, like OCI runtimes' defaults: everything a sandbox has no business doing and that
// has a history of kernel escapes fails with EPERM (the rules and their reasons are in
// seccomp_gen.cpp). Capabilities already stop most of these; the filter also covers what
// needs none (user namespaces, io_uring, keyrings, terminal injection) and stays in force if
// a capability is ever granted by mistake. The BPF program is generated at build time by
// libseccomp and loaded here with one prctl.
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include <cstring>

#include "sys.hpp"
#include "seccomp_filter.inc"

namespace warren::init {

void install_seccomp() {
  static_assert(sizeof(sandbox_filter_bytes) % sizeof(sock_filter) == 0);
  sock_filter program[sizeof(sandbox_filter_bytes) / sizeof(sock_filter)];
  std::memcpy(program, sandbox_filter_bytes, sizeof program);
  sock_fprog prog{static_cast<unsigned short>(sizeof program / sizeof(sock_filter)), program};
  // no_new_privs is already set (restrict_capabilities), as the kernel requires.
  check(::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0), "prctl PR_SET_SECCOMP");
}

}  // namespace warren::init
