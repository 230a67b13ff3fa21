// The actor core through its facade (no CAF in this file): registry, sandbox actors, input
// gate and journal, with a fake runtime in place of warren-init.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <future>
#include <mutex>

#include "actors/core.hpp"
#include "storage/journal.hpp"
#include "storage/layout.hpp"
#include "test_dir.hpp"
#include "wire/events.hpp"

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
  std::unique_ptr<core> c;

  fixture() { open(); }
  ~fixture() { close(); }

  void open() {
    REQUIRE_FALSE(storage::prepare_layout(dir.path + "/data", layout));
    error err;
    journal = storage::journal::open({layout.journal_dir(), true}, err);
    REQUIRE(journal);
    c = core::start(core_options{}, *journal, layout, runtime, err);
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
    c->get_sandbox(name, true, r.cb());
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
  f.c->get_sandbox("demo", true, a.cb());
  f.c->get_sandbox("demo", true, b.cb());
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
  REQUIRE(reg.size() == 1);
  CHECK(std::get<wire::sandbox_created>(reg[0].body).name == "demo");
  auto own = f.events(ia.id);
  REQUIRE(own.size() == 1);
  CHECK(std::holds_alternative<wire::sandbox_created>(own[0].body));
}

TEST_CASE("invalid names are refused and nothing is journaled or started", "[registry]") {
  fixture f;
  for (auto name : {"", "Demo", "../x", "a b"}) {
    reply<sandbox_info> r;
    f.c->get_sandbox(name, true, r.cb());
    auto [e, info] = r.get();
    CHECK(e.code == errc::invalid_name);
  }
  reply<sandbox_info> missing;
  f.c->get_sandbox("absent", false, missing.cb());
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
  REQUIRE(ev.size() == 2);
  auto& started = std::get<wire::exec_started>(ev[1].body);
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
  REQUIRE(ev.size() == 3);
  CHECK(std::get<wire::exec_finished>(ev[2].body).exit_code == 3);

  exec_request bad;
  reply<exec_ticket> refused;
  f.c->begin_exec("demo", info.id, bad, refused.cb());
  CHECK(refused.get().first.code == errc::invalid_argument);
  CHECK(f.events(info.id).size() == 3);
}

TEST_CASE("a failed start is reported and the next call tries again", "[lifecycle]") {
  fixture f;
  f.runtime.fail_with = make_error(errc::start_failed, "no overlay");
  reply<sandbox_info> r;
  f.c->get_sandbox("demo", true, r.cb());
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
  CHECK(all[0].status == sandbox_status::stopped);
  f.get("demo");  // Loads the actor, which recovers.
  auto ev = f.events(info.id);
  REQUIRE(ev.size() == 3);
  auto& lost = std::get<wire::exec_finished>(ev[2].body);
  CHECK(lost.exec_id == 1);
  CHECK(lost.failed.find("lost") == 0);
}
