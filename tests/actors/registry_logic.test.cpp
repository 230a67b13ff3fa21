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
