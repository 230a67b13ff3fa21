// warren-init's error discipline (after crun): every syscall is checked, and a failure
// becomes an init_error naming the operation, the path and errno, on its way up to the
// status pipe that warrend reads.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

namespace warren::init {

struct init_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const std::string& op, const std::string& path, int err) {
  std::string msg = op;
  if (!path.empty()) msg += " " + path;
  msg += ": ";
  msg += std::strerror(err);
  throw init_error(msg);
}

/// Throws init_error when rc < 0, with errno.
inline long check(long rc, const std::string& op, const std::string& path = "") {
  if (rc < 0) fail(op, path, errno);
  return rc;
}

/// Writes all of `data` to `fd`, retrying on EINTR and short writes.
inline bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    auto n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

/// Owns a file descriptor.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(o.release()) {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    reset(o.release());
    return *this;
  }
  ~unique_fd() { reset(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// One function per OS mechanism, each in its own file (like crun).

/// cgroups.cpp: moves the calling process into the cgroup directory `path` (v2 or v1).
void join_cgroup(const std::string& path);
/// For the cgroup2 directory among `dirs`: creates <dir>/execs, where the agent makes one
/// cgroup per exec (so that the whole tree of a command can be killed, even processes that
/// left its process group), and delegates it to the sandbox's root (`owner`, 0: none).
/// Returns an fd of execs/, or -1 when no directory is cgroup2.
int prepare_exec_cgroups(const std::vector<std::string>& dirs, std::uint32_t owner);

/// network.cpp: brings up the loopback interface of the current network namespace.
void loopback_up();

/// userns.cpp: the sandbox's user namespace (ids 0..ids_per_sandbox-1 inside are the host
/// ids base.. outside).
constexpr std::uint32_t ids_per_sandbox = 65536;
/// Creates the user namespace (PID 1, host root, before any mount that needs it).
unique_fd create_user_namespace(std::uint32_t base);
/// Mounts a clone of `source` at `target` with the user namespace's idmapping: files owned
/// by host id N on disk appear as base+N.
void mount_idmapped(const std::string& source, const std::string& target, int userns_fd);
/// Until enter_user_namespace(): new files are created as the sandbox's root (host id
/// `base`), with PID 1's capabilities kept.
void act_as_sandbox_root(std::uint32_t base);
/// Joins the user namespace as its root (uid and gid 0 inside); PID 1 keeps full
/// capabilities there and none outside.
void enter_user_namespace(int userns_fd);

/// network.cpp: in the sandbox's network namespace (owned by the host's user namespace, so
/// root inside has no network capability there), lets any user bind ports below 1024 and
/// open ping sockets.
void allow_unprivileged_network();

/// mounts.cpp: everything a sandbox's root needs, then pivot_root into it.
struct root_config {
  std::string sandbox_dir;  ///< Holds upper/, work/, mnt/ and rootfs/.
  std::string base_dir;     ///< Read-only skeleton (lower layer of /).
  std::string hostname;
  int userns_fd = -1;        ///< The sandbox's user namespace; -1: none (unsafe, benchmarks).
  std::uint32_t uid_base = 0;  ///< Host id of root inside (0 without a user namespace).
};
/// Creates the sandbox's layer directories if missing (run before the mount namespace is
/// entered or after; plain mkdir).
void prepare_layer_dirs(const root_config& c);
/// Mounts the overlays, /proc, /dev, /tmp, /run; pivots into the new root; cwd /workspace.
/// Must run in the new mount and pid namespaces (it mounts /proc of the pid namespace).
void enter_root(const root_config& c);

/// capabilities.cpp: drops every capability outside the sandbox default set from the
/// bounding set, and sets no_new_privs. Called once in PID 1; commands inherit both.
void restrict_capabilities();

/// seccomp.cpp: installs the sandbox's system-call filter (inherited by every command).
/// PID 1 calls it last: after it, no mount and no new user namespace is possible.
void install_seccomp();

/// sessions.cpp: adjusts a command to run in shell session `session` (its state directory
/// is created if missing): the session's saved environment and directory, the call's own
/// env (names in call_env) and cwd on top; a shell command (argv {"/bin/bash", "-c", line})
/// becomes the wrapper that restores the session's shell state before the line and, with
/// `save`, saves it when the line ends (finish_session_exec completes that).
void apply_session(const std::string& session, bool shell, const std::vector<std::string>& call_env, bool cwd_given,
                   std::vector<std::string>& argv, std::vector<std::string>& env, std::string& cwd, bool save = true);

/// agent.cpp: how commands start. resolve_program looks argv[0] up in the PATH of `env`
/// ("" when not found). spawn_command starts it in a session of its own, in the cgroup whose
/// cgroup.procs is `cgroup_procs` (-1: none), with stdin `in` (-1: /dev/null); returns 0 and
/// the pid, or an errno.
std::string resolve_program(const std::string& prog, const std::vector<std::string>& env);
int spawn_command(const std::string& program, const std::vector<std::string>& argv, const std::vector<std::string>& env,
                  const std::string& cwd, int in, int out, int err, int cgroup_procs, pid_t& pid, bool tty = false);

/// After a shell exec of `session` ended: turns what its wrapper dumped (with bash builtins)
/// into the session's state, environment and directory, leaving out bash's own variables
/// and the call's own env (which keeps the session's earlier values).
void finish_session_exec(const std::string& session, const std::vector<std::string>& call_env);

/// Session management (sessions.cpp); names are validated by the daemon. create_session
/// returns false when it exists; delete_session false when there was none.
bool create_session(const std::string& name, const std::vector<std::string>& env, const std::string& cwd);
std::vector<std::pair<std::string, std::string>> list_sessions();  ///< (name, cwd), sorted.
bool delete_session(const std::string& name);

/// agent.cpp: serves the Agent interface on `sock_fd` until the daemon hangs up; each exec
/// runs in a cgroup of its own below `exec_cgroups` (-1: none, process groups only).
int serve_agent(int sock_fd, int exec_cgroups);

}  // namespace warren::init
