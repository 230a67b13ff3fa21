// Error values shared by every layer. Inside the daemon expected failures travel as
// `warren::error` values; at the edges (Cap'n Proto, HTTP, CLI) they are translated once,
// through the table in errors.cpp.
#pragma once

#include <cstdint>
#include <string>

namespace warren {

/// Error codes. Explicitly numbered and only ever grown: the numbers cross process
/// boundaries (CAF errors, exit codes of tools) and the names are part of the public API
/// (the prefix of every RPC error description).
enum class errc : std::uint8_t {
  none = 0,
  invalid_argument = 1,  ///< A request field is malformed (message says which).
  invalid_name = 2,      ///< A sandbox name breaks the naming rules.
  not_found = 3,         ///< No sandbox with that name (and creation was not asked).
  sandbox_gone = 4,      ///< The sandbox this capability pointed at was destroyed.
  start_failed = 5,      ///< The sandbox's init could not be started.
  journal_failed = 6,    ///< The journal could not make a change durable.
  timeout = 7,           ///< An internal request took too long.
  unavailable = 8,       ///< The sandbox is not running (its init died) or is stopping.
  internal = 9,          ///< A bug; details are in the daemon's log, not in the reply.
  shutting_down = 10,    ///< The daemon is stopping and takes no new work.
  unauthenticated = 11,  ///< Missing or wrong bearer token.
  needs_repair = 12,     ///< The sandbox's journal does not replay; it is left untouched.
  busy = 13,             ///< The request conflicts with work in progress (e.g. a running exec).
  already_exists = 14,   ///< A file or directory is in the way (and overwriting was not asked).
  not_a_directory = 15,  ///< A path component, or the target of a directory operation, is not a directory.
  is_a_directory = 16,   ///< A file operation met a directory.
  permission_denied = 17,  ///< The sandbox's own permissions refuse it.
  too_large = 18,        ///< More than a one-shot call carries (the message names the streaming call).
  not_empty = 19,        ///< A directory to remove holds files (and recursive was not asked).
  no_space = 20,         ///< The sandbox's disk limit or the disk pool is full.
  corrupt = 21,          ///< Stored data does not match its checksum (nothing was changed).
  unsupported = 22,      ///< This host cannot do it (the message says what is missing).
};

/// Stable lower-case name of a code, e.g. "invalid_name".
const char* errc_name(errc code);

/// Parses the name written by errc_name; unknown names give errc::internal.
errc errc_from_name(const std::string& name);

/// True for codes caused by the caller's input (4xx in HTTP terms).
bool is_client_error(errc code);

/// An expected failure: a code and a sentence that says what was wrong and what to do.
struct error {
  errc code = errc::none;
  std::string message;

  explicit operator bool() const { return code != errc::none; }

  /// "code: message", the form used in RPC exception descriptions.
  std::string to_string() const;

  /// Inverse of to_string(); a description without a known code prefix becomes `internal`.
  static error from_string(const std::string& text);
};

inline error make_error(errc code, std::string message) { return error{code, std::move(message)}; }

}  // namespace warren
