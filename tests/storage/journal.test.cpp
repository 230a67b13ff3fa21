#include <catch2/catch.hpp>

#include <sys/mount.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "storage/journal.hpp"
#include "test_dir.hpp"

using namespace warren;
using namespace warren::storage;

namespace {

error append_sync(journal& j, journal_batch b) {
  std::promise<error> p;
  j.append(std::move(b), [&](const error& e) { p.set_value(e); });
  return p.get_future().get();
}

journal_batch one(std::uint64_t stream, std::uint64_t seq, std::string record) {
  journal_batch b;
  b.appends.push_back({stream, seq, {std::move(record)}});
  return b;
}

std::unique_ptr<journal> open_at(const std::string& path) {
  error err;
  auto j = journal::open({path, true}, err);
  REQUIRE(j);
  return j;
}

}  // namespace

TEST_CASE("appended records are read back in order and survive a reopen", "[journal]") {
  test_dir dir;
  {
    auto j = open_at(dir.path + "/j");
    REQUIRE_FALSE(append_sync(*j, one(1, 1, "a")));
    journal_batch b;
    b.appends.push_back({1, 2, {"b", "c"}});
    REQUIRE_FALSE(append_sync(*j, std::move(b)));
    CHECK(j->last_seq(1) == 3);
  }
  auto j = open_at(dir.path + "/j");
  auto all = j->read(1);
  REQUIRE(all.size() == 3);
  CHECK(all[0] == std::make_pair(std::uint64_t{1}, std::string("a")));
  CHECK(all[2] == std::make_pair(std::uint64_t{3}, std::string("c")));
  CHECK(j->read(1, 3).size() == 1);
}

TEST_CASE("an append with a sequence gap or a repeat is refused and writes nothing", "[journal]") {
  test_dir dir;
  auto j = open_at(dir.path + "/j");
  REQUIRE_FALSE(append_sync(*j, one(5, 1, "x")));
  CHECK(append_sync(*j, one(5, 3, "gap")).code == errc::internal);
  CHECK(append_sync(*j, one(5, 1, "again")).code == errc::internal);
  // A refused batch is atomic: its other appends are not written either.
  journal_batch b;
  b.appends.push_back({6, 1, {"ok-looking"}});
  b.appends.push_back({5, 9, {"bad"}});
  CHECK(append_sync(*j, std::move(b)));
  CHECK(j->read(6).empty());
  CHECK(j->read(5).size() == 1);
  CHECK_FALSE(append_sync(*j, one(5, 2, "y")));
}

TEST_CASE("streams never collide, whatever their ids", "[journal]") {
  test_dir dir;
  auto j = open_at(dir.path + "/j");
  for (std::uint64_t s : {1ull, 256ull, 257ull, 1ull << 40}) REQUIRE_FALSE(append_sync(*j, one(s, 1, std::to_string(s))));
  for (std::uint64_t s : {1ull, 256ull, 257ull, 1ull << 40}) {
    auto r = j->read(s);
    REQUIRE(r.size() == 1);
    CHECK(r[0].second == std::to_string(s));
  }
}

TEST_CASE("erasing a stream in a batch removes it atomically with the batch's appends", "[journal]") {
  test_dir dir;
  auto j = open_at(dir.path + "/j");
  REQUIRE_FALSE(append_sync(*j, one(2, 1, "a")));
  REQUIRE_FALSE(append_sync(*j, one(3, 1, "keep")));
  journal_batch b;
  b.erase_streams.push_back(2);
  b.appends.push_back({0, 1, {"destroyed 2"}});
  REQUIRE_FALSE(append_sync(*j, std::move(b)));
  CHECK(j->read(2).empty());
  CHECK(j->read(3).size() == 1);
  CHECK(j->read(0).size() == 1);
  // The erased stream starts again at 1.
  CHECK_FALSE(append_sync(*j, one(2, 1, "new")));
}

TEST_CASE("concurrent appends from many writers share synced writes (group commit)", "[journal]") {
  test_dir dir;
  auto j = open_at(dir.path + "/j");
  constexpr int writers = 8, per_writer = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int w = 0; w < writers; ++w)
    threads.emplace_back([&, w] {
      for (int i = 1; i <= per_writer; ++i)
        if (append_sync(*j, one(100 + w, i, "r"))) ++failures;
    });
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  auto st = j->get_stats();
  CHECK(st.batches == writers * per_writer);
  CHECK(st.writes <= st.batches);
  for (int w = 0; w < writers; ++w) CHECK(j->read(100 + w).size() == per_writer);
}

TEST_CASE("the journal reports an unopenable path clearly", "[journal]") {
  error err;
  auto j = journal::open({"/proc/warren-cannot-be-here/j", true}, err);
  CHECK_FALSE(j);
  CHECK(err.code == errc::journal_failed);
  CHECK(err.message.find("/proc/warren-cannot-be-here/j") != std::string::npos);
}

TEST_CASE("a full disk fails appends cleanly, loses nothing acknowledged, and a restart with room recovers", "[journal][faults]") {
  test_dir dir;
  auto mnt = dir.path + "/tiny";
  std::filesystem::create_directories(mnt);
  // Root only (CI runs as root): a small file system that the journal can fill. (RocksDB
  // resumes only once 64 MB are free again, hence the sizes.)
  REQUIRE(::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=96m") == 0);
  struct unmount {
    std::string path;
    ~unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } guard{mnt};
  // Room an operator can free later.
  {
    std::ofstream filler(mnt + "/filler");
    filler << std::string(72 << 20, 'f');
  }
  auto j = open_at(mnt + "/j");
  std::string record(64 * 1024, 'r');
  std::uint64_t seq = 0;
  error failure;
  for (int i = 0; i < 2000 && !failure; ++i) {
    failure = append_sync(*j, one(1, seq + 1, record));
    if (!failure) ++seq;
  }
  REQUIRE(failure);  // The disk filled up.
  CHECK(failure.code == errc::journal_failed);
  CHECK(j->read(1).size() == seq);  // Nothing half-written: every acknowledged record, no other.
  // Still full: refused again, cleanly (no crash, nothing half-written).
  CHECK(append_sync(*j, one(1, seq + 1, "small")).code == errc::journal_failed);
  CHECK(j->read(1).size() == seq);
  // Room is made and the journal reopened (a daemon restart): every acknowledged record is
  // there, and appends work again. (RocksDB 7.8 does not resume this WAL error in place.)
  j.reset();
  std::filesystem::remove(mnt + "/filler");
  j = open_at(mnt + "/j");
  CHECK(j->read(1).size() == seq);
  CHECK_FALSE(append_sync(*j, one(1, seq + 1, "small")));
}
