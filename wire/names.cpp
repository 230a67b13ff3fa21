#include "wire/names.hpp"

#include <cstdio>
#include <string>

namespace warren::wire {
namespace {

// Quotes untrusted input for an error message: printable ASCII kept, the rest escaped,
// at most 80 characters shown.
std::string quote(std::string_view s) {
  std::string out = "'";
  std::size_t shown = 0;
  for (unsigned char c : s) {
    if (shown++ == 80) {
      out += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out + "'";
}

constexpr const char* rule =
    "use 1-63 characters of a-z, 0-9 and '-', not starting or ending with '-'";

}  // namespace

error validate_sandbox_name(std::string_view name) {
  auto fail = [&](const std::string& why) {
    return make_error(errc::invalid_name, "sandbox name " + quote(name) + " " + why + ": " + rule);
  };
  if (name.empty()) return make_error(errc::invalid_name, std::string("sandbox name is empty: ") + rule);
  if (name.size() > max_sandbox_name_bytes)
    return fail("is " + std::to_string(name.size()) + " characters long");
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) {
      if (c >= 'A' && c <= 'Z') return fail("has an uppercase letter");
      return fail("has the character " + quote(std::string_view(&c, 1)));
    }
  }
  if (name.front() == '-' || name.back() == '-') return fail("starts or ends with '-'");
  return {};
}

}  // namespace warren::wire

namespace warren::wire {

error validate_preview_domain(std::string_view domain) {
  auto fail = [&]() {
    return make_error(errc::invalid_argument, "preview domain " + quote(domain) +
                                                  " must be a lower-case DNS name such as localhost or "
                                                  "preview.example.com (labels of a-z, 0-9, '-', at most 200 characters)");
  };
  if (domain.empty() || domain.size() > 200 || domain.front() == '.' || domain.back() == '.') return fail();
  char prev = '.';
  for (char c : domain) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    if (!ok || (c == '.' && prev == '.')) return fail();
    prev = c;
  }
  return {};
}

}  // namespace warren::wire
