#include "wire/errors.hpp"

#include <array>
#include <utility>

namespace warren {
namespace {

constexpr std::array<std::pair<errc, const char*>, 23> names = {{
    {errc::none, "none"},
    {errc::invalid_argument, "invalid_argument"},
    {errc::invalid_name, "invalid_name"},
    {errc::not_found, "not_found"},
    {errc::sandbox_gone, "sandbox_gone"},
    {errc::start_failed, "start_failed"},
    {errc::journal_failed, "journal_failed"},
    {errc::timeout, "timeout"},
    {errc::unavailable, "unavailable"},
    {errc::internal, "internal"},
    {errc::shutting_down, "shutting_down"},
    {errc::unauthenticated, "unauthenticated"},
    {errc::needs_repair, "needs_repair"},
    {errc::busy, "busy"},
    {errc::already_exists, "already_exists"},
    {errc::not_a_directory, "not_a_directory"},
    {errc::is_a_directory, "is_a_directory"},
    {errc::permission_denied, "permission_denied"},
    {errc::too_large, "too_large"},
    {errc::not_empty, "not_empty"},
    {errc::no_space, "no_space"},
    {errc::corrupt, "corrupt"},
    {errc::unsupported, "unsupported"},
}};

}  // namespace

const char* errc_name(errc code) {
  for (auto& [c, n] : names)
    if (c == code) return n;
  return "internal";
}

errc errc_from_name(const std::string& name) {
  for (auto& [c, n] : names)
    if (name == n) return c;
  return errc::internal;
}

bool is_client_error(errc code) {
  switch (code) {
    case errc::invalid_argument:
    case errc::invalid_name:
    case errc::not_found:
    case errc::sandbox_gone:
    case errc::unauthenticated:
    case errc::already_exists:
    case errc::not_a_directory:
    case errc::is_a_directory:
    case errc::permission_denied:
    case errc::too_large:
    case errc::not_empty:
    case errc::no_space:
      return true;
    default:
      return false;
  }
}

std::string error::to_string() const { return std::string(errc_name(code)) + ": " + message; }

error error::from_string(const std::string& text) {
  auto colon = text.find(": ");
  if (colon != std::string::npos) {
    auto code = errc_from_name(text.substr(0, colon));
    if (code != errc::internal || text.compare(0, colon, "internal") == 0)
      return error{code, text.substr(colon + 2)};
  }
  return error{errc::internal, text};
}

}  // namespace warren
