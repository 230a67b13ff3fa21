// The I/O that actors need but must not do themselves: starting and stopping a sandbox's
// init and its agent link. Declared here with plain values; implemented in gateway/
// (which owns the KJ event loop and the agent links); wired together by warrend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>
#include <string>

#include "actors/types.hpp"
#include "wire/errors.hpp"

namespace warren::actors {

/// Everything needed to start one sandbox's init.
struct sandbox_spec {
  std::uint64_t sandbox_id = 0;
  std::string name;      ///< Validated; becomes the hostname.
  std::string dir;       ///< The sandbox's own directory (writable layers).
  std::string base_dir;  ///< The shared, read-only base skeleton.
  std::uint64_t memory_bytes = 0;  ///< Limits; 0 = the daemon's default.
  std::uint64_t pids_max = 0;
  std::uint64_t cpu_millis = 0;
  std::uint64_t disk_bytes = 0;
};

/// Disk limits of sandbox directories (storage::disk_pool, adapted by warrend). Thread-safe.
class disk_quota {
 public:
  virtual ~disk_quota() = default;
  /// Readies a sandbox's directory for its limit (0: none). Idempotent.
  virtual error prepare(std::uint64_t sandbox_id, const std::string& dir, std::uint64_t limit_bytes) = 0;
  virtual error set_limit(std::uint64_t sandbox_id, std::uint64_t limit_bytes) = 0;
  /// Bytes the directory holds and its limit (0: none); false when unknown.
  virtual bool usage(std::uint64_t sandbox_id, std::uint64_t& used_bytes, std::uint64_t& limit_bytes) = 0;
  /// Copy-on-write snapshot of the directory `src` as `dst` (read-only or writable).
  virtual error snapshot(const std::string& src, const std::string& dst, bool read_only) = 0;
  /// Deletes a directory made by prepare or snapshot; a missing one is success.
  virtual error remove(const std::string& dir) = 0;
};

/// Named, immutable blobs (backup archives): storage::local_blobs on the data dir by
/// default (adapted by warrend); an S3-compatible object store can implement the same.
/// Blocking calls; thread-safe.
class blob_store {
 public:
  class writer {
   public:
    virtual ~writer() = default;  ///< Without commit: nothing stays.
    virtual error write(const void* data, std::size_t n) = 0;
    /// Durable once it returns; its SHA-256 (hex) and size.
    virtual error commit(std::string& sha256, std::uint64_t& bytes) = 0;
  };
  class reader {
   public:
    virtual ~reader() = default;
    virtual error read(void* buf, std::size_t max, std::size_t& got) = 0;  ///< got = 0: the end.
  };
  virtual ~blob_store() = default;
  virtual std::unique_ptr<writer> create(const std::string& name, error& err) = 0;
  /// Checks the whole blob against `sha256` first: a corrupt one is an error, nothing read.
  virtual std::unique_ptr<reader> open_verified(const std::string& name, const std::string& sha256, error& err) = 0;
  virtual error remove(const std::string& name) = 0;
  virtual std::vector<std::string> list() = 0;
};

class sandbox_runtime {
 public:
  virtual ~sandbox_runtime() = default;

  /// Starts the sandbox's init. Thread-safe. `started` is called once, from any thread,
  /// with an empty error when the agent link is up. If it started, `exited` is called once
  /// later, from any thread, when the init is gone (with a reason for the log).
  virtual void start(const sandbox_spec& spec, std::function<void(const error&)> started,
                     std::function<void(const std::string&)> exited) = 0;

  /// Kills every process of the sandbox and releases its kernel objects (cgroup). Calls
  /// `stopped` once, from any thread, when nothing of it runs any more. Stopping a sandbox
  /// that does not run calls `stopped` at once.
  virtual void stop(std::uint64_t sandbox_id, std::function<void()> stopped) = 0;

  /// CPU time used by the sandbox's processes so far, in microseconds (from its cgroup); 0 when
  /// unknown. Thread-safe; a small blocking file read.
  virtual std::uint64_t cpu_usage_us(std::uint64_t sandbox_id) = 0;

  /// Resource use of a sandbox: from its cgroups while it runs (zeros otherwise), and its
  /// disk from its quota whether it runs or not (disk_known; otherwise left to the caller). Thread-safe; a few small blocking file reads.
  virtual sandbox_usage resource_usage(std::uint64_t sandbox_id) = 0;

  /// Applies new limits (0 = the daemon's default) to a running sandbox's cgroups.
  /// Thread-safe; small blocking file writes. An error says which limit the kernel refused.
  virtual error update_limits(std::uint64_t sandbox_id, const sandbox_limits& limits) = 0;

  /// Snapshots of sandbox directories (copy-on-write; they need the disk pool, otherwise
  /// these fail with `unavailable`). Thread-safe and blocking (a filesystem commit, tens of
  /// ms at most). snapshot_files captures `dir` as the read-only `snapshot_dir`; a running
  /// sandbox is frozen meanwhile (`pause_us`: for how long; 0 when it did not run).
  virtual error snapshot_files(std::uint64_t sandbox_id, const std::string& dir, const std::string& snapshot_dir,
                               std::uint64_t& pause_us);
  /// A new sandbox directory `dir` (writable) holding what `snapshot_dir` holds.
  virtual error clone_files(const std::string& snapshot_dir, const std::string& dir);
  /// Deletes a snapshot's directory; a missing one is success.
  virtual error remove_snapshot(const std::string& snapshot_dir);
  /// Replacing a stopped sandbox's files by a snapshot's, in two steps that survive a crash
  /// between them: stage_restore makes a copy of `snapshot_dir` beside `dir`, marked with
  /// `restore_count`; settle_restore (once the restore is journaled, and before every start)
  /// puts a staged copy marked with `restore_count` in place of `dir`, and deletes any
  /// other leftover (a copy whose restore never reached the journal).
  virtual error stage_restore(const std::string& snapshot_dir, const std::string& dir, std::uint64_t restore_count);
  virtual error settle_restore(const std::string& dir, std::uint64_t restore_count);
  /// An imported snapshot: the one read-only subvolume that `btrfs receive` made in
  /// `staging` becomes `snapshot_dir`; `staging` goes.
  virtual error adopt_snapshot(const std::string& staging, const std::string& snapshot_dir);
};

inline error snapshots_unavailable() {
  return make_error(errc::unavailable,
                    "snapshots need the disk pool (btrfs): this daemon runs with --disk-pool off or without one");
}
inline error sandbox_runtime::snapshot_files(std::uint64_t, const std::string&, const std::string&, std::uint64_t&) {
  return snapshots_unavailable();
}
inline error sandbox_runtime::clone_files(const std::string&, const std::string&) { return snapshots_unavailable(); }
inline error sandbox_runtime::remove_snapshot(const std::string&) { return {}; }
inline error sandbox_runtime::stage_restore(const std::string&, const std::string&, std::uint64_t) {
  return snapshots_unavailable();
}
inline error sandbox_runtime::settle_restore(const std::string&, std::uint64_t) { return {}; }
inline error sandbox_runtime::adopt_snapshot(const std::string&, const std::string&) { return snapshots_unavailable(); }

}  // namespace warren::actors
