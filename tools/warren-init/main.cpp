// warren-init: PID 1 of one sandbox.
//
// warrend starts it with one clone() that creates its mount, pid, uts, ipc and network
// namespaces (see gateway/init_spawn.cpp), so it is PID 1 from its first instruction, with
//   fd 3  the agent-link socket            fd 4  the status pipe
//   --name N --sandbox-dir D --base-dir B [--uid-base U] [--cgroup DIR]... (one per hierarchy)
// It joins its cgroup, keeps mounts from propagating to the host, sets the hostname, brings
// up loopback, creates the sandbox's user namespace (host ids U..U+65535), builds the root
// filesystem from idmapped layers and pivots into it, enters the user namespace as its
// root, drops capabilities from the bounding set, installs the seccomp filter, closes the
// status pipe (success) and serves the agent link until the daemon hangs up. Without
// --uid-base (benchmarks of the jail's layers only) root inside stays host root.
// Any setup failure is written to the status pipe as one line and ends the process.
// It dies with the daemon (PR_SET_PDEATHSIG), and as PID 1 it takes every process of the
// sandbox with it.
#include <kj/async-unix.h>

#include <sys/mount.h>
#include <sys/prctl.h>

#include <cstring>
#include <map>
#include <vector>

#include "sys.hpp"

namespace {

using namespace warren::init;

constexpr int sock_fd = 3;
constexpr int status_fd = 4;

struct args {
  std::string name, sandbox_dir, base_dir;
  std::vector<std::string> cgroups;  // Every hierarchy's directory to join.
  std::uint32_t uid_base = 0;        // 0: no user namespace.
  bool seccomp = true;
};

args parse(int argc, char** argv) {
  std::map<std::string, std::string> kv;
  args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--cgroup") a.cgroups.emplace_back(argv[i + 1]);
    else if (std::string(argv[i]) == "--seccomp") a.seccomp = std::string(argv[i + 1]) != "off";
    else kv[argv[i]] = argv[i + 1];
  }
  a.name = kv["--name"];
  a.sandbox_dir = kv["--sandbox-dir"];
  a.base_dir = kv["--base-dir"];
  if (!kv["--uid-base"].empty()) {
    auto base = std::stoul(kv["--uid-base"]);
    if (base == 0 || base > 0xFFFFFFFFul - ids_per_sandbox) throw init_error("--uid-base out of range");
    a.uid_base = static_cast<std::uint32_t>(base);
  }
  if (a.name.empty() || a.sandbox_dir.empty() || a.base_dir.empty())
    throw init_error("usage: warren-init --name N --sandbox-dir D --base-dir B [--cgroup C] "
                     "(started by warrend, not by hand)");
  return a;
}

void report(const std::string& msg) {
  std::string line = msg + "\n";
  write_all(status_fd, line.data(), line.size());
}

}  // namespace

int main(int argc, char** argv) {
  int exec_cgroups = -1;
  try {
    // First: die with the daemon. (getppid() is 0 here, the parent being outside our pid
    // namespace, so a parent that died before this line cannot be detected; then the
    // closed agent socket ends us instead.)
    check(::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl PR_SET_PDEATHSIG");
    if (::getpid() != 1) throw init_error("warren-init must start as PID 1 of a new pid namespace (warrend does that)");
    auto a = parse(argc, argv);
    for (auto& dir : a.cgroups) join_cgroup(dir);
    exec_cgroups = prepare_exec_cgroups(a.cgroups, a.uid_base);
    // Nothing mounted from here on may propagate back to the host.
    check(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), "mount --make-rprivate", "/");
    check(::sethostname(a.name.data(), a.name.size()), "sethostname", a.name);
    loopback_up();
    allow_unprivileged_network();
    root_config root{a.sandbox_dir, a.base_dir, a.name};
    prepare_layer_dirs(root);
    unique_fd userns;
    if (a.uid_base != 0) {
      // Our own /proc first: the helper's pid in /proc must be the one clone() returned.
      check(::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr), "mount proc", "/proc");
      userns = create_user_namespace(a.uid_base);
      root.userns_fd = userns.get();
      root.uid_base = a.uid_base;
    }
    enter_root(root);
    if (userns.get() >= 0) enter_user_namespace(userns.get());
    // Once for the whole sandbox: every command is spawned by PID 1 and inherits the reduced
    // bounding set and no_new_privs (PID 1 keeps its own effective capabilities).
    restrict_capabilities();
    if (a.seccomp) install_seccomp();
  } catch (const init_error& e) {
    report(e.what());
    return 1;
  }
  ::close(status_fd);  // EOF without a message: the sandbox is up.
  // KJ's child-exit handling must be set up before its event loop exists.
  kj::UnixEventPort::captureChildExit();
  return serve_agent(sock_fd, exec_cgroups);
}
