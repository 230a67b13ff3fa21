// Internal to gateway/: implements actors::sandbox_runtime on the KJ thread. Starts each
// sandbox's warren-init (posix_spawn: the daemon is multi-threaded and never forks or sets
// up namespaces itself), holds its agent link, watches it exit, and kills and removes its
// cgroup on stop.
#pragma once

#include <kj/async-io.h>

#include <memory>
#include <mutex>
#include <unordered_map>
#include <string>

#include "actors/runtime.hpp"
#include "gateway/cgroups.hpp"
#include "gateway/inbox.hpp"
#include "wire/agent.capnp.h"

namespace warren::gateway {

struct host_options {
  std::string init_path;  ///< The warren-init binary.
  /// Host ids of sandboxes: running sandbox k (of at most `uid_ranges` at once) maps its
  /// ids 0..65535 to uid_base + k*65536 ... Ranges are lent while a sandbox runs: files
  /// keep ids 0..65535 on disk and are mounted idmapped.
  std::uint32_t uid_base = 0x70000000;
  std::uint32_t uid_ranges = 4094;
  /// The jail's optional layers; both on except in benchmarks that measure their cost.
  bool user_namespace = true;
  bool seccomp = true;
  /// Where sandbox directories live with a disk quota each; null: no disk limits.
  actors::disk_quota* disk = nullptr;
  std::uint64_t default_disk_bytes = 0;  ///< A sandbox's disk limit unless it has its own; 0 = none.
};

class sandbox_host final : public actors::sandbox_runtime {
 public:
  /// KJ thread only. `io`, `box` and `cgroups` are borrowed and outlive the host.
  sandbox_host(kj::AsyncIoContext& io, inbox& box, cgroup_tree& cgroups, host_options options);
  ~sandbox_host();

  // sandbox_runtime (any thread): the work is posted to the KJ thread.
  void start(const actors::sandbox_spec& spec, std::function<void(const error&)> started,
             std::function<void(const std::string&)> exited) override;
  void stop(std::uint64_t sandbox_id, std::function<void()> stopped) override;
  std::uint64_t cpu_usage_us(std::uint64_t sandbox_id) override { return cgroups_.cpu_usage_us(sandbox_id); }
  actors::sandbox_usage resource_usage(std::uint64_t sandbox_id) override;
  error update_limits(std::uint64_t sandbox_id, const actors::sandbox_limits& limits) override;
  error snapshot_files(std::uint64_t sandbox_id, const std::string& dir, const std::string& snapshot_dir,
                       std::uint64_t& pause_us) override;
  error clone_files(const std::string& snapshot_dir, const std::string& dir) override;
  error remove_snapshot(const std::string& snapshot_dir) override;
  error stage_restore(const std::string& snapshot_dir, const std::string& dir, std::uint64_t restore_count) override;
  error settle_restore(const std::string& dir, std::uint64_t restore_count) override;
  error adopt_snapshot(const std::string& staging, const std::string& snapshot_dir) override;
  /// OOM kills so far in the sandbox's memory cgroup (KJ thread; a small file read).
  std::uint64_t oom_kills(std::uint64_t sandbox_id) const { return cgroups_.oom_kills(sandbox_id); }

  /// The agent of a running sandbox. KJ thread only.
  kj::Maybe<wire::Agent::Client> agent(std::uint64_t sandbox_id);

  /// A running sandbox's network namespace (an fd the host owns, valid while it runs) and
  /// its init's pid, which tells one start from the next. KJ thread only.
  struct net_target {
    int netns_fd = -1;
    int init_pid = 0;
  };
  kj::Maybe<net_target> network(std::uint64_t sandbox_id);

  /// Called on the KJ thread after each start of a sandbox, once it was reported running
  /// (the gateway restarts its restart_on_wake processes there).
  std::function<void(std::uint64_t sandbox_id, const std::string& name, wire::Agent::Client agent)> on_agent_ready;

  /// Kills every sandbox still running; resolves when all are gone. KJ thread only.
  kj::Promise<void> stop_all();

  /// Number of running inits (tests, shutdown checks).
  std::size_t running() const;

  struct link;
  struct state;

 private:
  void do_start(actors::sandbox_spec spec, std::function<void(const error&)> started,
                std::function<void(const std::string&)> exited);
  void do_stop(std::uint64_t sandbox_id, std::function<void()> stopped);
  void on_exit(std::uint64_t sandbox_id, int status);
  /// Lends a free id range to a sandbox (KJ thread); false when all are in use.
  bool lend_id_range(std::uint64_t sandbox_id, std::uint32_t& uid_base);
  void return_id_range(std::uint64_t sandbox_id);
  std::uint64_t disk_limit(std::uint64_t own) const { return own ? own : options_.default_disk_bytes; }
  kj::Promise<void> remove_cgroup(std::uint64_t sandbox_id, int attempts_left);

  kj::AsyncIoContext& io_;
  inbox& box_;
  cgroup_tree& cgroups_;
  host_options options_;
  // KJ members live behind a unique_ptr: their destructors may throw, which an override
  // of the plain runtime interface's destructor may not.
  std::unique_ptr<state> st_;
  // Effective limits of running sandboxes, read from other threads (resource_usage).
  std::mutex limits_mutex_;
  std::unordered_map<std::uint64_t, cgroup_limits> limits_;  // Guarded by limits_mutex_.
};

}  // namespace warren::gateway
