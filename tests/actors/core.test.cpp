// The actor core through its facade (no CAF in this file): registry, sandbox actors, input
// gate and journal, with a fake runtime in place of warren-init.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <future>
#include <atomic>
#include <mutex>

#include "actors/core.hpp"
#include "storage/journal.hpp"
#include "storage/layout.hpp"
#include "test_dir.hpp"
#include "wire/events.hpp"
#include "wire/snapshots.hpp"

using namespace warren;
using namespace warren::actors;

namespace {

// Starts succeed (or fail) when the test says so; stops complete at once.
class fake_runtime final : public sandbox_runtime {
 public:
  bool hold_starts = false;
  error fail_with;

  void start(const sandbox_spec& spec, std::function<void(const error&)> started,
             std::function<void(const std::string&)> exited) override {
    std::unique_lock lock(mutex_);
    ++starts;
    last_spec = spec;
    if (hold_starts) held_.push_back(std::move(started));
    else {
      lock.unlock();
      started(fail_with);
    }
  }
  void stop(std::uint64_t, std::function<void()> stopped) override {
    {
      std::lock_guard lock(mutex_);
      ++stops;
    }
    stopped();
  }
  std::uint64_t cpu_usage_us(std::uint64_t) override { return cpu_us.load(); }
  error update_limits(std::uint64_t, const sandbox_limits&) override { return {}; }
  sandbox_usage resource_usage(std::uint64_t) override {
    sandbox_usage r;
    r.cpu_us = cpu_us.load();
    return r;
  }
  std::atomic<std::uint64_t> cpu_us{0};

  void release_starts() {
    std::vector<std::function<void(const error&)>> held;
    {
      std::lock_guard lock(mutex_);
      held.swap(held_);
    }
    for (auto& f : held) f({});
  }
  int start_count() {
    std::lock_guard lock(mutex_);
    return starts;
  }

  int starts = 0, stops = 0;
  sandbox_spec last_spec;

 private:
  std::mutex mutex_;
  std::vector<std::function<void(const error&)>> held_;
};

template <class Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 500 && !pred(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return pred();
}

template <class T>
struct reply {
  std::promise<std::pair<error, T>> p;
  callback<T> cb() {
    return [this](const error& e, T v) { p.set_value({e, std::move(v)}); };
  }
  std::pair<error, T> get() {
    auto f = p.get_future();
    REQUIRE(f.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    return f.get();
  }
};

struct fixture {
  test_dir dir;
  storage::layout layout;
  std::unique_ptr<storage::journal> journal;
  fake_runtime runtime;
  core_options options;
  std::unique_ptr<core> c;

  fixture() { open(); }
  ~fixture() { close(); }

  void open() {
    REQUIRE_FALSE(storage::prepare_layout(dir.path + "/data", layout));
    error err;
    journal = storage::journal::open({layout.journal_dir(), true}, err);
    REQUIRE(journal);
    c = core::start(options, *journal, layout, runtime, err);
    REQUIRE(c);
  }
  void close() {
    if (!c) return;
    std::promise<void> done;
    c->shutdown([&] { done.set_value(); });
    done.get_future().wait_for(std::chrono::seconds(10));
    c.reset();
    journal.reset();
  }

  std::vector<wire::envelope> events(std::uint64_t stream) {
    std::vector<wire::envelope> out;
    for (auto& [seq, bytes] : journal->read(stream)) out.push_back(*wire::decode_envelope(bytes).value);
    return out;
  }

  sandbox_info get(const std::string& name) {
    reply<sandbox_info> r;
    c->get_sandbox(name, true, {}, r.cb());
    auto [e, info] = r.get();
    REQUIRE_FALSE(e);
    return info;
  }
};

}  // namespace

TEST_CASE("get-or-create journals the creation and starts the sandbox once for concurrent callers", "[registry]") {
  fixture f;
  f.runtime.hold_starts = true;
  reply<sandbox_info> a, b;
  f.c->get_sandbox("demo", true, {}, a.cb());
  f.c->get_sandbox("demo", true, {}, b.cb());
  // Both wait behind the one start (input gate); release it.
  for (int i = 0; i < 200 && f.runtime.start_count() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(f.runtime.start_count() == 1);
  f.runtime.release_starts();
  auto [ea, ia] = a.get();
  auto [eb, ib] = b.get();
  REQUIRE_FALSE(ea);
  REQUIRE_FALSE(eb);
  CHECK(ia.id == ib.id);
  CHECK(ia.status == sandbox_status::running);
  CHECK(f.runtime.last_spec.dir == f.layout.sandbox_dir(ia.id));
  auto reg = f.events(0);
  REQUIRE(reg.size() == 2);
  CHECK(std::get<wire::sandbox_created>(reg[0].body).name == "demo");
  CHECK(std::get<wire::sandbox_configured>(reg[1].body).sleep_after_ms == 600000);
  auto own = f.events(ia.id);
  REQUIRE(own.size() == 2);
  CHECK(std::holds_alternative<wire::sandbox_created>(own[0].body));
  CHECK(std::holds_alternative<wire::sandbox_configured>(own[1].body));
}

TEST_CASE("invalid names are refused and nothing is journaled or started", "[registry]") {
  fixture f;
  for (auto name : {"", "Demo", "../x", "a b"}) {
    reply<sandbox_info> r;
    f.c->get_sandbox(name, true, {}, r.cb());
    auto [e, info] = r.get();
    CHECK(e.code == errc::invalid_name);
  }
  reply<sandbox_info> missing;
  f.c->get_sandbox("absent", false, {}, missing.cb());
  CHECK(missing.get().first.code == errc::not_found);
  CHECK(f.events(0).empty());
  CHECK(f.runtime.start_count() == 0);
}

TEST_CASE("an exec is journaled before its ticket is returned, and its end after", "[exec]") {
  fixture f;
  auto info = f.get("demo");
  exec_request req;
  req.argv = {"echo", "hi"};
  req.env = {{"SECRET", "v"}};
  reply<exec_ticket> t;
  f.c->begin_exec("demo", info.id, req, t.cb());
  auto [e, ticket] = t.get();
  REQUIRE_FALSE(e);
  CHECK(ticket.exec_id == 1);
  auto ev = f.events(info.id);
  REQUIRE(ev.size() == 3);
  auto& started = std::get<wire::exec_started>(ev[2].body);
  CHECK(started.argv == req.argv);
  CHECK(started.env_names == std::vector<std::string>{"SECRET"});

  exec_outcome o;
  o.exit_code = 3;
  reply<bool> done;
  f.c->end_exec("demo", info.id, ticket.exec_id, o, done.cb());
  auto [e2, ok] = done.get();
  REQUIRE_FALSE(e2);
  CHECK(ok);
  ev = f.events(info.id);
  REQUIRE(ev.size() == 4);
  CHECK(std::get<wire::exec_finished>(ev[3].body).exit_code == 3);

  exec_request bad;
  reply<exec_ticket> refused;
  f.c->begin_exec("demo", info.id, bad, refused.cb());
  CHECK(refused.get().first.code == errc::invalid_argument);
  CHECK(f.events(info.id).size() == 4);
}

TEST_CASE("a failed start is reported and the next call tries again", "[lifecycle]") {
  fixture f;
  f.runtime.fail_with = make_error(errc::start_failed, "no overlay");
  reply<sandbox_info> r;
  f.c->get_sandbox("demo", true, {}, r.cb());
  auto [e, info] = r.get();
  CHECK(e.code == errc::start_failed);
  CHECK(e.message == "no overlay");
  f.runtime.fail_with = {};
  auto again = f.get("demo");
  CHECK(again.status == sandbox_status::running);
  CHECK(f.runtime.start_count() == 2);
}

TEST_CASE("destroy erases the journal stream and outdated capabilities fail with sandbox_gone", "[lifecycle]") {
  fixture f;
  auto info = f.get("demo");
  reply<bool> d;
  f.c->destroy("demo", d.cb());
  auto [e, existed] = d.get();
  REQUIRE_FALSE(e);
  CHECK(existed);
  CHECK(f.events(info.id).empty());
  CHECK(f.runtime.stops >= 1);
  reply<bool> again;
  f.c->destroy("demo", again.cb());
  CHECK_FALSE(again.get().second);  // Idempotent.

  auto fresh = f.get("demo");
  CHECK(fresh.id != info.id);
  reply<exec_ticket> t;
  exec_request req;
  req.argv = {"true"};
  f.c->begin_exec("demo", info.id, req, t.cb());
  CHECK(t.get().first.code == errc::sandbox_gone);
}

TEST_CASE("after a restart the registry knows its sandboxes and closes execs that were running", "[replay]") {
  fixture f;
  auto info = f.get("demo");
  exec_request req;
  req.argv = {"sleep", "100"};
  reply<exec_ticket> t;
  f.c->begin_exec("demo", info.id, req, t.cb());
  REQUIRE_FALSE(t.get().first);
  f.close();  // As if the daemon stopped while the exec ran.
  f.open();
  reply<std::vector<sandbox_info>> l;
  f.c->list(l.cb());
  auto [e, all] = l.get();
  REQUIRE(all.size() == 1);
  CHECK(all[0].name == "demo");
  CHECK(all[0].id == info.id);
  // It was running when the daemon stopped, so the new registry woke it by itself.
  CHECK(eventually([&] { return f.runtime.start_count() == 2; }));
  auto ev = f.events(info.id);
  REQUIRE(ev.size() == 4);
  auto& lost = std::get<wire::exec_finished>(ev[3].body);
  CHECK(lost.exec_id == 1);
  CHECK(lost.failed.find("lost") == 0);
}

TEST_CASE("an idle sandbox hibernates after sleep_after and the next call wakes it", "[lifecycle][hibernate]") {
  fixture f;
  reply<sandbox_info> created;
  f.c->get_sandbox("nap", true, {1000, false, true, {}}, created.cb());
  auto [e, info] = created.get();
  REQUIRE_FALSE(e);
  CHECK(info.sleep_after_ms == 1000);
  // Idle for a second: it hibernates by itself, journaled in both streams.
  REQUIRE(eventually([&] { return f.runtime.stops >= 1; }));
  auto own = f.events(info.id);
  REQUIRE(eventually([&] {
    own = f.events(info.id);
    return std::holds_alternative<wire::sandbox_hibernated>(own.back().body);
  }));
  CHECK(std::get<wire::sandbox_hibernated>(own.back().body).reason == "idle");
  CHECK(std::holds_alternative<wire::sandbox_hibernated>(f.events(0).back().body));
  reply<std::vector<sandbox_info>> l;
  f.c->list(l.cb());
  CHECK(l.get().second.at(0).status == sandbox_status::hibernated);

  // An exec wakes it transparently: one call, no error.
  exec_request req;
  req.argv = {"true"};
  reply<exec_ticket> t;
  f.c->begin_exec("nap", info.id, req, t.cb());
  auto [te, ticket] = t.get();
  REQUIRE_FALSE(te);
  CHECK(f.runtime.start_count() == 2);
  own = f.events(info.id);
  CHECK(std::holds_alternative<wire::sandbox_woke>(own[own.size() - 2].body));
  CHECK(std::holds_alternative<wire::exec_started>(own.back().body));
}

TEST_CASE("a running exec, CPU use or keep_alive keep a sandbox awake", "[lifecycle][hibernate]") {
  fixture f;
  reply<sandbox_info> created;
  f.c->get_sandbox("busy", true, {1000, false, true, {}}, created.cb());
  auto info = created.get().second;
  exec_request req;
  req.argv = {"sleep", "100"};
  reply<exec_ticket> t;
  f.c->begin_exec("busy", info.id, req, t.cb());
  REQUIRE_FALSE(t.get().first);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  CHECK(f.runtime.stops == 0);  // The exec is still open.
  reply<sandbox_info> refused;
  f.c->hibernate("busy", info.id, refused.cb());
  CHECK(refused.get().first.code == errc::busy);

  reply<sandbox_info> kept;
  f.c->get_sandbox("kept", true, {1000, true, true, {}}, kept.cb());
  REQUIRE_FALSE(kept.get().first);
  reply<sandbox_info> cpu;
  f.c->get_sandbox("cpu", true, {1000, false, true, {}}, cpu.cb());
  REQUIRE_FALSE(cpu.get().first);
  for (int i = 0; i < 25; ++i) {  // Background CPU use, as a build would show in its cgroup.
    f.runtime.cpu_us += 1000;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(f.runtime.stops == 0);
  CHECK(eventually([&] { return f.runtime.stops == 1; }));  // Once the CPU is quiet, "cpu" sleeps.
  reply<std::vector<sandbox_info>> l;
  f.c->list(l.cb());
  for (auto& s : l.get().second) {
    INFO(s.name);
    CHECK((s.status == sandbox_status::hibernated) == (s.name == "cpu"));
  }
}

TEST_CASE("settings are validated and journaled", "[lifecycle]") {
  fixture f;
  reply<sandbox_info> bad;
  f.c->get_sandbox("x", true, {10, false, true, {}}, bad.cb());
  CHECK(bad.get().first.code == errc::invalid_argument);
  auto info = f.get("x");
  reply<sandbox_info> r;
  f.c->configure("x", info.id, {3600000, true, true, {}}, r.cb());
  auto [e, after] = r.get();
  REQUIRE_FALSE(e);
  CHECK(after.keep_alive);
  CHECK(after.sleep_after_ms == 3600000);
  auto cfg = std::get<wire::sandbox_configured>(f.events(info.id).back().body);
  CHECK(cfg.keep_alive);
  f.close();
  f.open();
  reply<std::vector<sandbox_info>> l;
  f.c->list(l.cb());
  CHECK(l.get().second.at(0).keep_alive);  // Known from the registry stream alone.
}

TEST_CASE("a sandbox whose journal does not replay needs repair and the others keep working", "[replay][faults]") {
  fixture f;
  auto broken = f.get("broken");
  auto fine = f.get("fine");
  f.close();
  {
    error err;
    auto j = storage::journal::open({f.layout.journal_dir(), true}, err);
    REQUIRE(j);
    std::promise<error> p;
    storage::journal_batch b;
    b.appends.push_back({broken.id, j->last_seq(broken.id) + 1, {"not an envelope!"}});
    j->append(std::move(b), [&](const error& e) { p.set_value(e); });
    REQUIRE_FALSE(p.get_future().get());
  }
  f.open();
  exec_request req;
  req.argv = {"true"};
  reply<exec_ticket> t;
  f.c->begin_exec("broken", broken.id, req, t.cb());
  auto [e, ticket] = t.get();
  CHECK(e.code == errc::needs_repair);
  reply<std::vector<sandbox_info>> l;
  f.c->list(l.cb());
  auto all = l.get().second;
  CHECK(all.at(0).status == sandbox_status::needs_repair);
  reply<exec_ticket> ok;
  f.c->begin_exec("fine", fine.id, req, ok.cb());
  CHECK_FALSE(ok.get().first);
  reply<core::check_report> check;
  f.c->check_journals(check.cb());
  auto report = check.get().second;
  CHECK(report.checked == 3);
  REQUIRE(report.problems.size() == 1);
  CHECK(report.problems[0].find("sandbox broken") == 0);
  // Destroying it is the way out.
  reply<bool> d;
  f.c->destroy("broken", d.cb());
  CHECK(d.get().second);
}

namespace {
std::uint64_t exec_true(fixture& f, const sandbox_info& info) {
  exec_request req;
  req.argv = {"true"};
  reply<exec_ticket> t;
  f.c->begin_exec(info.name, info.id, req, t.cb());
  auto [e, ticket] = t.get();
  REQUIRE_FALSE(e);
  reply<bool> done;
  f.c->end_exec(info.name, info.id, ticket.exec_id, exec_outcome{}, done.cb());
  REQUIRE_FALSE(done.get().first);
  return ticket.exec_id;
}

error store_snapshot(fixture& f, std::uint64_t stream, std::string bytes) {
  std::promise<error> p;
  storage::journal_batch b;
  b.snapshots.emplace_back(stream, std::move(bytes));
  f.journal->append(std::move(b), [&](const error& e) { p.set_value(e); });
  return p.get_future().get();
}
}  // namespace

TEST_CASE("state snapshots are taken with the events and waking replays only the tail", "[replay][snapshot]") {
  fixture f;
  f.close();
  f.options.snapshot_every = 5;
  f.options.registry_snapshot_every = 3;
  f.open();
  auto info = f.get("snap");
  for (int i = 0; i < 6; ++i) exec_true(f, info);
  auto stored = f.journal->load_snapshot(info.id);
  REQUIRE(stored);
  auto snap = wire::decode_sandbox_snapshot(*stored);
  REQUIRE(snap);
  CHECK(snap->seq >= 5);
  CHECK(snap->name == "snap");

  f.get("other");  // A third and fourth registry event: the registry snapshots too.
  CHECK(f.journal->load_snapshot(0));

  // An unreadable snapshot is ignored: the whole stream is replayed (execs 1-6 are there).
  f.close();
  f.options.snapshot_every = 1000;
  {
    error err;
    f.journal = storage::journal::open({f.layout.journal_dir(), true}, err);
    REQUIRE_FALSE(store_snapshot(f, info.id, "garbage, not a snapshot"));
    f.journal.reset();
  }
  f.open();
  CHECK(exec_true(f, info) == 7);

  // Proof that rehydration starts from the snapshot: plant one whose state differs from what
  // a full replay gives (exec_count 1000 at the current seq), then wake the sandbox.
  f.close();
  {
    error err;
    f.journal = storage::journal::open({f.layout.journal_dir(), true}, err);
    auto planted = *snap;
    planted.seq = f.journal->last_seq(info.id);
    planted.exec_count = 1000;
    planted.open_execs.clear();
    REQUIRE_FALSE(store_snapshot(f, info.id, wire::encode_snapshot(planted)));
    f.journal.reset();
  }
  f.open();
  CHECK(exec_true(f, info) == 1001);
}

TEST_CASE("the registry rebuilds from its snapshot and the events after it", "[replay][snapshot]") {
  fixture f;
  f.close();
  f.options.registry_snapshot_every = 4;
  f.open();
  for (auto name : {"a", "b", "c", "d"}) f.get(name);
  reply<bool> d;
  f.c->destroy("b", d.cb());
  REQUIRE(d.get().second);
  auto snap = wire::decode_registry_snapshot(*f.journal->load_snapshot(0));
  REQUIRE(snap);
  f.close();
  f.open();
  reply<std::vector<sandbox_info>> l;
  f.c->list(l.cb());
  auto all = l.get().second;
  REQUIRE(all.size() == 3);
  CHECK(all[0].name == "a");
  CHECK(all[1].name == "c");
  CHECK(all[2].name == "d");
  CHECK(f.get("e").id == 5);  // Ids are never reused, also across a snapshot.
}
