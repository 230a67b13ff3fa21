// warren-init: PID 1 of one sandbox.
//
// warrend starts it with one clone() that creates its mount, pid, uts, ipc and network
// namespaces (see gateway/init_spawn.cpp), so it is PID 1 from its first instruction, with
//   fd 3  the agent-link socket            fd 4  the status pipe
//   --name N --sandbox-dir D --base-dir B [--cgroup DIR]... (one per cgroup hierarchy)
// It joins its cgroup, keeps mounts from propagating to the host, sets the hostname, brings
// up loopback, builds and pivots into the root filesystem, drops capabilities from the
// bounding set, installs the seccomp filter, closes the status pipe (success) and serves the agent link until the daemon
// hangs up. Any setup failure is written to the status pipe as one line and ends the process.
// It dies with the daemon (PR_SET_PDEATHSIG), and as PID 1 it takes every process of the
// sandbox with it.
#include <kj/async-unix.h>

#include <sys/mount.h>
#include <sys/prctl.h>

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
};

args parse(int argc, char** argv) {
  std::map<std::string, std::string> kv;
  args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--cgroup") a.cgroups.emplace_back(argv[i + 1]);
    else kv[argv[i]] = argv[i + 1];
  }
  a.name = kv["--name"];
  a.sandbox_dir = kv["--sandbox-dir"];
  a.base_dir = kv["--base-dir"];
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
  try {
    // First: die with the daemon. (getppid() is 0 here, the parent being outside our pid
    // namespace, so a parent that died before this line cannot be detected; then the
    // closed agent socket ends us instead.)
    check(::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl PR_SET_PDEATHSIG");
    if (::getpid() != 1) throw init_error("warren-init must start as PID 1 of a new pid namespace (warrend does that)");
    auto a = parse(argc, argv);
    for (auto& dir : a.cgroups) join_cgroup(dir);
    // Nothing mounted from here on may propagate back to the host.
    check(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), "mount --make-rprivate", "/");
    check(::sethostname(a.name.data(), a.name.size()), "sethostname", a.name);
    loopback_up();
    root_config root{a.sandbox_dir, a.base_dir, a.name};
    prepare_layer_dirs(root);
    enter_root(root);
    // Once for the whole sandbox: every command is spawned by PID 1 and inherits the reduced
    // bounding set and no_new_privs (PID 1 keeps its own effective capabilities).
    restrict_capabilities();
    install_seccomp();
  } catch (const init_error& e) {
    report(e.what());
    return 1;
  }
  ::close(status_fd);  // EOF without a message: the sandbox is up.
  // KJ's child-exit handling must be set up before its event loop exists.
  kj::UnixEventPort::captureChildExit();
  return serve_agent(sock_fd);
}
