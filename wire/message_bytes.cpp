#include "wire/message_bytes.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>

namespace warren::wire {

std::string message_bytes(capnp::MessageBuilder& message) {
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

bool read_message(std::string_view bytes, const std::function<void(capnp::MessageReader&)>& read, std::string& error,
                  std::uint64_t traversal_limit_words) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    error = "entry has " + std::to_string(bytes.size()) + " bytes, not a whole number of 8-byte words";
    return false;
  }
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = traversal_limit_words;
    capnp::FlatArrayMessageReader reader(words, options);
    read(reader);
    return true;
  } catch (const kj::Exception& e) {
    error = std::string("not a valid message: ") + e.getDescription().cStr();
    return false;
  }
}

}  // namespace warren::wire
