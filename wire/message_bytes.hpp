// Internal to wire/: Cap'n Proto messages to and from the bytes stored in RocksDB.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace capnp {
class MessageBuilder;
class MessageReader;
}  // namespace capnp

namespace warren::wire {

/// The flat (unpacked) bytes of a built message.
std::string message_bytes(capnp::MessageBuilder& message);

/// Calls `read(reader)` on the message in `bytes`. Returns false (with `error` set) when the
/// bytes are not a whole message or `read` hits malformed data; exceptions never escape.
/// Stored values are not word-aligned, so they are copied into an aligned buffer first.
bool read_message(std::string_view bytes, const std::function<void(capnp::MessageReader&)>& read, std::string& error,
                  std::uint64_t traversal_limit_words = 8 * 1024 * 1024);

}  // namespace warren::wire
