// Where everything lives under the daemon's data directory. Paths are built from numeric
// ids only, never from client input, so nothing a client sends can steer a path.
//
//   <data>/journal/                  RocksDB event journal
//   <data>/blobs/                    backups (storage/blobs.hpp)
//   <data>/base/v1/                  generated base skeleton (etc/, usr -> host /usr overlay)
//   <data>/sandboxes/<id>/           one sandbox incarnation (layout inside: warren-init)
//   <data>/sandboxes/snapshots/<id>/ one snapshot of a sandbox's directory (read-only subvolume)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wire/errors.hpp"

namespace warren::storage {

struct layout {
  std::string data_dir;  ///< Absolute, normalized.

  std::string journal_dir() const { return data_dir + "/journal"; }
  std::string base_dir() const { return data_dir + "/base/v1"; }
  std::string blobs_dir() const { return data_dir + "/blobs"; }
  std::string sandboxes_dir() const { return data_dir + "/sandboxes"; }
  std::string sandbox_dir(std::uint64_t id) const {
    return sandboxes_dir() + "/" + std::to_string(id);
  }
  std::string snapshots_dir() const { return sandboxes_dir() + "/snapshots"; }
  std::string snapshot_dir(std::uint64_t id) const { return snapshots_dir() + "/" + std::to_string(id); }
};

/// Makes `data_dir` absolute, creates it (mode 0700) and the fixed subdirectories.
/// Refuses paths with characters that overlayfs mount options cannot carry (',' ':' '\').
error prepare_layout(const std::string& data_dir, layout& out);

/// Removes a directory tree without following symlinks and without crossing into other
/// mounts. A missing tree is success. Blocking: call it off the event loops.
error remove_tree(const std::string& path);

/// Bytes allocated by the files under `path` (not following symlinks, not crossing mounts);
/// 0 if it does not exist. Blocking, proportional to the number of files.
std::uint64_t tree_bytes(const std::string& path);

/// Ids of the sandbox directories present on disk (for garbage collection at start-up).
std::vector<std::uint64_t> list_sandbox_dirs(const layout& l);
/// Ids of the snapshot directories present on disk (the same, for snapshots).
std::vector<std::uint64_t> list_snapshot_dirs(const layout& l);

}  // namespace warren::storage
