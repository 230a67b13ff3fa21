// warren-init: builds one sandbox and becomes its PID 1.
//
// warrend starts it (posix_spawn, never fork in the multi-threaded daemon) with:
//   fd 3  the agent-link socket            fd 4  the status pipe
//   --name N --sandbox-dir D --base-dir B --cgroup C --parent-pid P
// Stage 1 (host pid namespace): die with the daemon, join the cgroup, unshare mount, uts, ipc,
// net and pid namespaces, set the hostname, bring up loopback, fork.
// Stage 2 (PID 1 of the new pid namespace): mount the root, pivot into it, close the status
// pipe (success) and serve the agent link until the daemon hangs up.
// Stage 1 waits for stage 2 and exits with its status; if stage 1 dies, the kernel kills
// stage 2 (PDEATHSIG) and with it every process of the sandbox.
// Any setup failure is written to the status pipe as one line and the process exits 1.
#include <kj/async-unix.h>

#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <cstdio>
#include <map>

#include "sys.hpp"

namespace {

using namespace warren::init;

constexpr int sock_fd = 3;
constexpr int status_fd = 4;

struct args {
  std::string name, sandbox_dir, base_dir, cgroup;
  pid_t parent_pid = 0;
};

args parse(int argc, char** argv) {
  std::map<std::string, std::string> kv;
  for (int i = 1; i + 1 < argc; i += 2) kv[argv[i]] = argv[i + 1];
  args a;
  a.name = kv["--name"];
  a.sandbox_dir = kv["--sandbox-dir"];
  a.base_dir = kv["--base-dir"];
  a.cgroup = kv["--cgroup"];
  a.parent_pid = static_cast<pid_t>(std::atoi(kv["--parent-pid"].c_str()));
  if (a.name.empty() || a.sandbox_dir.empty() || a.base_dir.empty() || a.parent_pid <= 0)
    throw init_error("usage: warren-init --name N --sandbox-dir D --base-dir B [--cgroup C] --parent-pid P "
                     "(started by warrend, not by hand)");
  return a;
}

void report(const std::string& msg) {
  std::string line = msg + "\n";
  write_all(status_fd, line.data(), line.size());
}

void die_with_parent(pid_t expected_parent) {
  check(::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl PR_SET_PDEATHSIG");
  // The parent may have died before prctl took effect.
  if (::getppid() != expected_parent) ::_exit(1);
}

[[noreturn]] void stage2(const args& a) {
  try {
    // Die with stage 1. (getppid() is 0 here: the parent is outside our pid namespace, so
    // the usual re-check is impossible; if stage 1 died before this line, the daemon is gone
    // too and the closed agent socket ends us.)
    check(::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl PR_SET_PDEATHSIG");
    enter_root(root_config{a.sandbox_dir, a.base_dir, a.name});
    // Once for the whole sandbox: every command is spawned by PID 1 and inherits the reduced
    // bounding set and no_new_privs (PID 1 keeps its own effective capabilities).
    restrict_capabilities();
    ::close(status_fd);  // EOF without a message: the sandbox is up.
  } catch (const init_error& e) {
    report(e.what());
    ::_exit(1);
  }
  ::_exit(serve_agent(sock_fd));
}

}  // namespace

int main(int argc, char** argv) {
  args a;
  try {
    a = parse(argc, argv);
    die_with_parent(a.parent_pid);
    if (!a.cgroup.empty()) join_cgroup(a.cgroup);
    prepare_layer_dirs(root_config{a.sandbox_dir, a.base_dir, a.name});
    check(::unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWPID), "unshare", "namespaces");
    // Nothing mounted from here on may propagate back to the host.
    check(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), "mount --make-rprivate", "/");
    check(::sethostname(a.name.data(), a.name.size()), "sethostname", a.name);
    loopback_up();
  } catch (const init_error& e) {
    report(e.what());
    return 1;
  }

  // KJ's child-exit handling (SIGCHLD) must be set up before the loop exists; PID 1 is the
  // only process that runs a KJ loop here.
  kj::UnixEventPort::captureChildExit();

  pid_t child = ::fork();
  if (child < 0) {
    report(std::string("fork: ") + std::strerror(errno));
    return 1;
  }
  if (child == 0) stage2(a);

  ::close(sock_fd);
  ::close(status_fd);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}
