#include "actors/registry_actor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_set>

#include "actors/core.hpp"
#include "actors/messages.hpp"
#include "actors/sandbox_actor.hpp"
#include "actors/sandbox_logic.hpp"
#include "storage/journal.hpp"
#include "storage/layout.hpp"
#include "wire/names.hpp"

namespace warren::actors {
namespace {

struct registry_state {
  registry_record rec;
  storage::journal* journal = nullptr;       // Borrowed.
  const storage::layout* layout = nullptr;   // Borrowed.
  sandbox_runtime* runtime = nullptr;        // Borrowed.
  core_options options;

  std::unordered_map<std::string, caf::actor> actors;  // Loaded sandboxes only.
  input_gate gate;
  write_tracker writes;
  bool shutting_down = false;
  std::uint64_t snapshot_seq = 0;  // Seq of the newest stored registry snapshot.
  std::unordered_map<std::uint64_t, std::function<void()>> pending_stops;  // By sandbox id.
  std::unordered_set<std::string> destroying;  // Names whose destroy is in progress.
  std::uint64_t reserved_id = 0;  // Ids handed out whose event is not journaled yet.

  static inline const char* name = "warren.registry";
};

using registry_actor = caf::stateful_actor<registry_state>;

std::chrono::milliseconds request_timeout(const registry_state& s) {
  return std::chrono::milliseconds(s.options.request_timeout_ms);
}

std::chrono::milliseconds start_timeout(const registry_state& s) {
  // A wake may journal, then start the init.
  return std::chrono::milliseconds(2 * s.options.request_timeout_ms + s.options.start_timeout_ms);
}

// The next id of the shared sequence (incarnations and snapshots). A snapshot's id is taken
// before its files exist and its event is journaled, while other work goes on.
std::uint64_t take_id(registry_state& s) {
  s.reserved_id = std::max(s.reserved_id, s.rec.next_id);
  return s.reserved_id++;
}

snapshot_info info_of(const registry_state& s, const wire::registry_snapshot::snapshot& snap) {
  auto& t = snap.taken;
  snapshot_info i{t.snapshot_id, t.label, t.name, t.sandbox_id, snap.at_ms, t.pause_us, t.ports, {}, {},
                  s.layout->snapshot_dir(t.snapshot_id)};
  for (auto& p : t.processes) {
    i.process_ids.push_back(p.process_id);
    i.process_argvs.push_back(p.argv);
  }
  return i;
}

backup_info info_of(const wire::registry_snapshot::backup& b) {
  auto& c = b.created;
  return backup_info{c.backup_id, c.name, c.sandbox_id, c.dir, c.sha256, c.bytes, b.at_ms, c.expires_at_ms};
}

caf::actor ensure_actor(registry_actor* self, const std::string& name, std::uint64_t id) {
  auto& s = self->state;
  auto it = s.actors.find(name);
  if (it != s.actors.end()) return it->second;
  sandbox_spec spec{id, name, s.layout->sandbox_dir(id), s.layout->base_dir()};
  auto a = spawn_sandbox(self->system(), spec, *s.journal, *s.runtime, s.options, caf::actor_cast<caf::actor>(self));
  // Linked: the registry traps the exit of a sandbox actor (and forgets it); when the
  // registry itself exits, its sandbox actors exit with it.
  self->link_to(a);
  s.actors.emplace(name, a);
  return a;
}

// Journals registry events (plus changes of other streams) in one synced batch and applies
// the registry events once durable. The gate stays held until `then` has run.
void write(registry_actor* self, std::vector<wire::event> events, storage::journal_batch batch,
           std::function<void(const error&)> then) {
  auto& s = self->state;
  storage::stream_append app{registry_stream, s.rec.last_seq + 1, {}};
  std::vector<wire::envelope> envs;
  auto at = now_ms();
  for (auto& ev : events) {
    wire::envelope e{app.first_seq + envs.size(), at, false, std::move(ev)};
    app.records.push_back(wire::encode_envelope(e));
    envs.push_back(std::move(e));
  }
  auto after = s.rec.last_seq + app.records.size();
  if (after >= s.snapshot_seq + s.options.registry_snapshot_every) {
    auto next = s.rec;  // O(sandboxes), once per registry_snapshot_every events.
    for (auto& env : envs) apply(next, env);
    batch.snapshots.emplace_back(registry_stream, wire::encode_snapshot(to_snapshot(next)));
    s.snapshot_seq = after;
  }
  batch.appends.insert(batch.appends.begin(), std::move(app));
  s.gate.hold();
  auto done = s.writes.track(caf::actor_cast<caf::actor>(self),
                             [self, envs = std::move(envs), then = std::move(then)](const error& e) {
                               if (!e)
                                 for (auto& env : envs) apply(self->state.rec, env);
                               then(e);
                               self->state.gate.release();
                             });
  s.journal->append(std::move(batch), std::move(done));
}

sandbox_info info_of(const std::string& name, const registry_entry& e) {
  auto status = e.needs_repair ? sandbox_status::needs_repair
                : e.hibernated ? sandbox_status::hibernated
                               : static_cast<sandbox_status>(e.status);
  return sandbox_info{name, e.id, status, e.created_at_ms, e.last_activity_ms, e.sleep_after_ms, e.keep_alive};
}

// The entry a capability points at (name and incarnation), or nullptr.
registry_entry* find_incarnation(registry_state& s, const std::string& name, std::uint64_t id) {
  auto it = s.rec.names.find(name);
  if (it == s.rec.names.end() || it->second.id != id) return nullptr;
  return &it->second;
}

error gone(const std::string& name) {
  return make_error(errc::sandbox_gone, "sandbox " + name + " was destroyed; get it again by name to use a new one");
}

error stopping() { return make_error(errc::shutting_down, "the daemon is shutting down"); }

error repair(const std::string& name) {
  return make_error(errc::needs_repair, "the journal of sandbox " + name +
                                            " does not replay; it is left untouched for repair (see `warren journal "
                                            "--check`), or destroy it with `warren rm " + name + "`");
}

// Sends `msg` to the sandbox's actor and delivers the reply. If the actor went away before
// answering (it hibernated and stopped), the call is retried once on a fresh actor.
template <class T>
void forward(registry_actor* self, const std::string& name, std::uint64_t id, caf::message msg,
             caf::response_promise rp, std::chrono::milliseconds timeout, int retries = 2) {
  auto& s = self->state;
  if (s.shutting_down) return (void)rp.deliver(to_caf(stopping()));
  auto* e = find_incarnation(s, name, id);
  if (!e) return (void)rp.deliver(to_caf(gone(name)));
  if (e->needs_repair) return (void)rp.deliver(to_caf(repair(name)));
  auto a = ensure_actor(self, name, id);
  self->request(a, timeout, msg).then(
      [=](T& value) mutable { rp.deliver(std::move(value)); },
      [=](caf::error& err) mutable {
        bool actor_gone = err == caf::sec::request_receiver_down ||
                          (err.category() == wr_error_atom::value &&
                           static_cast<errc>(err.code()) == errc::unavailable && !self->state.shutting_down);
        if (actor_gone && retries > 0) {
          auto it = self->state.actors.find(name);
          if (it != self->state.actors.end() && it->second == a) {
            self->unlink_from(a);
            self->state.actors.erase(it);
          }
          // Through the gate: a destroy in progress finishes first (then the retry finds
          // the sandbox gone instead of starting it again).
          self->state.gate.run([=]() mutable { forward<T>(self, name, id, msg, rp, timeout, retries - 1); });
          return;
        }
        rp.deliver(std::move(err));
      });
}

void handle_get(registry_actor* self, const std::string& name, bool create, const sandbox_settings& settings,
                caf::response_promise rp) {
  auto& s = self->state;
  if (s.shutting_down) return (void)rp.deliver(to_caf(stopping()));
  if (auto e = wire::validate_sandbox_name(name)) return (void)rp.deliver(to_caf(e));
  auto it = s.rec.names.find(name);
  if (it != s.rec.names.end()) {
    if (settings.from_snapshot)
      return (void)rp.deliver(to_caf(make_error(
          errc::already_exists, "sandbox " + name + " exists: a snapshot only applies when a sandbox is created "
                                "(restore it into the existing one, or pick a new name)")));
    if (!settings.start) return (void)rp.deliver(info_of(name, it->second));
    return forward<sandbox_info>(self, name, it->second.id, caf::make_message(wr_start_atom::value), rp,
                                 start_timeout(s));
  }
  if (!create) return (void)rp.deliver(to_caf(make_error(errc::not_found, "no sandbox is called " + name)));
  if (auto e = validate_config({settings.sleep_after_ms, settings.keep_alive, {}})) return (void)rp.deliver(to_caf(e));
  auto from = settings.from_snapshot;
  if (from && !s.rec.snapshots.count(from))
    return (void)rp.deliver(to_caf(make_error(errc::not_found, "no snapshot " + std::to_string(from))));
  auto id = take_id(s);
  // The files first: a crash before the journal entry leaves an orphan directory, which
  // start-up garbage collection removes.
  if (from)
    if (auto e = s.runtime->clone_files(s.layout->snapshot_dir(from), s.layout->sandbox_dir(id)))
      return (void)rp.deliver(to_caf(e));
  wire::sandbox_created created{name, id, from};
  wire::sandbox_configured configured{settings.sleep_after_ms, settings.keep_alive, name, id,
                                      settings.limits.memory_bytes, settings.limits.pids_max,
                                      settings.limits.cpu_millis, settings.limits.disk_bytes};
  // The sandbox's own stream starts with the same facts, in the same atomic batch.
  auto at = now_ms();
  storage::journal_batch batch;
  batch.appends.push_back({id,
                           1,
                           {wire::encode_envelope(wire::envelope{1, at, false, created}),
                            wire::encode_envelope(wire::envelope{2, at, false, configured})}});
  write(self, {created, configured}, std::move(batch), [=](const error& e) mutable {
    if (e) {
      if (from) self->state.runtime->remove_snapshot(self->state.layout->sandbox_dir(id));
      return (void)rp.deliver(to_caf(e));
    }
    if (from) spdlog::info("event=sandbox_created sandbox={} id={} from_snapshot={}", name, id, from);
    else spdlog::info("event=sandbox_created sandbox={} id={}", name, id);
    forward<sandbox_info>(self, name, id, caf::make_message(wr_start_atom::value), rp, start_timeout(self->state));
  });
}

// A sandbox actor's event that the registry records too (hibernated, woke, configured): both
// streams in one batch.
void handle_journal(registry_actor* self, const std::string& name, std::uint64_t id, const std::string& bytes,
                    caf::response_promise rp) {
  auto& s = self->state;
  if (!find_incarnation(s, name, id)) return (void)rp.deliver(to_caf(gone(name)));
  auto d = wire::decode_envelope(bytes);
  if (!d.value) return (void)rp.deliver(to_caf(make_error(errc::internal, "undecodable event from sandbox " + name)));
  storage::journal_batch batch;
  batch.appends.push_back({id, d.value->seq, {bytes}});
  write(self, {d.value->body}, std::move(batch), [rp](const error& e) mutable {
    if (e) rp.deliver(to_caf(e));
    else rp.deliver(true);
  });
}

void handle_destroy(registry_actor* self, const std::string& name, caf::response_promise rp) {
  auto& s = self->state;
  if (s.shutting_down) return (void)rp.deliver(to_caf(stopping()));
  if (auto e = wire::validate_sandbox_name(name)) return (void)rp.deliver(to_caf(e));
  auto it = s.rec.names.find(name);
  if (it == s.rec.names.end()) return (void)rp.deliver(false);
  auto id = it->second.id;
  s.gate.hold();  // Nothing else touches the registry until the destroy is durable.
  s.destroying.insert(name);

  auto erase = [=]() mutable {
    storage::journal_batch batch;
    batch.erase_streams.push_back(id);
    write(self, {wire::sandbox_destroyed{name, id}}, std::move(batch), [=](const error& e) mutable {
      self->state.destroying.erase(name);
      self->state.gate.release();  // The destroy's own hold; write() releases its hold next.
      if (e) return (void)rp.deliver(to_caf(e));
      auto& st = self->state;
      spdlog::info("event=sandbox_destroyed sandbox={} id={}", name, id);
      // Files go after the journal says the sandbox is gone: a crash in between leaves an
      // orphan directory that start-up garbage collection removes, never a sandbox without files.
      auto dir = st.layout->sandbox_dir(id);
      auto remover = self->system().spawn<caf::detached>([dir](caf::event_based_actor*) {
        auto e = storage::remove_tree(dir);
        if (e) spdlog::warn("event=sandbox_files_left dir={} reason=\"{}\"", dir, e.message);
        return caf::behavior{[](wr_destroy_atom) { return true; }};
      });
      auto finish = [=]() mutable {
        self->send_exit(remover, caf::exit_reason::user_shutdown);
        rp.deliver(true);
      };
      self->request(remover, request_timeout(st) * 10, wr_destroy_atom::value)
          .then([=](bool) mutable { finish(); }, [=](caf::error&) mutable { finish(); });
    });
  };

  // Stop the actor (it stops the runtime), then make sure the runtime is stopped even if the
  // actor was not loaded or did not answer.
  auto stop_runtime = [=]() mutable {
    self->state.runtime->stop(id, [me = caf::actor_cast<caf::actor>(self), id] {
      caf::anon_send(me, wr_stop_atom::value, id);
    });
    self->state.pending_stops[id] = erase;  // Run by the (wr_stop, id) that `stop` sends.
  };
  auto a = s.actors.find(name);
  if (a == s.actors.end()) return (void)stop_runtime();
  auto actor = a->second;
  s.actors.erase(a);
  self->unlink_from(actor);
  self->request(actor, request_timeout(s), wr_stop_atom::value)
      .then([=](bool) mutable { stop_runtime(); }, [=](caf::error&) mutable { stop_runtime(); });
}

void handle_snapshot(registry_actor* self, const std::string& name, std::uint64_t id, const std::string& label,
                     caf::response_promise rp) {
  auto& s = self->state;
  if (s.shutting_down) return (void)rp.deliver(to_caf(stopping()));
  if (auto e = validate_snapshot_label(label)) return (void)rp.deliver(to_caf(e));
  auto* entry = find_incarnation(s, name, id);
  if (!entry) return (void)rp.deliver(to_caf(gone(name)));
  if (entry->needs_repair) return (void)rp.deliver(to_caf(repair(name)));
  auto snap_id = take_id(s);
  auto dir = s.layout->snapshot_dir(snap_id);
  auto a = ensure_actor(self, name, id);
  self->request(a, start_timeout(s), wr_snap_atom::value, snap_id, dir)
      .then(
          [=](snapshot_info& got) mutable {
            auto info = got;
            info.label = label;
            wire::snapshot_taken t{snap_id, label, name, id, info.pause_us, info.ports, {}};
            for (std::size_t i = 0; i < info.process_ids.size(); ++i)
              t.processes.push_back({info.process_ids[i], info.process_argvs[i]});
            self->state.gate.run([=]() mutable {
              write(self, {t}, {}, [=](const error& e) mutable {
                auto& st = self->state;
                if (e) {
                  st.runtime->remove_snapshot(dir);
                  return (void)rp.deliver(to_caf(e));
                }
                auto it = st.rec.snapshots.find(snap_id);
                if (it != st.rec.snapshots.end()) info.created_at_ms = it->second.at_ms;
                spdlog::info("event=snapshot_taken sandbox={} snapshot={} pause_us={}", name, snap_id, info.pause_us);
                rp.deliver(info);
              });
            });
          },
          [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
}

void handle_delete_snapshot(registry_actor* self, std::uint64_t snap_id, caf::response_promise rp) {
  auto& s = self->state;
  if (s.shutting_down) return (void)rp.deliver(to_caf(stopping()));
  if (!s.rec.snapshots.count(snap_id)) return (void)rp.deliver(false);
  // Sandboxes made from it hold copy-on-write copies of its files, not references to them:
  // nothing depends on the snapshot, so it can always go.
  write(self, {wire::snapshot_deleted{snap_id}}, {}, [=](const error& e) mutable {
    if (e) return (void)rp.deliver(to_caf(e));
    auto& st = self->state;
    // Files after the journal entry: a crash in between leaves an orphan for start-up GC.
    if (auto r = st.runtime->remove_snapshot(st.layout->snapshot_dir(snap_id)))
      spdlog::warn("event=snapshot_files_left snapshot={} reason=\"{}\"", snap_id, r.message);
    spdlog::info("event=snapshot_deleted snapshot={}", snap_id);
    rp.deliver(true);
  });
}

void handle_shutdown(registry_actor* self, caf::response_promise rp) {
  auto& s = self->state;
  s.shutting_down = true;
  if (s.actors.empty()) return (void)rp.deliver(true);
  auto left = std::make_shared<std::size_t>(s.actors.size());
  for (auto& [name, a] : s.actors) {
    self->unlink_from(a);
    auto one_done = [=]() mutable {
      if (--*left == 0) rp.deliver(true);
    };
    self->request(a, request_timeout(s), wr_stop_atom::value)
        .then([=](bool) mutable { one_done(); }, [=](caf::error&) mutable { one_done(); });
  }
  s.actors.clear();
}

// After a daemon start: every sandbox that was awake when the daemon stopped comes back.
void wake_all(registry_actor* self) {
  auto& s = self->state;
  std::size_t n = 0;
  for (auto& [name, e] : s.rec.names) {
    if (e.hibernated || e.needs_repair) continue;
    ++n;
    auto a = ensure_actor(self, name, e.id);
    self->request(a, start_timeout(s), wr_start_atom::value)
        .then([](sandbox_info&) {},
              [name = name](caf::error& err) {
                spdlog::warn("event=restart_wake_failed sandbox={} reason=\"{}\"", name, from_caf(err).message);
              });
  }
  if (n > 0) spdlog::info("event=waking_running_sandboxes count={}", n);
}

// Runs `f` through the gate with a response promise of type T.
template <class T, class F>
caf::result<T> gated(registry_actor* self, F f) {
  auto rp = self->make_response_promise<T>();
  self->state.gate.run([=]() mutable { f(rp); });
  return rp;
}

caf::behavior registry_behavior(registry_actor* self) {
  self->set_exit_handler([=](caf::exit_msg& msg) {
    auto& s = self->state;
    for (auto it = s.actors.begin(); it != s.actors.end(); ++it) {
      if (it->second.address() != msg.source) continue;
      auto name = it->first;
      s.actors.erase(it);
      if (msg.reason) {
        spdlog::warn("event=sandbox_actor_died sandbox={} reason=\"{}\"", name, caf::to_string(msg.reason));
      }
      return;
    }
    // Not one of ours: an exit for the registry itself.
    self->quit(msg.reason);
  });
  self->send(self, wr_wakeall_atom::value);
  return {
      [=](wr_synced_atom, std::uint64_t ticket, std::uint8_t code, std::string& msg) {
        self->state.writes.complete(ticket, code, std::move(msg));
      },
      [=](wr_wakeall_atom) { wake_all(self); },
      [=](wr_status_atom, sandbox_info& info) {
        auto* e = find_incarnation(self->state, info.name, info.id);
        if (!e) return;
        if (info.status == sandbox_status::needs_repair) {
          e->needs_repair = true;
          spdlog::error("event=sandbox_needs_repair sandbox={}", info.name);
        }
        e->status = static_cast<std::uint8_t>(info.status);
        e->last_activity_ms = info.last_activity_ms;
      },
      [=](wr_stop_atom, std::uint64_t id) {
        auto& s = self->state;
        auto it = s.pending_stops.find(id);
        if (it == s.pending_stops.end()) return;
        auto f = std::move(it->second);
        s.pending_stops.erase(it);
        f();
      },
      [=](wr_get_atom, std::string& name, bool create, sandbox_settings& settings) {
        return gated<sandbox_info>(self, [=](caf::response_promise rp) { handle_get(self, name, create, settings, rp); });
      },
      [=](wr_lookup_atom, std::string& name) -> caf::result<std::uint64_t> {
        if (auto e = wire::validate_sandbox_name(name)) return to_caf(e);
        auto it = self->state.rec.names.find(name);
        if (it == self->state.rec.names.end()) return to_caf(make_error(errc::not_found, "no sandbox is called " + name));
        return it->second.id;
      },
      [=](wr_list_atom) -> std::vector<sandbox_info> {
        auto& s = self->state;
        std::vector<sandbox_info> out;
        out.reserve(s.rec.names.size());
        for (auto& [name, e] : s.rec.names) out.push_back(info_of(name, e));
        std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.name < b.name; });
        return out;
      },
      [=](wr_destroy_atom, std::string& name) {
        return gated<bool>(self, [=](caf::response_promise rp) { handle_destroy(self, name, rp); });
      },
      [=](wr_journal_atom, std::string& name, std::uint64_t id, std::string& bytes) -> caf::result<bool> {
        // Not behind the gate when its sandbox is being destroyed: the destroy waits for that
        // sandbox's actor, which waits for this answer.
        if (self->state.destroying.count(name)) return to_caf(gone(name));
        return gated<bool>(self, [=](caf::response_promise rp) { handle_journal(self, name, id, bytes, rp); });
      },
      [=](wr_info_atom, std::string& name, std::uint64_t id) {
        return gated<sandbox_info>(self, [=](caf::response_promise rp) {
          auto* e = find_incarnation(self->state, name, id);
          if (!e) return (void)rp.deliver(to_caf(gone(name)));
          // A sleeping sandbox is described, not woken.
          if (e->hibernated || e->needs_repair) return (void)rp.deliver(info_of(name, *e));
          forward<sandbox_info>(self, name, id, caf::make_message(wr_info_atom::value), rp, request_timeout(self->state));
        });
      },
      [=](wr_sleep_atom, std::string& name, std::uint64_t id) {
        return gated<sandbox_info>(self, [=](caf::response_promise rp) {
          auto* e = find_incarnation(self->state, name, id);
          if (e && e->hibernated && !self->state.actors.count(name)) return (void)rp.deliver(info_of(name, *e));
          forward<sandbox_info>(self, name, id, caf::make_message(wr_sleep_atom::value), rp, start_timeout(self->state));
        });
      },
      [=](wr_config_atom, std::string& name, std::uint64_t id, sandbox_settings& settings) {
        return gated<sandbox_info>(self, [=](caf::response_promise rp) {
          forward<sandbox_info>(self, name, id, caf::make_message(wr_config_atom::value, settings), rp,
                                start_timeout(self->state));
        });
      },
      [=](wr_exec_atom, std::string& name, std::uint64_t id, exec_request& req) {
        return gated<exec_ticket>(self, [=](caf::response_promise rp) {
          forward<exec_ticket>(self, name, id, caf::make_message(wr_exec_atom::value, req), rp, start_timeout(self->state));
        });
      },
      [=](wr_hold_atom, std::string& name, std::uint64_t id, bool soft) {
        return gated<std::uint64_t>(self, [=](caf::response_promise rp) {
          forward<std::uint64_t>(self, name, id, caf::make_message(wr_hold_atom::value, soft), rp, start_timeout(self->state));
        });
      },
      [=](wr_proc_atom, std::string& name, std::uint64_t id, process_update& u) {
        return gated<bool>(self, [=](caf::response_promise rp) {
          // A process that ends after its sandbox was destroyed has nothing to record in.
          if (!find_incarnation(self->state, name, id)) return (void)rp.deliver(false);
          forward<bool>(self, name, id, caf::make_message(wr_proc_atom::value, u), rp, request_timeout(self->state));
        });
      },
      [=](wr_procs_atom, std::string& name, std::uint64_t id) {
        return gated<std::vector<process_update>>(self, [=](caf::response_promise rp) {
          forward<std::vector<process_update>>(self, name, id, caf::make_message(wr_procs_atom::value), rp,
                                               start_timeout(self->state));
        });
      },
      [=](wr_ports_atom, std::string& name, std::uint64_t id, std::uint8_t op, std::uint32_t port, std::string& label) {
        return gated<std::vector<exposed_port>>(self, [=](caf::response_promise rp) {
          forward<std::vector<exposed_port>>(self, name, id, caf::make_message(wr_ports_atom::value, op, port, label), rp,
                                             request_timeout(self->state));
        });
      },
      [=](wr_release_atom, std::string& name, std::uint64_t id, bool soft) {
        return gated<bool>(self, [=](caf::response_promise rp) {
          // Nothing to release in a sandbox that is gone or asleep (its actor took the holds with it).
          auto* e = find_incarnation(self->state, name, id);
          if (!e || !self->state.actors.count(name)) return (void)rp.deliver(false);
          forward<bool>(self, name, id, caf::make_message(wr_release_atom::value, soft), rp, request_timeout(self->state));
        });
      },
      [=](wr_ended_atom, std::string& name, std::uint64_t id, std::uint64_t exec_id, exec_outcome& o) {
        return gated<bool>(self, [=](caf::response_promise rp) {
          // After a destroy there is nothing to record the end in: not an error.
          if (!find_incarnation(self->state, name, id)) return (void)rp.deliver(false);
          forward<bool>(self, name, id, caf::make_message(wr_ended_atom::value, exec_id, o), rp,
                        request_timeout(self->state));
        });
      },
      [=](wr_down_atom) {
        return gated<bool>(self, [=](caf::response_promise rp) { handle_shutdown(self, rp); });
      },
      [=](wr_snap_atom, std::string& name, std::uint64_t id, std::string& label) {
        return gated<snapshot_info>(self, [=](caf::response_promise rp) { handle_snapshot(self, name, id, label, rp); });
      },
      [=](wr_restore_atom, std::string& name, std::uint64_t id, std::uint64_t snap_id) {
        return gated<sandbox_info>(self, [=](caf::response_promise rp) {
          auto& s = self->state;
          if (!s.rec.snapshots.count(snap_id))
            return (void)rp.deliver(to_caf(make_error(errc::not_found, "no snapshot " + std::to_string(snap_id))));
          forward<sandbox_info>(self, name, id, caf::make_message(wr_restore_atom::value, snap_id, s.layout->snapshot_dir(snap_id)),
                                rp, start_timeout(s));
        });
      },
      [=](wr_backup_atom, backup_info& b) {
        return gated<backup_info>(self, [=](caf::response_promise rp) {
          auto& s = self->state;
          if (s.shutting_down) return (void)rp.deliver(to_caf(stopping()));
          if (s.rec.backups.count(b.id)) return (void)rp.deliver(to_caf(make_error(errc::already_exists, "backup " + b.id)));
          wire::backup_created c{b.id, b.sandbox, b.sandbox_id, b.dir, b.sha256, b.bytes, b.expires_at_ms};
          write(self, {c}, {}, [=](const error& e) mutable {
            if (e) return (void)rp.deliver(to_caf(e));
            auto it = self->state.rec.backups.find(b.id);
            rp.deliver(it != self->state.rec.backups.end() ? info_of(it->second) : b);
          });
        });
      },
      [=](wr_backups_atom) -> std::vector<backup_info> {
        std::vector<backup_info> out;
        for (auto& [id, b] : self->state.rec.backups) out.push_back(info_of(b));
        std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.created_at_ms < b.created_at_ms; });
        return out;
      },
      [=](wr_bkdel_atom, std::string& id) {
        return gated<bool>(self, [=](caf::response_promise rp) {
          auto& s = self->state;
          if (s.shutting_down) return (void)rp.deliver(to_caf(stopping()));
          if (!s.rec.backups.count(id)) return (void)rp.deliver(false);
          write(self, {wire::backup_deleted{id}}, {}, [=](const error& e) mutable {
            if (e) return (void)rp.deliver(to_caf(e));
            rp.deliver(true);
          });
        });
      },
      [=](wr_import_atom, std::string& label) -> caf::result<snapshot_info> {
        // An id and a staging directory for `btrfs receive` (the gateway runs it).
        if (auto e = validate_snapshot_label(label)) return to_caf(e);
        auto& s = self->state;
        if (s.shutting_down) return to_caf(stopping());
        snapshot_info i;
        i.id = take_id(s);
        i.label = label;
        i.dir = s.layout->snapshots_dir() + "/.import-" + std::to_string(i.id);
        return i;
      },
      [=](wr_imported_atom, snapshot_info& got) {
        return gated<snapshot_info>(self, [=](caf::response_promise rp) {
          auto& s = self->state;
          auto staging = got.dir;
          auto dir = s.layout->snapshot_dir(got.id);
          if (staging != s.layout->snapshots_dir() + "/.import-" + std::to_string(got.id))
            return (void)rp.deliver(to_caf(make_error(errc::invalid_argument, "not an import staging directory")));
          if (auto e = s.runtime->adopt_snapshot(staging, dir)) {
            s.runtime->remove_snapshot(staging);
            return (void)rp.deliver(to_caf(e));
          }
          write(self, {wire::snapshot_taken{got.id, got.label, "", 0, 0, {}, {}}}, {}, [=](const error& e) mutable {
            auto& st = self->state;
            if (e) {
              st.runtime->remove_snapshot(dir);
              return (void)rp.deliver(to_caf(e));
            }
            spdlog::info("event=snapshot_imported snapshot={}", got.id);
            rp.deliver(info_of(st, st.rec.snapshots.at(got.id)));
          });
        });
      },
      [=](wr_snaps_atom) -> std::vector<snapshot_info> {
        std::vector<snapshot_info> out;
        for (auto& [id, snap] : self->state.rec.snapshots) out.push_back(info_of(self->state, snap));
        return out;
      },
      [=](wr_snapdel_atom, std::uint64_t snap_id) {
        return gated<bool>(self, [=](caf::response_promise rp) { handle_delete_snapshot(self, snap_id, rp); });
      },
  };
}

}  // namespace

caf::actor spawn_registry(caf::actor_system& system, registry_record replayed, storage::journal& journal,
                          const storage::layout& layout, sandbox_runtime& runtime, const core_options& options) {
  return system.spawn([replayed = std::move(replayed), &journal, &layout, &runtime, options](registry_actor* self) mutable {
    auto& s = self->state;
    s.rec = std::move(replayed);
    s.snapshot_seq = s.rec.last_seq;  // Count from here; the replay may have used a snapshot.
    s.journal = &journal;
    s.layout = &layout;
    s.runtime = &runtime;
    s.options = options;
    return registry_behavior(self);
  });
}

}  // namespace warren::actors
