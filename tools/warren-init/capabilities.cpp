// Capabilities of sandbox commands. Root inside holds capabilities only in the sandbox's
// user namespace (userns.cpp), and the bounding set narrows even those (and root, should
// the user namespace be off for a benchmark): everything that could reach outside the
// namespaces (mount, modules, raw I/O, ptrace, admin of the kernel,
// device nodes, BPF, time) is dropped. The kept set matches what OCI runtimes grant by default,
// minus MKNOD and NET_RAW.
#include <linux/capability.h>
#include <sys/prctl.h>

#include "sys.hpp"

namespace warren::init {

void restrict_capabilities() {
  constexpr int kept[] = {CAP_CHOWN,  CAP_DAC_OVERRIDE, CAP_FOWNER,     CAP_FSETID,
                          CAP_KILL,   CAP_SETGID,       CAP_SETUID,     CAP_SETPCAP,
                          CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT, CAP_AUDIT_WRITE, CAP_SETFCAP};
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    bool keep = false;
    for (int k : kept) keep = keep || k == cap;
    if (keep) continue;
    // EINVAL: a capability this kernel does not know; nothing to drop.
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) fail("prctl PR_CAPBSET_DROP", std::to_string(cap), errno);
  }
  check(::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl PR_SET_NO_NEW_PRIVS");
}

}  // namespace warren::init
