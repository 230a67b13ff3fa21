// Internal to wire/: Cap'n Proto messages to and from the bytes stored in RocksDB.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace warren::wire {

inline std::string message_bytes(capnp::MessageBuilder& message) {
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

/// Runs `read(reader)` on the message in `bytes` and returns its result; nullopt (with
/// `error` set) when the bytes are not a whole message. Stored values are not word-aligned,
/// so they are copied into an aligned buffer first.
template <class T, class F>
std::optional<T> read_message(std::string_view bytes, F read, std::string& error,
                              std::uint64_t traversal_limit_words = 8 * 1024 * 1024) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    error = "entry has " + std::to_string(bytes.size()) + " bytes, not a whole number of 8-byte words";
    return std::nullopt;
  }
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = traversal_limit_words;
    capnp::FlatArrayMessageReader reader(words, options);
    return read(reader);
  } catch (const kj::Exception& e) {
    error = std::string("not a valid message: ") + e.getDescription().cStr();
    return std::nullopt;
  }
}

}  // namespace warren::wire
