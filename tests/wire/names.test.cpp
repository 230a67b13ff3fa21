#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "wire/names.hpp"

using warren::errc;
using warren::wire::validate_sandbox_name;

TEST_CASE("valid sandbox names are accepted", "[names]") {
  for (std::string name : std::vector<std::string>{"a", "demo", "my-sandbox-1", "0", "a1", std::string(63, 'x')}) {
    INFO(name);
    CHECK_FALSE(validate_sandbox_name(name));
  }
}

TEST_CASE("invalid sandbox names get a precise invalid_name error", "[names]") {
  struct bad {
    std::string name;
    std::string says;
  };
  for (auto& [name, says] : {bad{"", "is empty"}, bad{std::string(64, 'a'), "64 characters long"},
                             bad{"Demo", "uppercase"}, bad{"../x", "'.'"}, bad{"a b", "' '"},
                             bad{"-a", "starts or ends"}, bad{"a-", "starts or ends"},
                             bad{"a_b", "'_'"}, bad{std::string("a\0b", 3), "\\x00"},
                             bad{"caf\xc3\xa9", "\\xc3"}}) {
    INFO(name);
    auto e = validate_sandbox_name(name);
    REQUIRE(e);
    CHECK(e.code == errc::invalid_name);
    CHECK(e.message.find(says) != std::string::npos);
    CHECK(e.message.find("a-z, 0-9") != std::string::npos);  // States the rule.
  }
}

TEST_CASE("error descriptions round-trip through their text form", "[errors]") {
  warren::error e{errc::sandbox_gone, "sandbox x was destroyed"};
  auto back = warren::error::from_string(e.to_string());
  CHECK(back.code == errc::sandbox_gone);
  CHECK(back.message == e.message);
  CHECK(warren::error::from_string("something else").code == errc::internal);
}

TEST_CASE("preview domains are lower-case DNS names", "[names]") {
  using warren::wire::validate_preview_domain;
  CHECK_FALSE(validate_preview_domain("localhost"));
  CHECK_FALSE(validate_preview_domain("preview.example.com"));
  for (auto bad : {"", ".localhost", "localhost.", "a..b", "Local", "a_b", "a/b", "a:80"})
    CHECK(validate_preview_domain(bad).code == warren::errc::invalid_argument);
  CHECK(validate_preview_domain(std::string(201, 'a')).code == warren::errc::invalid_argument);
}
