// The event journal: append-only streams of encoded events in RocksDB, one stream per
// sandbox (stream 0 is the registry's). RocksDB types never leave storage/ (pimpl).
//
// Durability: append() hands a batch to a dedicated writer thread that merges every batch
// waiting at that moment into one synced WriteBatch (group commit), then calls each batch's
// callback. A callback that reports success means the batch is on disk. fsync never runs
// on the caller's thread, so CAF scheduler threads never block on the disk.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wire/errors.hpp"

namespace warren::storage {

/// Where and how to open the journal.
struct journal_options {
  /// Directory of the RocksDB database. Created if missing. Default: none (required).
  std::string path;
  /// Sync every batch to disk before acknowledging it. Default: true. Only tests and
  /// benchmarks that measure the cost of syncing turn it off.
  bool sync = true;
};

/// One stream's part of an atomic batch.
struct stream_append {
  std::uint64_t stream = 0;       ///< Stream id (0: registry, otherwise a sandbox id).
  std::uint64_t first_seq = 0;    ///< Sequence number of records[0]; must be last_seq + 1.
  std::vector<std::string> records;  ///< Encoded envelopes, in order.
};

/// Everything one command writes: applied atomically or not at all.
struct journal_batch {
  std::vector<stream_append> appends;
  std::vector<std::uint64_t> erase_streams;  ///< Streams deleted (with their snapshot) in the same batch.
  /// State snapshots to store with the batch, one per stream (replacing the previous one).
  std::vector<std::pair<std::uint64_t, std::string>> snapshots;
};

/// Called once per append, on the writer thread; an empty error means durable.
using append_callback = std::function<void(const error&)>;

class journal {
 public:
  /// Opens (or creates) the journal. Returns nullptr and sets `err` on failure.
  static std::unique_ptr<journal> open(const journal_options& options, error& err);

  /// Flushes pending appends, stops the writer thread and closes the database.
  ~journal();

  journal(const journal&) = delete;
  journal& operator=(const journal&) = delete;

  /// Queues a batch. Thread-safe. `done` runs on the writer thread once the batch is synced
  /// (or failed: a sequence gap, a closed journal, an I/O error). Never blocks on I/O.
  void append(journal_batch batch, append_callback done);

  /// Reads the records of `stream` with seq >= from_seq, in order, at most `limit` (0: all).
  /// Thread-safe; blocking (a RocksDB iterator, no fsync). Used for replay and tools.
  std::vector<std::pair<std::uint64_t, std::string>> read(std::uint64_t stream, std::uint64_t from_seq = 1,
                                                          std::size_t limit = 0) const;

  /// The stream's latest state snapshot, if any. Thread-safe; blocking.
  std::optional<std::string> load_snapshot(std::uint64_t stream) const;

  /// Highest seq in `stream`, 0 if empty. Thread-safe; blocking.
  std::uint64_t last_seq(std::uint64_t stream) const;

  /// Counters for tests and benchmarks.
  struct stats {
    std::uint64_t batches = 0;  ///< append() calls completed.
    std::uint64_t writes = 0;   ///< Synced RocksDB writes (<= batches: group commit).
  };
  stats get_stats() const;

  struct impl;

 private:
  explicit journal(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

/// The 16-byte key of an entry: stream id and seq, both big-endian, so that a stream's
/// entries are contiguous and ordered and stream prefixes never collide.
std::string journal_key(std::uint64_t stream, std::uint64_t seq);

}  // namespace warren::storage
