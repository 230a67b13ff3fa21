// Disk limits of sandboxes (see storage/README.md "Disk limits").
//
// Every sandbox directory lives in one filesystem image, <data>/disk.img: a sparse file
// formatted as btrfs with quota groups, attached to a loop device and mounted over
// <data>/sandboxes in the daemon's private mount namespace (so it goes away with the
// daemon, whatever kills it). Each sandbox's directory is a btrfs subvolume whose quota
// group has a limit on the bytes it references (data and metadata, so a flood of empty
// files counts too): a sandbox that fills its disk gets EDQUOT, a pool that fills gets
// ENOSPC inside the pool, and the host's disk never fills beyond the image's size.
//
// Why btrfs: ext4 and XFS project quotas need kernel options (CONFIG_QFMT_V2,
// CONFIG_XFS_QUOTA) that this project's reference kernel lacks; btrfs quota groups are part
// of btrfs itself. Subvolumes also give cheap copy-on-write snapshots for later.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "wire/errors.hpp"

namespace warren::storage {

struct disk_usage {
  std::uint64_t used_bytes = 0;
  std::uint64_t limit_bytes = 0;  ///< 0: none.
};

class disk_pool {
 public:
  /// Makes the image if it is missing (`size_bytes` of sparse file; an existing image keeps
  /// its size), attaches it and mounts it at `mount_dir`. The calling process must have a
  /// mount namespace of its own (see enter_private_mount_namespace). Blocking.
  static std::unique_ptr<disk_pool> open(const std::string& image, const std::string& mount_dir,
                                         std::uint64_t size_bytes, error& err);
  ~disk_pool();
  disk_pool(const disk_pool&) = delete;
  disk_pool& operator=(const disk_pool&) = delete;

  /// Makes `dir` (a direct child of the mount) a subvolume of its own (moving what a plain
  /// directory there held into it) and sets its limit (0: none). Idempotent; thread-safe.
  error apply(std::uint64_t sandbox_id, const std::string& dir, std::uint64_t limit_bytes);
  /// Changes the limit only. Thread-safe.
  error set_limit(std::uint64_t sandbox_id, std::uint64_t limit_bytes);
  /// Copy-on-write snapshot of the subvolume `src` (a sandbox's directory or a snapshot) as
  /// the new subvolume `dst` (its parent directory is created if missing): read-only for a
  /// snapshot, writable for a sandbox made from one. Costs a btrfs transaction commit, not a
  /// copy: files share their extents until one side writes. Thread-safe.
  error snapshot(const std::string& src, const std::string& dst, bool read_only);
  /// Deletes the subvolume `dir` (read-only or not) and everything in it. A missing one is
  /// success. Thread-safe.
  error remove_subvolume(const std::string& dir);
  /// What the sandbox's subvolume holds now (its quota group, no tree walk; the pool's
  /// pending writes are committed first, so this can block on I/O). Thread-safe.
  std::optional<disk_usage> usage(std::uint64_t sandbox_id) const;

  std::uint64_t size_bytes() const { return size_bytes_; }
  const std::string& device() const { return device_; }

 private:
  disk_pool() = default;
  error set_limit_of(const std::string& dir, std::uint64_t limit_bytes);
  bool mounted_ = false;
  std::string mount_dir_, device_, sysfs_qgroups_;
  std::uint64_t size_bytes_ = 0;
};

/// Gives the calling process a mount namespace of its own whose mounts do not propagate to
/// the host (mounts of the host still propagate in). Must be called before any thread
/// exists. Mounts made afterwards vanish when the process and its children are gone.
error enter_private_mount_namespace();

/// The default pool size: 90% of what the filesystem holding `dir` has free now.
std::uint64_t default_pool_size(const std::string& dir);

}  // namespace warren::storage
