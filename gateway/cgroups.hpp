// Host-side cgroups of sandboxes: where the cgroup2 hierarchy is (a pure v2 host, or the
// `unified` mount of a v1/hybrid host like this project's CI), and creating, killing and
// removing one cgroup per sandbox under a per-daemon parent. Plain blocking syscalls, each
// well under a millisecond.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wire/errors.hpp"

namespace warren::gateway {

/// The cgroup2 mount point, from /proc/self/mountinfo; nullopt when there is none.
std::optional<std::string> find_cgroup2_root();

/// Resource limits of one sandbox; 0 means no limit.
struct cgroup_limits {
  std::uint64_t memory_bytes = 0;  ///< Memory (RAM) the sandbox's processes may use.
  std::uint64_t pids_max = 0;      ///< Processes and threads at once (contains fork bombs).
  std::uint64_t cpu_millis = 0;    ///< CPU time per second of wall time, in 1/1000 CPU.
};

/// One cgroup per sandbox. Membership, kill and CPU accounting always use the cgroup2
/// hierarchy; limits use cgroup2 controllers where the host enables them there (pure v2
/// hosts) and the v1 hierarchies of memory, pids and cpu otherwise (hybrid hosts).
class cgroup_tree {
 public:
  /// `v2_root`: the cgroup2 mount; `name`: this daemon's directory name under each
  /// hierarchy (e.g. warren-1a2b3c4d), so that several daemons never share cgroups.
  cgroup_tree(std::string v2_root, std::string name, cgroup_limits limits);

  const std::string& parent() const { return parent_; }
  std::string path(std::uint64_t sandbox_id) const { return parent_ + "/sb-" + std::to_string(sandbox_id); }
  /// Where limits are enforced, for logs: "cgroup2", "cgroup1" or "none".
  const char* limits_mode() const;

  /// Creates the parents (and kills and removes cgroups left by a daemon that died).
  error prepare();
  /// Creates the cgroups of a sandbox with the limits; `join` gets every directory the
  /// sandbox's init must join (cgroup.procs).
  error create(std::uint64_t sandbox_id, cgroup_limits limits, std::vector<std::string>& join);
  /// Writes new limits into a sandbox's existing cgroups. A limit whose v1 hierarchy was not
  /// set up at start (no limit then) is refused with the reason.
  error update(std::uint64_t sandbox_id, cgroup_limits limits);
  /// The daemon's defaults filled into the zero fields of `own`.
  cgroup_limits effective(cgroup_limits own) const;
  /// Kills every process in the sandbox's cgroup (cgroup.kill). False if that is unsupported.
  bool kill_all(std::uint64_t sandbox_id);
  /// Freezes (or thaws) every process in the sandbox's cgroup; returns once the kernel says
  /// it is frozen. `existed`: false when the sandbox has no cgroup (it does not run).
  error freeze(std::uint64_t sandbox_id, bool frozen, bool& existed);
  /// True once no process is left in it (or it does not exist).
  bool is_empty(std::uint64_t sandbox_id) const;
  /// Removes the (empty) cgroup; EBUSY while processes are still dying.
  error remove(std::uint64_t sandbox_id);
  /// CPU time used by the sandbox's processes (cpu.stat usage_usec); 0 if unknown.
  std::uint64_t cpu_usage_us(std::uint64_t sandbox_id) const;
  /// Memory now and at its peak, and processes now, from whichever hierarchy has them.
  void usage(std::uint64_t sandbox_id, std::uint64_t& memory, std::uint64_t& memory_peak, std::uint64_t& pids) const;
  const cgroup_limits& limits() const { return limits_; }
  /// How many times the kernel's OOM killer acted in the sandbox's memory cgroup.
  std::uint64_t oom_kills(std::uint64_t sandbox_id) const;
  /// Removes the parent directories (at shutdown, when all sandboxes are gone).
  void remove_parent();

 private:
  std::string parent_;                              // cgroup2 parent.
  std::vector<std::pair<std::string, std::string>> v1_parents_;  // controller -> v1 parent.
  bool v2_limits_ = false;                          // Limits through cgroup2 controllers.
  cgroup_limits limits_;
};

}  // namespace warren::gateway
