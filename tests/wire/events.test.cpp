#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "wire/events.hpp"

using namespace warren::wire;

namespace {

// The events of the v1 golden journal (tests/fixtures/journal-v1.hex): one of every kind.
std::vector<envelope> golden_v1() {
  return {
      {1, 1764400000000, false, sandbox_created{"demo", 7}},
      {2, 1764400000100, false, exec_started{1, {"sh", "-c", "echo hi"}, "/workspace", {"TOKEN"}, 5000}},
      {3, 1764400000200, false, exec_finished{1, 0, 0, false, false, 12, 3, 0, ""}},
      {4, 1764400000300, false, exec_finished{2, -1, 9, true, true, 5000, 1 << 20, 17, "lost"}},
      {5, 1764400000400, false, sandbox_destroyed{"demo", 7}},
  };
}

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string unhex(const std::string& h) {
  std::string out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

}  // namespace

TEST_CASE("every event kind survives encode and decode", "[codec]") {
  for (auto& e : golden_v1()) {
    auto d = decode_envelope(encode_envelope(e));
    INFO(event_kind(e.body));
    REQUIRE(d.error.empty());
    REQUIRE(d.value);
    CHECK(*d.value == e);
  }
}

TEST_CASE("the v1 golden journal still decodes to the same events", "[codec][replay]") {
  std::ifstream in(std::string(WARREN_FIXTURES_DIR) + "/journal-v1.hex");
  REQUIRE(in);
  auto expected = golden_v1();
  std::string line;
  std::size_t i = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    REQUIRE(i < expected.size());
    auto d = decode_envelope(unhex(line));
    REQUIRE(d.value);
    CHECK(*d.value == expected[i]);
    ++i;
  }
  CHECK(i == expected.size());
}

TEST_CASE("corrupt journal bytes are reported, not thrown", "[codec]") {
  CHECK_FALSE(decode_envelope("").value);
  CHECK_FALSE(decode_envelope("abc").error.empty());
  auto bytes = encode_envelope(golden_v1()[1]);
  bytes.resize(16);  // A segment table that promises more than is there.
  auto d = decode_envelope(bytes);
  CHECK_FALSE(d.value);
  CHECK_FALSE(d.error.empty());
}

// Regenerates the fixture (only for a new schema version): build/bin/warren_unit_tests "[.golden]"
TEST_CASE("write the v1 golden journal", "[.golden]") {
  std::ofstream out(std::string(WARREN_FIXTURES_DIR) + "/journal-v1.hex");
  out << "# Journal events of schema v1, one encoded envelope per line (hex). Never edit: add a\n"
         "# new file for a new schema version; every file must keep decoding.\n";
  for (auto& e : golden_v1()) out << hex(encode_envelope(e)) << "\n";
  REQUIRE(out.good());
}
