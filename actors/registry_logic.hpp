// Pure logic of the registry: the name -> incarnation map rebuilt from the registry
// stream (stream 0). No I/O, no CAF.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>

#include "wire/errors.hpp"
#include "wire/events.hpp"
#include "wire/snapshots.hpp"

namespace warren::actors {

inline constexpr std::uint64_t registry_stream = 0;

/// What the registry remembers of a sandbox that is not running: a few dozen bytes, no
/// actor. (100,000 known sandboxes cost a few MB.)
struct registry_entry {
  // Durable (from the registry stream):
  std::uint64_t id = 0;
  std::uint64_t created_at_ms = 0;
  std::uint64_t sleep_after_ms = 0;
  bool keep_alive = false;
  bool hibernated = false;  ///< Asleep; otherwise it was running and is woken at start-up.
  // Runtime only (not persisted):
  bool needs_repair = false;  ///< Its journal did not replay when its actor loaded.
  std::uint8_t status = 0;    ///< actors::sandbox_status while loaded.
  std::uint64_t last_activity_ms = 0;
};

struct registry_record {
  std::uint64_t last_seq = 0;
  std::uint64_t next_id = 1;  ///< Ids are never reused, so a stale capability never matches.
  std::unordered_map<std::string, registry_entry> names;
  /// Snapshots of sandboxes' files (they outlive the sandbox they were taken of), by id.
  std::map<std::uint64_t, wire::registry_snapshot::snapshot> snapshots;
  /// Backups of sandboxes' directories (archives in the blob store), by id.
  std::map<std::string, wire::registry_snapshot::backup> backups;
};

/// A snapshot's label: empty, or 1-63 of a-z, 0-9, '-', '_'.
error validate_snapshot_label(const std::string& label);

/// Applies one registry event. Never fails, never does I/O.
void apply(registry_record& rec, const wire::envelope& e);

/// State snapshots of the registry (the durable fields only).
wire::registry_snapshot to_snapshot(const registry_record& rec);
registry_record from_snapshot(const wire::registry_snapshot& snap);

}  // namespace warren::actors
