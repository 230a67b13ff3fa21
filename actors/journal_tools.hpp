// Reading journals for people and tools: history, time travel, consistency check. Blocking
// RocksDB reads; callers run them off the event loops and scheduler hot paths (core.cpp uses
// a detached actor).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wire/errors.hpp"

namespace warren::storage {
class journal;
}

namespace warren::actors {

struct journal_entry {
  std::uint64_t seq = 0;
  std::uint64_t at_ms = 0;
  std::string kind, summary, json;
};

/// Up to `limit` entries of `stream` from `from_seq`; an undecodable entry is reported as
/// kind "corrupt" with the reason (so a broken journal can still be read around).
std::vector<journal_entry> read_entries(const storage::journal& j, std::uint64_t stream, std::uint64_t from_seq,
                                        std::uint32_t limit);

/// The sandbox state after applying events 1..at_seq (0: all) as JSON, or an error naming
/// the first event that does not replay.
error state_at(const storage::journal& j, std::uint64_t stream, std::uint64_t at_seq, std::string& json);

/// Replays a whole stream (decode, seq order, apply); the first problem, or none.
error check_stream(const storage::journal& j, std::uint64_t stream, bool registry);

}  // namespace warren::actors
