#include <catch2/catch.hpp>

#include "actors/registry_logic.hpp"

using namespace warren;
using namespace warren::actors;

TEST_CASE("the registry replays creates and destroys and never reuses an id", "[registry][replay]") {
  registry_record rec;
  apply(rec, {1, 10, false, wire::sandbox_created{"a", 1}});
  apply(rec, {2, 20, false, wire::sandbox_created{"b", 2}});
  apply(rec, {3, 30, false, wire::sandbox_destroyed{"b", 2}});
  CHECK(rec.names.size() == 1);
  CHECK(rec.names.at("a").id == 1);
  CHECK(rec.names.at("a").created_at_ms == 10);
  CHECK(rec.next_id == 3);
  CHECK(rec.last_seq == 3);
  // A stale destroy of an older incarnation does not remove the current one.
  apply(rec, {4, 40, false, wire::sandbox_created{"b", 3}});
  apply(rec, {5, 50, false, wire::sandbox_destroyed{"b", 2}});
  CHECK(rec.names.at("b").id == 3);
  CHECK(rec.next_id == 4);
}

TEST_CASE("the registry holds 100,000 sandboxes and snapshots them exactly", "[registry][scale]") {
  registry_record rec;
  std::uint64_t seq = 0;
  for (std::uint64_t id = 1; id <= 100000; ++id) {
    auto name = "sandbox-" + std::to_string(id);
    apply(rec, {++seq, id, false, wire::sandbox_created{name, id}});
    if (id % 2 == 0) apply(rec, {++seq, id, false, wire::sandbox_hibernated{id, "idle", name}});
  }
  REQUIRE(rec.names.size() == 100000);
  CHECK(rec.names.at("sandbox-77").hibernated == false);
  CHECK(rec.names.at("sandbox-78").hibernated == true);
  auto bytes = wire::encode_snapshot(to_snapshot(rec));
  CHECK(bytes.size() < 100000 * 100);  // Under 100 bytes a sandbox.
  auto back = wire::decode_registry_snapshot(bytes);
  REQUIRE(back);
  auto restored = from_snapshot(*back);
  CHECK(restored.names.size() == 100000);
  CHECK(restored.next_id == 100001);
  CHECK(restored.last_seq == seq);
  CHECK(restored.names.at("sandbox-78").hibernated);
  CHECK(restored.names.at("sandbox-99999").id == 99999);
}

TEST_CASE("the registry keeps snapshots until deleted, also after their sandbox, and in its snapshot", "[registry][snapshots]") {
  registry_record rec;
  std::uint64_t seq = 0;
  auto put = [&](wire::event e) { apply(rec, wire::envelope{++seq, 1000 + seq, false, std::move(e)}); };
  put(wire::sandbox_created{"src", 1});
  put(wire::snapshot_taken{2, "base", "src", 1, 1500, {8080}, {{"web", {"npm", "start"}}}});
  CHECK(rec.next_id == 3);  // Snapshots and incarnations share the id sequence.
  put(wire::sandbox_created{"fork", 3, 2});
  put(wire::sandbox_destroyed{"src", 1});
  REQUIRE(rec.snapshots.count(2));
  CHECK(rec.snapshots[2].taken.name == "src");
  CHECK(rec.snapshots[2].at_ms == 1002);
  auto back = from_snapshot(*wire::decode_registry_snapshot(wire::encode_snapshot(to_snapshot(rec))));
  CHECK(back.snapshots == rec.snapshots);
  CHECK(back.next_id == 4);
  put(wire::snapshot_deleted{2});
  CHECK(rec.snapshots.empty());
  CHECK(rec.names.count("fork"));
  CHECK_FALSE(validate_snapshot_label(""));
  CHECK_FALSE(validate_snapshot_label("before-upgrade_2"));
  CHECK(validate_snapshot_label("Upper"));
  CHECK(validate_snapshot_label(std::string(64, 'a')));
}
