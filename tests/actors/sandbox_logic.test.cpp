#include <catch2/catch.hpp>

#include "actors/sandbox_logic.hpp"

using namespace warren;
using namespace warren::actors;

namespace {
exec_request req(std::vector<std::string> argv) {
  exec_request r;
  r.argv = std::move(argv);
  return r;
}
}  // namespace

TEST_CASE("exec requests are validated with errors that name the field", "[exec]") {
  CHECK_FALSE(validate_exec(req({"echo", "hi"})));
  struct bad {
    exec_request r;
    std::string says;
  };
  auto with_env = [](std::string k, std::string v) {
    auto r = req({"true"});
    r.env.emplace_back(std::move(k), std::move(v));
    return r;
  };
  auto with_cwd = [](std::string cwd) {
    auto r = req({"true"});
    r.cwd = std::move(cwd);
    return r;
  };
  auto long_timeout = req({"true"});
  long_timeout.timeout_ms = 8ull * 24 * 3600 * 1000;
  for (auto& [r, says] : {bad{req({}), "empty"}, bad{req({""}), "empty"},
                          bad{req({"a", std::string("b\0c", 3)}), "argument 1"},
                          bad{with_env("1X", "v"), "name '1X'"}, bad{with_env("A=B", "v"), "name 'A=B'"},
                          bad{with_env("", "v"), "is invalid"},
                          bad{with_env("K", std::string("v\0", 2)), "value of environment variable K"},
                          bad{with_cwd("relative"), "absolute"}, bad{long_timeout, "timeout"},
                          bad{req(std::vector<std::string>(5000, "x")), "5000 arguments"},
                          bad{req({std::string(2 << 20, 'x')}), "bytes"}}) {
    auto e = validate_exec(r);
    INFO(says);
    REQUIRE(e);
    CHECK(e.code == errc::invalid_argument);
    CHECK(e.message.find(says) != std::string::npos);
  }
}

TEST_CASE("decide_exec numbers execs, merges the environment and journals no values", "[exec][security]") {
  sandbox_record rec;
  rec.name = "demo";
  rec.id = 4;
  rec.exec_count = 2;
  auto r = req({"env"});
  r.env = {{"TOKEN", "hunter2"}, {"PATH", "/custom"}};
  auto d = decide_exec(rec, r);
  CHECK(d.ticket.exec_id == 3);
  CHECK(d.ticket.sandbox_id == 4);
  CHECK(d.ticket.cwd == "/workspace");
  // Request variables override defaults; defaults keep their place.
  CHECK(d.ticket.env[0] == "PATH=/custom");
  CHECK(std::find(d.ticket.env.begin(), d.ticket.env.end(), "TOKEN=hunter2") != d.ticket.env.end());
  CHECK(std::find(d.ticket.env.begin(), d.ticket.env.end(), "HOSTNAME=demo") != d.ticket.env.end());
  // The journaled event has the names, never the values.
  CHECK(d.event.env_names == std::vector<std::string>{"TOKEN", "PATH"});
  auto bytes = wire::encode_envelope({1, 1, false, d.event});
  CHECK(bytes.find("hunter2") == std::string::npos);
  CHECK(bytes.find("/custom") == std::string::npos);
}

TEST_CASE("replaying a sandbox stream rebuilds its state", "[replay]") {
  sandbox_record rec;
  std::vector<wire::envelope> journal = {
      {1, 100, false, wire::sandbox_created{"demo", 9}},
      {2, 110, false, wire::exec_started{1, {"true"}, "/workspace", {}, 0}},
      {3, 120, false, wire::exec_finished{1, 0, 0, false, false, 1, 0, 0, ""}},
      {4, 130, false, wire::exec_started{2, {"sleep", "9"}, "/workspace", {}, 0}},
  };
  for (auto& e : journal) apply(rec, e);
  CHECK(rec.name == "demo");
  CHECK(rec.id == 9);
  CHECK(rec.created_at_ms == 100);
  CHECK(rec.last_seq == 4);
  CHECK(rec.exec_count == 2);
  CHECK(rec.open_execs == std::set<std::uint64_t>{2});
}

TEST_CASE("execs left open by a stopped daemon are closed as lost on recovery", "[replay]") {
  sandbox_record rec;
  rec.open_execs = {3, 5};
  auto events = decide_recovery(rec);
  REQUIRE(events.size() == 2);
  auto& first = std::get<wire::exec_finished>(events[0]);
  CHECK(first.exec_id == 3);
  CHECK(first.failed.find("lost") == 0);
  for (auto& f : events) apply(rec, wire::envelope{1, 1, false, f});
  CHECK(rec.open_execs.empty());
  CHECK(decide_recovery(rec).empty());
}

TEST_CASE("processes: history bounded, ends recorded, running ones lost on recovery", "[replay][processes]") {
  sandbox_record rec;
  std::uint64_t seq = 0;
  auto put = [&](wire::event e) { apply(rec, wire::envelope{++seq, seq, false, std::move(e)}); };
  put(wire::process_started{"web", {"npm", "run", "dev"}, "/workspace", {"PORT"}});
  put(wire::process_started{"job", {"make"}, "/workspace", {}});
  put(wire::process_ended{"job", 1, 2, 0});
  REQUIRE(rec.processes.size() == 2);
  CHECK(rec.processes[1].status == 1);
  CHECK(rec.processes[1].exit_code == 2);
  // The same id again replaces the old entry.
  put(wire::process_started{"job", {"make", "test"}, "/workspace", {}});
  REQUIRE(rec.processes.size() == 2);
  CHECK(rec.processes[1].argv == std::vector<std::string>{"make", "test"});
  CHECK(rec.processes[1].status == 0);
  // Many ended ones: the running ones stay, the oldest ended go.
  for (int i = 0; i < 150; ++i) {
    put(wire::process_started{"t" + std::to_string(i), {"true"}, "/", {}});
    put(wire::process_ended{"t" + std::to_string(i), 1, 0, 0});
  }
  CHECK(rec.processes.size() == max_processes);
  CHECK(rec.processes[0].process_id == "web");
  CHECK(rec.processes.back().process_id == "t149");
  auto lost = decide_recovery(rec);
  REQUIRE(lost.size() == 2);  // web and job were running.
  for (auto& e : lost) CHECK(std::get<wire::process_ended>(e).status == 3);
  for (auto& e : lost) put(e);
  CHECK(decide_recovery(rec).empty());
  // Snapshots carry them.
  auto back = from_snapshot(to_snapshot(rec));
  CHECK(back.processes == rec.processes);
}

TEST_CASE("processes with auto_cleanup leave the state when they end, lost ones too", "[replay][processes]") {
  sandbox_record rec;
  std::uint64_t seq = 0;
  auto put = [&](wire::event e) { apply(rec, wire::envelope{++seq, seq, false, std::move(e)}); };
  put(wire::process_started{"build", {"make"}, "/workspace", {}, false, "ci", true});
  put(wire::process_started{"web", {"npm", "start"}, "/workspace", {}, false, "", true});
  put(wire::process_started{"keep", {"true"}, "/workspace", {}});
  REQUIRE(rec.processes.size() == 3);
  CHECK(rec.processes[0].auto_cleanup);
  // A snapshot taken while they run keeps the flag, so their end still removes them.
  rec = from_snapshot(to_snapshot(rec));
  put(wire::process_ended{"build", 1, 0, 0});
  put(wire::process_ended{"keep", 1, 0, 0});
  REQUIRE(rec.processes.size() == 2);
  CHECK(rec.processes[0].process_id == "web");
  CHECK(rec.processes[1].process_id == "keep");
  for (auto& e : decide_recovery(rec)) put(e);  // web is lost: gone as well.
  REQUIRE(rec.processes.size() == 1);
  CHECK(rec.processes[0].process_id == "keep");
}

TEST_CASE("exposed ports: replace by port, revoke, snapshot, validation", "[replay][ports]") {
  sandbox_record rec;
  rec.name = "demo";
  std::uint64_t seq = 0;
  auto put = [&](wire::event e) { apply(rec, wire::envelope{++seq, seq, false, std::move(e)}); };
  put(wire::port_exposed{8080, "web", "t1"});
  put(wire::port_exposed{3000, "", "t2"});
  put(wire::port_exposed{8080, "api", "t3"});  // Again: a new token replaces the old one.
  REQUIRE(rec.ports.size() == 2);
  CHECK(rec.ports[0] == wire::exposed_port{3000, "", "t2"});
  CHECK(rec.ports[1] == wire::exposed_port{8080, "api", "t3"});
  put(wire::port_unexposed{3000});
  put(wire::port_unexposed{9999});  // Unknown: nothing happens.
  REQUIRE(rec.ports.size() == 1);
  CHECK(from_snapshot(to_snapshot(rec)).ports == rec.ports);
  CHECK(record_json(rec).find("t3") == std::string::npos);  // Tokens stay out of time travel.
  CHECK(record_json(rec).find("\"exposedPorts\":[8080]") != std::string::npos);

  CHECK_FALSE(validate_expose(rec, 1, ""));
  CHECK_FALSE(validate_expose(rec, 65535, "dev-server_2"));
  CHECK(validate_expose(rec, 0, "").code == errc::invalid_argument);
  CHECK(validate_expose(rec, 65536, "").code == errc::invalid_argument);
  CHECK(validate_expose(rec, 80, "Web").code == errc::invalid_argument);
  CHECK(validate_expose(rec, 80, std::string(64, 'a')).code == errc::invalid_argument);
  for (std::uint32_t p = 1; rec.ports.size() < max_exposed_ports; ++p) put(wire::port_exposed{p, "", "t"});
  auto full = validate_expose(rec, 20000, "");
  CHECK(full.code == errc::invalid_argument);
  CHECK(full.message.find("unexpose") != std::string::npos);
  CHECK_FALSE(validate_expose(rec, 8080, ""));  // Re-exposing a known port is fine.
}
