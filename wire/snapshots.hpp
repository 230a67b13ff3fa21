// State snapshots as plain values, and their codec (journal.capnp SandboxSnapshot and
// RegistrySnapshot). A snapshot is a cache of replay: decode failures and unknown versions
// are reported as "no snapshot", and the caller replays the whole stream.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wire/events.hpp"

namespace warren::wire {

inline constexpr std::uint32_t snapshot_version = 1;

/// A background process as a sandbox's state remembers it (schema v5).
struct process_entry {
  std::string process_id;
  std::vector<std::string> argv;
  std::uint8_t status = 0;  ///< 0 running, 1 exited, 2 killed, 3 lost.
  std::int32_t exit_code = 0;
  std::int32_t signal = 0;
  bool restart_on_wake = false;  ///< Schema v6.
  bool auto_cleanup = false;     ///< Schema v7.
  bool operator==(const process_entry&) const = default;
};

/// A port reachable through a preview URL (schema v6).
struct exposed_port {
  std::uint32_t port = 0;
  std::string label;
  std::string token;
  bool operator==(const exposed_port&) const = default;
};

struct sandbox_snapshot {
  std::uint32_t version = snapshot_version;
  std::uint64_t seq = 0;
  std::string name;
  std::uint64_t sandbox_id = 0;
  std::uint64_t created_at_ms = 0;
  std::uint64_t exec_count = 0;
  std::vector<std::uint64_t> open_execs;
  std::uint64_t sleep_after_ms = 0;
  bool keep_alive = false;
  bool hibernated = false;
  std::uint64_t hibernations = 0;
  std::uint64_t restores = 0;  ///< Schema v9.
  std::uint64_t memory_bytes = 0, pids_max = 0, cpu_millis = 0, disk_bytes = 0;
  std::vector<process_entry> processes;
  std::vector<exposed_port> ports;  ///< By port.
  bool operator==(const sandbox_snapshot&) const = default;
};

struct registry_snapshot {
  struct entry {
    std::string name;
    std::uint64_t sandbox_id = 0;
    std::uint64_t created_at_ms = 0;
    std::uint64_t sleep_after_ms = 0;
    bool keep_alive = false;
    bool hibernated = false;
    bool operator==(const entry&) const = default;
  };
  std::uint32_t version = snapshot_version;
  std::uint64_t seq = 0;
  std::uint64_t next_id = 1;
  std::vector<entry> entries;
  struct snapshot {
    snapshot_taken taken;
    std::uint64_t at_ms = 0;
    bool operator==(const snapshot&) const = default;
  };
  std::vector<snapshot> snapshots;  ///< Schema v8.
  struct backup {
    backup_created created;
    std::uint64_t at_ms = 0;
    bool operator==(const backup&) const = default;
  };
  std::vector<backup> backups;  ///< Schema v10.
  bool operator==(const registry_snapshot&) const = default;
};

std::string encode_snapshot(const sandbox_snapshot& s);
std::string encode_snapshot(const registry_snapshot& s);

/// Empty when the bytes do not decode or carry another version.
std::optional<sandbox_snapshot> decode_sandbox_snapshot(std::string_view bytes);
std::optional<registry_snapshot> decode_registry_snapshot(std::string_view bytes);

}  // namespace warren::wire
