// Host-side cgroups of sandboxes: where the cgroup2 hierarchy is (a pure v2 host, or the
// `unified` mount of a v1/hybrid host like this project's CI), and creating, killing and
// removing one cgroup per sandbox under a per-daemon parent. Plain blocking syscalls, each
// well under a millisecond.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "wire/errors.hpp"

namespace warren::gateway {

/// The cgroup2 mount point, from /proc/self/mountinfo; nullopt when there is none.
std::optional<std::string> find_cgroup2_root();

class cgroup_tree {
 public:
  /// `parent` is this daemon's own directory, e.g. /sys/fs/cgroup/warren-1a2b3c4d.
  explicit cgroup_tree(std::string parent) : parent_(std::move(parent)) {}

  const std::string& parent() const { return parent_; }
  std::string path(std::uint64_t sandbox_id) const { return parent_ + "/sb-" + std::to_string(sandbox_id); }

  /// Creates the parent (and kills and removes cgroups left by a daemon that died).
  error prepare();
  /// Creates the cgroup of a sandbox (an existing, empty one is reused).
  error create(std::uint64_t sandbox_id);
  /// Kills every process in the sandbox's cgroup (cgroup.kill). False if that is unsupported.
  bool kill_all(std::uint64_t sandbox_id);
  /// True once no process is left in it (or it does not exist).
  bool is_empty(std::uint64_t sandbox_id) const;
  /// Removes the (empty) cgroup; EBUSY while processes are still dying.
  error remove(std::uint64_t sandbox_id);
  /// CPU time used by the sandbox's processes (cpu.stat usage_usec); 0 if unknown.
  std::uint64_t cpu_usage_us(std::uint64_t sandbox_id) const;
  /// Removes the parent directory (at shutdown, when all sandboxes are gone).
  void remove_parent();

 private:
  std::string parent_;
};

}  // namespace warren::gateway
