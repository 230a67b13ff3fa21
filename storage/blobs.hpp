// Blobs on a local directory: named, immutable files written durably (temporary file, fsync,
// rename, directory fsync) with their SHA-256 computed on the way in, and checked again
// before anyone reads one back. Backups live here (<data>/blobs/); the interface the daemon
// sees is actors::blob_store, so an S3-compatible object store can take this one's place.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wire/errors.hpp"

namespace warren::storage {

/// Incremental SHA-256 (OpenSSL).
class sha256 {
 public:
  sha256();
  ~sha256();
  sha256(const sha256&) = delete;
  sha256& operator=(const sha256&) = delete;
  void update(const void* data, std::size_t n);
  std::string hex();  ///< Lower-case hex digest; call once.

 private:
  void* ctx_;
};

class local_blobs {
 public:
  /// Uses (and creates, mode 0700) `dir`.
  static std::unique_ptr<local_blobs> open(const std::string& dir, error& err);

  /// A blob being written; dropped before commit, it leaves nothing behind.
  class writer {
   public:
    ~writer();
    error write(const void* data, std::size_t n);
    /// Makes it durable under its name; returns its SHA-256 and size.
    error commit(std::string& sha256_hex, std::uint64_t& bytes);

   private:
    friend class local_blobs;
    int fd_ = -1;
    std::string tmp_, path_, dir_;
    std::uint64_t bytes_ = 0;
    sha256 hash_;
  };
  class reader {
   public:
    ~reader();
    /// got = 0 at the end.
    error read(void* buf, std::size_t max, std::size_t& got);

   private:
    friend class local_blobs;
    int fd_ = -1;
  };

  std::unique_ptr<writer> create(const std::string& name, error& err);
  /// Reads the whole blob first and compares its SHA-256 with `expected`: a corrupt or
  /// truncated blob is an error and nothing of it is handed out.
  std::unique_ptr<reader> open_verified(const std::string& name, const std::string& expected, error& err);
  error remove(const std::string& name);
  std::vector<std::string> list() const;

 private:
  std::string dir_;
};

/// Blob names: 1-128 of a-z, 0-9, '-', '_', '.', not starting with '.'.
bool valid_blob_name(const std::string& name);

}  // namespace warren::storage
