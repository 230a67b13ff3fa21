#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "wire/events.hpp"
#include "wire/snapshots.hpp"

using namespace warren::wire;

namespace {

// The events of the v1 golden journal (tests/fixtures/journal-v1.hex): one of every kind.
std::vector<envelope> golden_v1() {
  return {
      {1, 1764400000000, false, sandbox_created{"demo", 7}},
      {2, 1764400000100, false, exec_started{1, {"sh", "-c", "echo hi"}, "/workspace", {"TOKEN"}, 5000}},
      {3, 1764400000200, false, exec_finished{1, 0, 0, false, false, 12, 3, 0, ""}},
      {4, 1764400000300, false, exec_finished{2, -1, 9, true, true, 5000, 1 << 20, 17, "lost", false}},
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

// Schema v2 added hibernation, waking and configuration.
std::vector<envelope> golden_v2() {
  auto all = golden_v1();
  all.push_back({6, 1764400000500, false, sandbox_configured{60000, false, "demo", 7}});
  all.push_back({7, 1764400000600, false, sandbox_hibernated{7, "idle", "demo"}});
  all.push_back({8, 1764400000700, false, sandbox_woke{7, "demo"}});
  all.push_back({9, 1764400000800, false, sandbox_configured{600000, true, "demo", 7, 1 << 30, 512, 1500}});
  all.push_back({10, 1764400000900, false, exec_finished{3, -1, 9, false, false, 40, 0, 0, "", true}});
  return all;
}

// Schema v3 added the disk limit to configuration.
std::vector<envelope> golden_v3() {
  auto all = golden_v2();
  all.push_back({11, 1764400001000, false, sandbox_configured{600000, true, "demo", 7, 1 << 30, 512, 1500, 20ull << 30}});
  return all;
}

// Schema v4 added the session to exec_started (and its cwd is empty when the session's applied).
std::vector<envelope> golden_v4() {
  auto all = golden_v3();
  all.push_back({12, 1764400001100, false, exec_started{4, {"/bin/bash", "-c", "cd src && make"}, "", {"CI"}, 0, "build"}});
  return all;
}

// Schema v5 added background processes.
std::vector<envelope> golden_v5() {
  auto all = golden_v4();
  all.push_back({13, 1764400001200, false, process_started{"web", {"npm", "run", "dev"}, "/workspace/app", {"PORT"}}});
  all.push_back({14, 1764400001300, false, process_ended{"web", 2, -1, 15}});
  all.push_back({15, 1764400001400, false, process_ended{"job", 3, 0, 0}});
  return all;
}

// Schema v6 added preview URLs and restart on wake.
std::vector<envelope> golden_v6() {
  auto all = golden_v5();
  all.push_back({16, 1764400001500, false, process_started{"dev", {"npm", "start"}, "/workspace", {}, true}});
  all.push_back({17, 1764400001600, false, port_exposed{8080, "web", "k3vq7m2x9d4c8b6n5p1r0s"}});
  all.push_back({18, 1764400001700, false, port_unexposed{8080}});
  return all;
}

// Schema v7 added the session and auto_cleanup of background processes.
std::vector<envelope> golden_v7() {
  auto all = golden_v6();
  all.push_back({19, 1764400001800, false, process_started{"lint", {"/bin/bash", "-c", "npm run lint"}, "", {"CI"}, false, "build", true}});
  return all;
}

// Schema v8 added snapshots of sandboxes' files and sandboxes created from them.
std::vector<envelope> golden_v8() {
  auto all = golden_v7();
  all.push_back({20, 1764400001900, false,
                 snapshot_taken{21, "base", "demo", 7, 1850, {3000, 8080}, {{"web", {"npm", "start"}}}}});
  all.push_back({21, 1764400002000, false, sandbox_created{"demo-1", 22, 21}});
  all.push_back({22, 1764400002100, false, snapshot_deleted{21}});
  return all;
}

// Schema v9 added restoring a sandbox from a snapshot.
std::vector<envelope> golden_v9() {
  auto all = golden_v8();
  all.push_back({23, 1764400002200, false, sandbox_restored{21}});
  return all;
}

// Schema v10 added backups of directories.
std::vector<envelope> golden_v10() {
  auto all = golden_v9();
  all.push_back({24, 1764400002300, false,
                 backup_created{"0123456789abcdef0123456789abcdef", "demo", 7, "/workspace/app",
                                "5ad7da2a0499a8035d344c4d133decdc5229a310ed679933a296c2e059ca1519", 218, 1765000000000}});
  all.push_back({25, 1764400002400, false, backup_deleted{"0123456789abcdef0123456789abcdef"}});
  return all;
}

void check_golden(const std::string& file, const std::vector<envelope>& expected) {
  std::ifstream in(std::string(WARREN_FIXTURES_DIR) + "/" + file);
  REQUIRE(in);
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

}  // namespace

TEST_CASE("every event kind survives encode and decode", "[codec]") {
  for (auto& e : golden_v10()) {
    auto d = decode_envelope(encode_envelope(e));
    INFO(event_kind(e.body));
    REQUIRE(d.error.empty());
    REQUIRE(d.value);
    CHECK(*d.value == e);
  }
}

TEST_CASE("the golden journals of every schema version still decode to the same events", "[codec][replay]") {
  check_golden("journal-v1.hex", golden_v1());
  check_golden("journal-v2.hex", golden_v2());
  check_golden("journal-v3.hex", golden_v3());
  check_golden("journal-v4.hex", golden_v4());
  check_golden("journal-v5.hex", golden_v5());
  check_golden("journal-v6.hex", golden_v6());
  check_golden("journal-v7.hex", golden_v7());
  check_golden("journal-v8.hex", golden_v8());
  check_golden("journal-v9.hex", golden_v9());
  check_golden("journal-v10.hex", golden_v10());
}

TEST_CASE("every event kind has a JSON form and a summary for the journal tools", "[codec]") {
  for (auto& e : golden_v10()) {
    auto json = event_json(e.body);
    CHECK(json.front() == '{');
    CHECK(json.back() == '}');
    CHECK(json.find(std::string("\"kind\":\"") + event_kind(e.body) + "\"") != std::string::npos);
    CHECK_FALSE(event_summary(e.body).empty());
  }
  exec_started odd{1, {"sh", "-c", "echo \"hi\"\n"}, "/", {}, 0};
  // A preview token is the URL's secret: journal readers never see it.
  auto exposed = event_json(port_exposed{8080, "web", "secret-token"});
  CHECK(exposed.find("secret-token") == std::string::npos);
  CHECK(event_summary(port_exposed{8080, "web", "secret-token"}).find("secret-token") == std::string::npos);
  CHECK(event_json(odd).find(R"(["sh","-c","echo \"hi\"\n"])") != std::string::npos);
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
TEST_CASE("write the newest golden journal", "[.golden]") {
  std::ofstream out(std::string(WARREN_FIXTURES_DIR) + "/journal-v10.hex");
  out << "# Journal events of schema v10, one encoded envelope per line (hex). Never edit: add a\n"
         "# new file for a new schema version; every file must keep decoding.\n";
  for (auto& e : golden_v10()) out << hex(encode_envelope(e)) << "\n";
  REQUIRE(out.good());
}

TEST_CASE("snapshots round-trip and an unknown version or garbage is no snapshot", "[codec][snapshot]") {
  sandbox_snapshot s;
  s.seq = 42;
  s.name = "demo";
  s.sandbox_id = 7;
  s.exec_count = 9;
  s.open_execs = {8, 9};
  s.sleep_after_ms = 1000;
  s.hibernated = true;
  s.hibernations = 3;
  s.restores = 2;
  s.memory_bytes = 1 << 30;
  s.pids_max = 512;
  s.cpu_millis = 1500;
  s.disk_bytes = 20ull << 30;
  s.processes = {{"web", {"npm", "start"}, 0, 0, 0, true, true}, {"job", {"make"}, 1, 2, 0, false}};
  s.ports = {{3000, "app", "abc"}, {8080, "", "def"}};
  auto back = decode_sandbox_snapshot(encode_snapshot(s));
  REQUIRE(back);
  CHECK(*back == s);
  auto future = s;
  future.version = 99;
  CHECK_FALSE(decode_sandbox_snapshot(encode_snapshot(future)));
  CHECK_FALSE(decode_sandbox_snapshot("nonsense"));
  registry_snapshot r;
  r.seq = 5;
  r.next_id = 12;
  r.entries = {{"a", 1, 10, 600000, false, true}, {"b", 11, 20, 1000, true, false}};
  r.snapshots = {{{12, "base", "a", 1, 900, {3000}, {{"web", {"npm", "start"}}}}, 1234}};
  r.backups = {{{"0123456789abcdef0123456789abcdef", "a", 1, "/workspace", "ab", 10, 99}, 1235}};
  auto rb = decode_registry_snapshot(encode_snapshot(r));
  REQUIRE(rb);
  CHECK(*rb == r);
}
