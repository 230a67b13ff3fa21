#include "actors/sandbox_actor.hpp"

#include <spdlog/spdlog.h>

#include "actors/core.hpp"
#include "actors/messages.hpp"
#include "actors/sandbox_logic.hpp"
#include "storage/journal.hpp"

namespace warren::actors {
namespace {

struct sandbox_state {
  sandbox_spec spec;
  storage::journal* journal = nullptr;   // Borrowed; outlives the actor system.
  sandbox_runtime* runtime = nullptr;    // Borrowed; outlives the actor system.
  core_options options;
  caf::actor registry;

  sandbox_record rec;
  sandbox_status status = sandbox_status::stopped;
  std::uint64_t generation = 0;  // Incremented per runtime start; stale callbacks ignored.
  std::uint64_t last_activity_ms = 0;
  input_gate gate;

  write_tracker writes;
  std::function<void(const error&)> on_started;
  std::function<void()> on_stopped;
  bool retired = false;  // Stopped for good (destroy or daemon shutdown); refuses all work.

  static inline const char* name = "warren.sandbox";
};

using sandbox_actor = caf::stateful_actor<sandbox_state>;

sandbox_info make_info(const sandbox_state& s) {
  return sandbox_info{s.rec.name, s.rec.id, s.status, s.rec.created_at_ms, s.last_activity_ms};
}

void publish(sandbox_actor* self) {
  self->send(self->state.registry, wr_status_atom::value, make_info(self->state));
}

// Journals `events` in one synced batch, applies them, then continues with `then`.
// Closes the input gate for the duration; `then` runs with the gate still closed and the
// gate reopens after it.
void write(sandbox_actor* self, std::vector<wire::event> events,
           std::function<void(const error&)> then) {
  auto& st = self->state;
  if (st.retired) return then(make_error(errc::unavailable, "the sandbox is stopping; retry"));
  storage::stream_append app;
  app.stream = st.rec.id;
  app.first_seq = st.rec.last_seq + 1;
  std::vector<wire::envelope> envs;
  auto at = now_ms();
  for (auto& ev : events) {
    wire::envelope e{app.first_seq + envs.size(), at, false, std::move(ev)};
    app.records.push_back(wire::encode_envelope(e));
    envs.push_back(std::move(e));
  }
  st.gate.hold();
  auto done = st.writes.track(caf::actor_cast<caf::actor>(self),
                              [self, envs = std::move(envs), then = std::move(then)](const error& e) {
                                if (!e)
                                  for (auto& env : envs) apply(self->state.rec, env);
                                then(e);
                                self->state.gate.release();
                              });
  storage::journal_batch batch;
  batch.appends.push_back(std::move(app));
  st.journal->append(std::move(batch), std::move(done));
}

// Starts the runtime if it is not running, then runs `then` (with the gate closed while the
// init starts).
void ensure_running(sandbox_actor* self, std::function<void(const error&)> then) {
  auto& st = self->state;
  if (st.retired) return then(make_error(errc::unavailable, "the sandbox is stopping; retry"));
  if (st.status == sandbox_status::running) return then({});
  st.status = sandbox_status::starting;
  auto gen = ++st.generation;
  st.gate.hold();
  st.on_started = [self, then = std::move(then)](const error& e) {
    then(e);
    self->state.gate.release();
  };
  caf::actor me = caf::actor_cast<caf::actor>(self);
  st.runtime->start(
      st.spec,
      [me, gen](const error& e) {
        caf::anon_send(me, wr_started_atom::value, gen, static_cast<std::uint8_t>(e.code), e.message);
      },
      [me, gen](const std::string& why) { caf::anon_send(me, wr_exited_atom::value, gen, why); });
  // A runtime that never answers must not wedge the sandbox.
  self->delayed_send(self, std::chrono::milliseconds(st.options.start_timeout_ms),
                     wr_started_atom::value, gen, static_cast<std::uint8_t>(errc::start_failed),
                     std::string("the sandbox's init did not come up in time"));
}

caf::behavior sandbox_behavior(sandbox_actor* self) {
  auto& st = self->state;
  // Replay. Blocking RocksDB reads on a worker thread, once per spawn; TODO(perf): state
  // snapshots so that this reads only the tail (durable-sandboxes issue).
  for (auto& [seq, bytes] : st.journal->read(st.rec.id)) {
    auto d = wire::decode_envelope(bytes);
    if (d.skipped) {
      st.rec.last_seq = seq;
      continue;
    }
    if (!d.value) {
      spdlog::error("event=replay_failed sandbox={} seq={} reason=\"{}\"", st.spec.name, seq, d.error);
      self->quit(to_caf(make_error(errc::internal, "journal of sandbox " + st.spec.name + " is unreadable")));
      return {};
    }
    apply(st.rec, *d.value);
  }
  st.last_activity_ms = st.rec.created_at_ms;
  if (!st.rec.open_execs.empty()) {
    std::vector<wire::event> events;
    for (auto& f : decide_recovery(st.rec)) events.emplace_back(std::move(f));
    spdlog::info("event=execs_lost sandbox={} count={}", st.spec.name, events.size());
    write(self, std::move(events), [](const error&) {});
  }

  return {
      [=](wr_synced_atom, std::uint64_t ticket, std::uint8_t code, std::string& msg) {
        self->state.writes.complete(ticket, code, std::move(msg));
      },
      [=](wr_started_atom, std::uint64_t gen, std::uint8_t code, std::string& msg) {
        auto& s = self->state;
        if (gen != s.generation || !s.on_started) return;  // Stale or already answered.
        error e{static_cast<errc>(code), std::move(msg)};
        if (e) {
          s.status = sandbox_status::stopped;
          spdlog::warn("event=sandbox_start_failed sandbox={} reason=\"{}\"", s.spec.name, e.message);
          // A half-started init (e.g. timed out) must not linger.
          s.runtime->stop(s.rec.id, [] {});
        } else {
          s.status = sandbox_status::running;
          spdlog::info("event=sandbox_running sandbox={} id={}", s.spec.name, s.rec.id);
        }
        publish(self);
        auto f = std::exchange(s.on_started, nullptr);
        f(e);
      },
      [=](wr_exited_atom, std::uint64_t gen, std::string& why) {
        auto& s = self->state;
        if (gen != s.generation) return;
        if (s.status == sandbox_status::running)
          spdlog::warn("event=sandbox_init_exited sandbox={} reason=\"{}\"", s.spec.name, why);
        s.status = sandbox_status::stopped;
        publish(self);
      },
      [=](wr_stopped_atom) {
        if (auto f = std::exchange(self->state.on_stopped, nullptr)) f();
      },
      [=](wr_start_atom) -> caf::result<sandbox_info> {
        auto rp = self->make_response_promise<sandbox_info>();
        self->state.gate.run([=]() mutable {
          self->state.last_activity_ms = now_ms();
          ensure_running(self, [=](const error& e) mutable {
            if (e) rp.deliver(to_caf(e));
            else rp.deliver(make_info(self->state));
          });
        });
        return rp;
      },
      [=](wr_info_atom) { return make_info(self->state); },
      [=](wr_exec_atom, exec_request& req) -> caf::result<exec_ticket> {
        auto rp = self->make_response_promise<exec_ticket>();
        self->state.gate.run([=]() mutable {
          if (auto e = validate_exec(req)) return (void)rp.deliver(to_caf(e));
          self->state.last_activity_ms = now_ms();
          ensure_running(self, [=](const error& e) mutable {
            if (e) return (void)rp.deliver(to_caf(e));
            auto d = decide_exec(self->state.rec, req);
            write(self, {wire::event{d.event}}, [=](const error& e) mutable {
              if (e) return (void)rp.deliver(to_caf(e));
              spdlog::debug("event=exec_started sandbox={} exec={}", self->state.spec.name, d.ticket.exec_id);
              publish(self);
              rp.deliver(d.ticket);
            });
          });
        });
        return rp;
      },
      [=](wr_ended_atom, std::uint64_t exec_id, exec_outcome& outcome) -> caf::result<bool> {
        auto rp = self->make_response_promise<bool>();
        self->state.gate.run([=]() mutable {
          if (!self->state.rec.open_execs.count(exec_id)) return (void)rp.deliver(false);
          self->state.last_activity_ms = now_ms();
          write(self, {wire::event{decide_exec_end(exec_id, outcome)}}, [=](const error& e) mutable {
            if (e) return (void)rp.deliver(to_caf(e));
            spdlog::debug("event=exec_finished sandbox={} exec={} exit={} signal={}", self->state.spec.name,
                          exec_id, outcome.exit_code, outcome.signal);
            rp.deliver(true);
          });
        });
        return rp;
      },
      [=](wr_stop_atom) -> caf::result<bool> {
        auto rp = self->make_response_promise<bool>();
        self->state.gate.run([=]() mutable {
          auto& s = self->state;
          s.gate.hold();
          ++s.generation;  // Late callbacks of the old init are now stale.
          s.on_started = nullptr;
          caf::actor me = caf::actor_cast<caf::actor>(self);
          s.on_stopped = [=]() mutable {
            self->state.status = sandbox_status::stopped;
            spdlog::info("event=sandbox_stopped sandbox={} id={}", self->state.spec.name, self->state.rec.id);
            self->state.retired = true;
            rp.deliver(true);
            // Commands that queued behind the stop now run and are refused (unavailable)
            // because the actor is retired; callers retry through the registry.
            self->state.gate.release();
            self->quit();
          };
          s.runtime->stop(s.rec.id, [me] { caf::anon_send(me, wr_stopped_atom::value); });
        });
        return rp;
      },
  };
}

}  // namespace

caf::actor spawn_sandbox(caf::actor_system& system, const sandbox_spec& spec,
                         storage::journal& journal, sandbox_runtime& runtime,
                         const core_options& options, const caf::actor& registry) {
  return system.spawn([spec, &journal, &runtime, options, registry](sandbox_actor* self) {
    auto& st = self->state;
    st.spec = spec;
    st.journal = &journal;
    st.runtime = &runtime;
    st.options = options;
    st.registry = registry;
    st.rec.id = spec.sandbox_id;
    st.rec.name = spec.name;
    return sandbox_behavior(self);
  });
}

error from_caf(const caf::error& e) {
  if (!e) return {};
  if (e.category() == wr_error_atom::value) {
    std::string msg;
    if (e.context().match_elements<std::string>()) msg = e.context().get_as<std::string>(0);
    return error{static_cast<errc>(e.code()), msg};
  }
  if (e == caf::sec::request_timeout)
    return make_error(errc::timeout, "an internal request timed out; the daemon may be overloaded");
  if (e == caf::sec::request_receiver_down)
    return make_error(errc::unavailable, "the sandbox stopped while handling the request; retry");
  return make_error(errc::internal, "internal error (" + caf::to_string(e) + ")");
}

}  // namespace warren::actors
