#include "gateway/init_spawn.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace warren::gateway {
namespace {

struct child_args {
  const char* path;
  char* const* argv;
  int agent_fd;
  int status_fd;
  int exec_errno;  // Written by the child when execve fails (shared memory: CLONE_VM).
};

// Runs in the child, on its own stack, sharing the daemon's memory until execve: only
// async-signal-safe system calls, no allocation, no locks.
int child_main(void* p) {
  auto* a = static_cast<child_args*>(p);
  // Signals: the daemon's handlers must not run here, and KJ's blocked mask and ignored
  // SIGPIPE must not reach the init. (The handler table is the child's own copy: no
  // CLONE_SIGHAND.)
  for (int sig : {SIGTERM, SIGINT, SIGCHLD, SIGUSR1, SIGPIPE, SIGHUP, SIGQUIT}) ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0 || ::dup2(devnull, 0) < 0 || ::dup2(a->agent_fd, 3) < 0 || ::dup2(a->status_fd, 4) < 0) {
    a->exec_errno = errno;
    ::_exit(127);
  }
  char* const envp[] = {nullptr};
  ::execve(a->path, a->argv, envp);
  a->exec_errno = errno;
  ::_exit(127);
}

// The child's stack: vfork semantics suspend the (only) spawning thread until the child
// has exec'd or exited, so one stack serves every spawn.
alignas(64) char child_stack[64 * 1024];

}  // namespace

pid_t spawn_init(const init_spawn_request& r, error& err) {
  // dup2 onto 3 and 4 must not meet the source fds there (dup2 onto itself keeps CLOEXEC).
  if (r.agent_fd <= 4 || r.status_fd <= 4) {
    err = make_error(errc::internal, "spawn_init: agent and status fds must be above 4");
    return -1;
  }
  std::vector<char*> argv;
  for (auto& a : r.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  child_args args{r.path.c_str(), argv.data(), r.agent_fd, r.status_fd, 0};

  // Like glibc's posix_spawn: no signal may run a handler of ours on the child's stack
  // between clone and the child's own reset.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  int flags = CLONE_VM | CLONE_VFORK | SIGCHLD | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC |
              CLONE_NEWNET;
  pid_t pid = ::clone(child_main, child_stack + sizeof child_stack, flags, &args);
  int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);

  if (pid < 0) {
    err = make_error(errc::start_failed, std::string("clone with new namespaces: ") + std::strerror(clone_errno));
    return -1;
  }
  if (args.exec_errno != 0) {
    // The child has already exited (vfork semantics); reap it here, on the thread whose
    // event loop would otherwise reap it.
    ::waitpid(pid, nullptr, 0);
    err = make_error(errc::start_failed, "exec " + r.path + ": " + std::strerror(args.exec_errno));
    return -1;
  }
  return pid;
}

}  // namespace warren::gateway
