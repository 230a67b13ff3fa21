#include "actors/sandbox_actor.hpp"

#include <spdlog/spdlog.h>

#include "actors/core.hpp"
#include "actors/messages.hpp"
#include "actors/sandbox_logic.hpp"
#include "storage/journal.hpp"

#include <sys/random.h>

namespace warren::actors {
namespace {

// A preview URL's secret: 22 characters of lower-case base32 (110 random bits), valid in a
// DNS label.
std::string new_preview_token() {
  unsigned char bytes[22];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    auto n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0) got += static_cast<std::size_t>(n);
  }
  static constexpr char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  std::string token;
  for (auto b : bytes) token += alphabet[b & 31];
  return token;
}

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

  std::uint64_t snapshot_seq = 0;  // Seq of the newest stored snapshot.

  // Idle detection: one timer at a time (delayed_send cannot be cancelled).
  bool idle_timer_armed = false;
  std::uint64_t cpu_seen_us = 0;
  int holds = 0;  // File operations in progress (core::hold); not journaled.
  int soft_holds = 0;  // Preview requests: keep it from idling, not from an explicit sleep.

  static inline const char* name = "warren.sandbox";
};

using sandbox_actor = caf::stateful_actor<sandbox_state>;

std::chrono::milliseconds request_timeout(const sandbox_state& s) {
  return std::chrono::milliseconds(s.options.request_timeout_ms);
}

sandbox_info make_info(const sandbox_state& s) {
  return sandbox_info{s.rec.name,          s.rec.id, s.status, s.rec.created_at_ms, s.last_activity_ms,
                      s.rec.config.sleep_after_ms, s.rec.config.keep_alive};
}

void publish(sandbox_actor* self) {
  self->send(self->state.registry, wr_status_atom::value, make_info(self->state));
}

wire::envelope next_envelope(const sandbox_record& rec, std::uint64_t offset, wire::event ev) {
  return wire::envelope{rec.last_seq + 1 + offset, now_ms(), false, std::move(ev)};
}

// Journals `events` in one synced batch, applies them, then continues with `then`. Holds the
// input gate until `then` has run.
void write(sandbox_actor* self, std::vector<wire::event> events, std::function<void(const error&)> then) {
  auto& st = self->state;
  if (st.retired) return then(make_error(errc::unavailable, "the sandbox is stopping; retry"));
  storage::stream_append app{st.rec.id, st.rec.last_seq + 1, {}};
  std::vector<wire::envelope> envs;
  for (auto& ev : events) {
    envs.push_back(next_envelope(st.rec, envs.size(), std::move(ev)));
    app.records.push_back(wire::encode_envelope(envs.back()));
  }
  st.gate.hold();
  auto envs_for_snapshot = envs;
  auto done = st.writes.track(caf::actor_cast<caf::actor>(self),
                              [self, envs = std::move(envs), then = std::move(then)](const error& e) {
                                if (!e)
                                  for (auto& env : envs) apply(self->state.rec, env);
                                then(e);
                                self->state.gate.release();
                              });
  storage::journal_batch batch;
  // Every snapshot_every events the state after this batch goes into the same batch, so a
  // snapshot never runs ahead of (or behind) the events it summarizes.
  auto after = st.rec.last_seq + app.records.size();
  if (after >= st.snapshot_seq + st.options.snapshot_every) {
    auto next = st.rec;
    for (auto& env : envs_for_snapshot) apply(next, env);
    batch.snapshots.emplace_back(st.rec.id, wire::encode_snapshot(to_snapshot(next)));
    st.snapshot_seq = after;
  }
  batch.appends.push_back(std::move(app));
  st.journal->append(std::move(batch), std::move(done));
}

// Journals an event that the registry records too (hibernated, woke): the registry writes
// both streams in one batch, so the two can never disagree. Holds the gate meanwhile.
void write_with_registry(sandbox_actor* self, wire::event ev, std::function<void(const error&)> then) {
  auto& st = self->state;
  auto env = next_envelope(st.rec, 0, std::move(ev));
  auto bytes = wire::encode_envelope(env);
  st.gate.hold();
  auto finish = [self, env, then = std::move(then)](const error& e) {
    if (!e) apply(self->state.rec, env);
    then(e);
    self->state.gate.release();
  };
  self->request(st.registry, request_timeout(st), wr_journal_atom::value, st.rec.name, st.rec.id, bytes)
      .then([finish](bool) mutable { finish({}); }, [finish](caf::error& e) mutable { finish(from_caf(e)); });
}

void touch(sandbox_actor* self) { self->state.last_activity_ms = now_ms(); }

void arm_idle_timer(sandbox_actor* self) {
  auto& st = self->state;
  if (st.idle_timer_armed || st.status != sandbox_status::running || st.rec.config.keep_alive) return;
  auto now = now_ms();
  auto deadline = idle_deadline_ms(st.rec, st.last_activity_ms);
  st.idle_timer_armed = true;
  st.cpu_seen_us = st.runtime->cpu_usage_us(st.rec.id);
  self->delayed_send(self, std::chrono::milliseconds(deadline > now ? deadline - now : 0), wr_idle_atom::value);
}

void hibernate(sandbox_actor* self, const std::string& reason, std::function<void(const error&)> then);

// Starts the runtime if it is not running (waking the sandbox if it sleeps), then runs
// `then`. Holds the gate while the init starts.
void ensure_running(sandbox_actor* self, std::function<void(const error&)> then) {
  auto& st = self->state;
  if (st.retired) return then(make_error(errc::unavailable, "the sandbox is stopping; retry"));
  if (st.status == sandbox_status::running) return then({});
  if (st.rec.hibernated) {
    // Waking is journaled first: after a crash the sandbox is known to be awake and is
    // brought back with the daemon.
    return write_with_registry(self, wire::sandbox_woke{st.rec.id, st.rec.name},
                               [self, then = std::move(then)](const error& e) {
                                 if (e) return then(e);
                                 spdlog::info("event=sandbox_woke sandbox={} id={}", self->state.rec.name,
                                              self->state.rec.id);
                                 ensure_running(self, then);
                               });
  }
  // A restore that was journaled but not yet put in place (a crash in between) is finished
  // now; one that never reached the journal is dropped.
  if (auto e = st.runtime->settle_restore(st.spec.dir, st.rec.restores)) return then(e);
  st.status = sandbox_status::starting;
  st.spec.memory_bytes = st.rec.config.limits.memory_bytes;  // Limits apply from each start.
  st.spec.pids_max = st.rec.config.limits.pids_max;
  st.spec.cpu_millis = st.rec.config.limits.cpu_millis;
  st.spec.disk_bytes = st.rec.config.limits.disk_bytes;
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
  self->delayed_send(self, std::chrono::milliseconds(st.options.start_timeout_ms), wr_started_atom::value, gen,
                     static_cast<std::uint8_t>(errc::start_failed),
                     std::string("the sandbox's init did not come up in time"));
}

// Stops the runtime; `then` runs once nothing of the sandbox runs any more. Holds the gate.
void stop_runtime(sandbox_actor* self, std::function<void()> then) {
  auto& s = self->state;
  s.gate.hold();
  ++s.generation;  // Late callbacks of the old init are now stale.
  s.on_started = nullptr;
  s.on_stopped = [self, then = std::move(then)]() {
    self->state.status = sandbox_status::stopped;
    then();
    self->state.gate.release();
  };
  caf::actor me = caf::actor_cast<caf::actor>(self);
  s.runtime->stop(s.rec.id, [me] { caf::anon_send(me, wr_stopped_atom::value); });
}

void hibernate(sandbox_actor* self, const std::string& reason, std::function<void(const error&)> then) {
  auto& st = self->state;
  if (st.retired) return then(make_error(errc::unavailable, "the sandbox is stopping"));
  if (st.rec.hibernated) return then({});
  if (!st.rec.open_execs.empty() || st.holds > 0)
    return then(make_error(errc::busy, "a command or file operation is running in sandbox " + st.rec.name +
                                           "; it can hibernate once they have finished"));
  write_with_registry(self, wire::sandbox_hibernated{st.rec.id, reason, st.rec.name},
                      [self, reason, then = std::move(then)](const error& e) {
                        if (e) return then(e);
                        stop_runtime(self, [self, reason, then] {
                          auto& s = self->state;
                          s.status = sandbox_status::hibernated;
                          spdlog::info("event=sandbox_hibernated sandbox={} id={} reason={}", s.rec.name, s.rec.id,
                                       reason);
                          publish(self);
                          then({});
                          // Commands that queued meanwhile wake it again; if none did, the actor
                          // goes away and the sandbox costs only its registry entry. (Messages
                          // that arrive after this are retried by the registry on a new actor.)
                          self->state.gate.run([self] {
                            if (self->state.status == sandbox_status::hibernated) self->quit();
                          });
                        });
                      });
}

// A sandbox whose journal does not replay: nothing runs, nothing is written, every request
// gets the needs_repair error, and the registry is told. A stop (destroy, shutdown) ends it.
caf::behavior broken_behavior(sandbox_actor* self, error why) {
  self->state.status = sandbox_status::needs_repair;
  publish(self);
  auto reason = to_caf(why);
  self->set_default_handler([reason](caf::scheduled_actor*, caf::message_view&) -> caf::result<caf::message> {
    return reason;
  });
  return {
      [=](wr_stop_atom) {
        self->quit();
        return true;
      },
  };
}

caf::behavior sandbox_behavior(sandbox_actor* self) {
  auto& st = self->state;
  // Rehydration: the newest snapshot, then the events after it. Blocking RocksDB reads on a
  // worker thread, once per spawn. A snapshot that does not decode, has another version or
  // belongs elsewhere is ignored, and the whole stream is replayed.
  std::uint64_t from = 1;
  if (auto bytes = st.journal->load_snapshot(st.rec.id)) {
    auto snap = wire::decode_sandbox_snapshot(*bytes);
    if (snap && snap->sandbox_id == st.rec.id && snap->name == st.rec.name) {
      st.rec = from_snapshot(*snap);
      st.snapshot_seq = snap->seq;
      from = snap->seq + 1;
    } else {
      spdlog::warn("event=snapshot_ignored sandbox={} reason=\"unreadable or unknown version\"", st.spec.name);
    }
  }
  for (auto& [seq, bytes] : st.journal->read(st.rec.id, from)) {
    auto d = wire::decode_envelope(bytes);
    if (d.skipped) {
      st.rec.last_seq = seq;
      continue;
    }
    if (!d.value || d.value->seq != seq) {
      auto why = d.value ? "its seq field says " + std::to_string(d.value->seq) : d.error;
      spdlog::error("event=replay_failed sandbox={} seq={} reason=\"{}\"", st.spec.name, seq, why);
      return broken_behavior(self, make_error(errc::needs_repair, "the journal of sandbox " + st.spec.name +
                                                                      " does not replay at event " +
                                                                      std::to_string(seq) + ": " + why));
    }
    apply(st.rec, *d.value);
  }
  st.last_activity_ms = now_ms();
  st.status = st.rec.hibernated ? sandbox_status::hibernated : sandbox_status::stopped;
  if (auto events = decide_recovery(st.rec); !events.empty()) {
    spdlog::info("event=work_lost sandbox={} execs_and_processes={}", st.spec.name, events.size());
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
          s.runtime->stop(s.rec.id, [] {});  // A half-started init (e.g. timed out) must not linger.
        } else {
          s.status = sandbox_status::running;
          spdlog::info("event=sandbox_running sandbox={} id={}", s.spec.name, s.rec.id);
          arm_idle_timer(self);
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
      [=](wr_idle_atom) {
        auto& s = self->state;
        s.idle_timer_armed = false;
        if (s.status != sandbox_status::running || s.retired) return;
        // CPU used since the timer was armed counts as activity: work in the background is
        // never put to sleep.
        auto cpu = s.runtime->cpu_usage_us(s.rec.id);
        if (cpu > s.cpu_seen_us) touch(self);
        if (s.holds + s.soft_holds > 0 || !may_hibernate(s.rec, now_ms(), s.last_activity_ms)) return arm_idle_timer(self);
        s.gate.run([self] {
          // Re-check: a command may have run while this waited at the gate.
          auto& st = self->state;
          if (st.holds + st.soft_holds > 0 || !may_hibernate(st.rec, now_ms(), st.last_activity_ms))
            return arm_idle_timer(self);
          hibernate(self, "idle", [self](const error& e) {
            if (e) spdlog::warn("event=hibernate_failed sandbox={} reason=\"{}\"", self->state.rec.name, e.message);
          });
        });
      },
      [=](wr_start_atom) -> caf::result<sandbox_info> {
        auto rp = self->make_response_promise<sandbox_info>();
        self->state.gate.run([=]() mutable {
          touch(self);
          ensure_running(self, [=](const error& e) mutable {
            if (e) rp.deliver(to_caf(e));
            else rp.deliver(make_info(self->state));
          });
        });
        return rp;
      },
      [=](wr_info_atom) { return make_info(self->state); },
      [=](wr_config_atom, sandbox_settings& settings) -> caf::result<sandbox_info> {
        auto rp = self->make_response_promise<sandbox_info>();
        self->state.gate.run([=]() mutable {
          auto& s = self->state;
          sandbox_config c = s.rec.config;
          if (settings.change_lifecycle) {
            c.sleep_after_ms = settings.sleep_after_ms;
            c.keep_alive = settings.keep_alive;
          }
          if (settings.change_limits) {
            auto& l = settings.limits;
            if (l.memory_bytes) c.limits.memory_bytes = l.memory_bytes;
            if (l.pids_max) c.limits.pids_max = l.pids_max;
            if (l.cpu_millis) c.limits.cpu_millis = l.cpu_millis;
            if (l.disk_bytes) c.limits.disk_bytes = l.disk_bytes;
          }
          if (auto e = validate_config(c)) return (void)rp.deliver(to_caf(e));
          if (c == s.rec.config) return (void)rp.deliver(make_info(s));
          // A running sandbox gets new limits first; what the kernel refuses is not journaled.
          if (settings.change_limits && s.status == sandbox_status::running)
            if (auto e = s.runtime->update_limits(s.rec.id, c.limits)) return (void)rp.deliver(to_caf(e));
          if (settings.change_lifecycle) touch(self);
          write_with_registry(self,
                              wire::sandbox_configured{c.sleep_after_ms, c.keep_alive, self->state.rec.name,
                                                       self->state.rec.id, c.limits.memory_bytes, c.limits.pids_max,
                                                       c.limits.cpu_millis, c.limits.disk_bytes},
                              [=](const error& e) mutable {
            if (e) return (void)rp.deliver(to_caf(e));
            arm_idle_timer(self);
            publish(self);
            rp.deliver(make_info(self->state));
            // Configuring a sleeping sandbox does not wake it; its actor goes away again.
            self->state.gate.run([self] {
              if (self->state.status == sandbox_status::hibernated) self->quit();
            });
          });
        });
        return rp;
      },
      [=](wr_sleep_atom) -> caf::result<sandbox_info> {
        auto rp = self->make_response_promise<sandbox_info>();
        self->state.gate.run([=]() mutable {
          hibernate(self, "requested", [=](const error& e) mutable {
            if (e) rp.deliver(to_caf(e));
            else rp.deliver(make_info(self->state));
          });
        });
        return rp;
      },
      [=](wr_exec_atom, exec_request& req) -> caf::result<exec_ticket> {
        auto rp = self->make_response_promise<exec_ticket>();
        self->state.gate.run([=]() mutable {
          if (auto e = validate_exec(req)) return (void)rp.deliver(to_caf(e));
          touch(self);
          ensure_running(self, [=](const error& e) mutable {
            if (e) return (void)rp.deliver(to_caf(e));
            auto d = decide_exec(self->state.rec, req);
            write(self, {wire::event{d.event}}, [=](const error& e) mutable {
              if (e) return (void)rp.deliver(to_caf(e));
              spdlog::debug("event=exec_started sandbox={} exec={}", self->state.spec.name, d.ticket.exec_id);
              rp.deliver(d.ticket);
            });
          });
        });
        return rp;
      },
      [=](wr_hold_atom, bool soft) -> caf::result<std::uint64_t> {
        auto rp = self->make_response_promise<std::uint64_t>();
        self->state.gate.run([=]() mutable {
          touch(self);
          ensure_running(self, [=](const error& e) mutable {
            if (e) return (void)rp.deliver(to_caf(e));
            ++(soft ? self->state.soft_holds : self->state.holds);
            rp.deliver(self->state.rec.id);
          });
        });
        return rp;
      },
      [=](wr_proc_atom, process_update& u) -> caf::result<bool> {
        auto rp = self->make_response_promise<bool>();
        self->state.gate.run([=]() mutable {
          wire::event e = u.status == 0 ? wire::event{wire::process_started{u.process_id, u.argv, u.cwd, u.env_names,
                                                                            u.restart_on_wake, u.session,
                                                                            u.auto_cleanup}}
                                        : wire::event{wire::process_ended{u.process_id, u.status, u.exit_code, u.signal}};
          write(self, {std::move(e)}, [=](const error& err) mutable {
            if (err) return (void)rp.deliver(to_caf(err));
            rp.deliver(true);
          });
        });
        return rp;
      },
      [=](wr_procs_atom) -> std::vector<process_update> {
        std::vector<process_update> out;
        for (auto& p : self->state.rec.processes)
          out.push_back(process_update{p.process_id, p.argv, "", {}, p.status, p.exit_code, p.signal, p.restart_on_wake, "",
                                      p.auto_cleanup});
        return out;
      },
      [=](wr_snap_atom, std::uint64_t snapshot_id, std::string& dir) -> caf::result<snapshot_info> {
        // Through the gate: no start, stop or hibernation of this sandbox meanwhile. The
        // files are captured as they are (frozen if it runs); it is neither started nor woken.
        auto rp = self->make_response_promise<snapshot_info>();
        self->state.gate.run([=]() mutable {
          auto& st = self->state;
          snapshot_info info;
          info.id = snapshot_id;
          info.sandbox = st.spec.name;
          info.sandbox_id = st.rec.id;
          if (auto e = st.runtime->snapshot_files(st.rec.id, st.spec.dir, dir, info.pause_us))
            return (void)rp.deliver(to_caf(e));
          for (auto& p : st.rec.ports) info.ports.push_back(p.port);
          for (auto& p : st.rec.processes)
            if (p.status == 0) {
              info.process_ids.push_back(p.process_id);
              info.process_argvs.push_back(p.argv);
            }
          rp.deliver(std::move(info));
        });
        return rp;
      },
      [=](wr_restore_atom, std::uint64_t snapshot_id, std::string& snapshot_dir) -> caf::result<sandbox_info> {
        auto rp = self->make_response_promise<sandbox_info>();
        self->state.gate.run([=]() mutable {
          auto& st = self->state;
          if (st.retired) return (void)rp.deliver(to_caf(make_error(errc::unavailable, "the sandbox is stopping")));
          if (!st.rec.open_execs.empty() || st.holds > 0)
            return (void)rp.deliver(to_caf(make_error(
                errc::busy, "a command or file operation is running in sandbox " + st.rec.name +
                                "; it can be restored once they have finished")));
          touch(self);
          // The snapshot's files are staged beside the sandbox's first (the sandbox runs on
          // meanwhile); then it stops, the restore is journaled, and the copy takes its place.
          auto count = st.rec.restores + 1;
          if (auto e = st.runtime->stage_restore(snapshot_dir, st.spec.dir, count)) return (void)rp.deliver(to_caf(e));
          auto stopped = [=]() mutable {
            auto& s = self->state;
            std::vector<wire::event> events{wire::sandbox_restored{snapshot_id}};
            for (auto& p : s.rec.processes)
              if (p.status == 0) events.push_back(wire::process_ended{p.process_id, 3, 0, 0});
            write(self, std::move(events), [=](const error& e) mutable {
              auto& s = self->state;
              // Settling with the count now in the state puts the copy in place, or (when the
              // journal refused) drops it.
              if (auto f = s.runtime->settle_restore(s.spec.dir, s.rec.restores))
                spdlog::error("event=restore_settle_failed sandbox={} reason=\"{}\"", s.rec.name, f.message);
              if (e) return (void)rp.deliver(to_caf(e));
              spdlog::info("event=sandbox_restored sandbox={} id={} snapshot={}", s.rec.name, s.rec.id, snapshot_id);
              ensure_running(self, [=](const error& e) mutable {
                if (e) rp.deliver(to_caf(e));
                else rp.deliver(make_info(self->state));
              });
            });
          };
          if (st.status == sandbox_status::running || st.status == sandbox_status::starting) stop_runtime(self, stopped);
          else stopped();
        });
        return rp;
      },
      [=](wr_ports_atom, std::uint8_t op, std::uint32_t port, std::string& label) -> caf::result<std::vector<exposed_port>> {
        auto rp = self->make_response_promise<std::vector<exposed_port>>();
        self->state.gate.run([=]() mutable {
          auto& rec = self->state.rec;
          auto find = [&]() -> const wire::exposed_port* {
            for (auto& p : rec.ports)
              if (p.port == port) return &p;
            return nullptr;
          };
          // A sleeping sandbox's actor goes away again once it answered.
          auto done = [=](std::vector<exposed_port> out) mutable {
            rp.deliver(std::move(out));
            self->state.gate.run([self] {
              if (self->state.status == sandbox_status::hibernated) self->quit();
            });
          };
          std::vector<exposed_port> out;
          if (static_cast<ports_op>(op) == ports_op::list) {
            for (auto& p : rec.ports) out.push_back(exposed_port{p.port, p.label, p.token});
            return done(std::move(out));
          }
          auto* known = find();
          wire::event e;
          if (static_cast<ports_op>(op) == ports_op::unexpose) {
            if (!known) return done({});
            out.push_back(exposed_port{known->port, known->label, known->token});
            e = wire::port_unexposed{port};
          } else {
            if (auto err = validate_expose(rec, port, label)) return (void)rp.deliver(to_caf(err));
            if (known && known->label == label) return done({exposed_port{port, label, known->token}});
            auto token = known ? known->token : new_preview_token();
            out.push_back(exposed_port{port, label, token});
            e = wire::port_exposed{port, label, token};
          }
          touch(self);
          write(self, {std::move(e)}, [=](const error& err) mutable {
            if (err) return (void)rp.deliver(to_caf(err));
            spdlog::info("event={} sandbox={} port={}", op == 1 ? "port_exposed" : "port_unexposed", self->state.rec.name, port);
            done(out);
          });
        });
        return rp;
      },
      [=](wr_release_atom, bool soft) -> bool {
        auto& s = self->state;
        auto& n = soft ? s.soft_holds : s.holds;
        if (n > 0) --n;
        touch(self);
        arm_idle_timer(self);
        return true;
      },
      [=](wr_ended_atom, std::uint64_t exec_id, exec_outcome& outcome) -> caf::result<bool> {
        auto rp = self->make_response_promise<bool>();
        self->state.gate.run([=]() mutable {
          if (!self->state.rec.open_execs.count(exec_id)) return (void)rp.deliver(false);
          touch(self);
          write(self, {wire::event{decide_exec_end(exec_id, outcome)}}, [=](const error& e) mutable {
            if (e) return (void)rp.deliver(to_caf(e));
            spdlog::debug("event=exec_finished sandbox={} exec={} exit={} signal={}", self->state.spec.name,
                          exec_id, outcome.exit_code, outcome.signal);
            arm_idle_timer(self);
            publish(self);
            rp.deliver(true);
          });
        });
        return rp;
      },
      [=](wr_stop_atom) -> caf::result<bool> {
        auto rp = self->make_response_promise<bool>();
        self->state.gate.run([=]() mutable {
          stop_runtime(self, [=]() mutable {
            auto& s = self->state;
            spdlog::info("event=sandbox_stopped sandbox={} id={}", s.spec.name, s.rec.id);
            s.retired = true;
            rp.deliver(true);
            // Commands that queued behind the stop now run and are refused (unavailable)
            // because the actor is retired; the registry retries them or answers for it.
            self->quit();
          });
        });
        return rp;
      },
  };
}

}  // namespace

caf::actor spawn_sandbox(caf::actor_system& system, const sandbox_spec& spec, storage::journal& journal,
                         sandbox_runtime& runtime, const core_options& options, const caf::actor& registry) {
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
