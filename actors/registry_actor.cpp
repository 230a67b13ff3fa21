#include "actors/registry_actor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "actors/core.hpp"
#include "actors/messages.hpp"
#include "actors/sandbox_actor.hpp"
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

  std::unordered_map<std::string, caf::actor> actors;  // Loaded sandboxes.
  std::unordered_map<std::uint64_t, sandbox_info> infos;  // Last status of loaded ones.
  input_gate gate;
  write_tracker writes;
  bool shutting_down = false;
  std::unordered_map<std::uint64_t, std::function<void()>> pending_stops;  // By sandbox id.

  static inline const char* name = "warren.registry";
};

using registry_actor = caf::stateful_actor<registry_state>;

std::chrono::milliseconds request_timeout(const registry_state& s) {
  return std::chrono::milliseconds(s.options.request_timeout_ms);
}

std::chrono::milliseconds start_timeout(const registry_state& s) {
  return std::chrono::milliseconds(s.options.request_timeout_ms + s.options.start_timeout_ms);
}

sandbox_spec spec_for(const registry_state& s, const std::string& name, std::uint64_t id) {
  return sandbox_spec{id, name, s.layout->sandbox_dir(id), s.layout->base_dir()};
}

caf::actor ensure_actor(registry_actor* self, const std::string& name, std::uint64_t id) {
  auto& s = self->state;
  auto it = s.actors.find(name);
  if (it != s.actors.end()) return it->second;
  auto a = spawn_sandbox(self->system(), spec_for(s, name, id), *s.journal, *s.runtime, s.options,
                         caf::actor_cast<caf::actor>(self));
  // Linked: the registry traps the exit of a sandbox actor (and forgets it); when the
  // registry itself exits, its sandbox actors exit with it.
  self->link_to(a);
  s.actors.emplace(name, a);
  return a;
}

// Journals registry events (plus changes of other streams) in one synced batch and applies
// the registry events once durable. The gate stays closed until `then` has run.
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

sandbox_info stored_info(const registry_state& s, const std::string& name, const registry_entry& e) {
  auto it = s.infos.find(e.id);
  if (it != s.infos.end()) return it->second;
  return sandbox_info{name, e.id, sandbox_status::stopped, e.created_at_ms, e.created_at_ms};
}

// Finds the incarnation a capability points at, or answers sandbox_gone.
const registry_entry* find_incarnation(const registry_state& s, const std::string& name,
                                       std::uint64_t id) {
  auto it = s.rec.names.find(name);
  if (it == s.rec.names.end() || it->second.id != id) return nullptr;
  return &it->second;
}

error gone(const std::string& name) {
  return make_error(errc::sandbox_gone, "sandbox " + name +
                                            " was destroyed; get it again by name to use a new one");
}

error stopping() { return make_error(errc::shutting_down, "the daemon is shutting down"); }

void start_and_deliver(registry_actor* self, caf::actor a, caf::response_promise rp) {
  self->request(a, start_timeout(self->state), wr_start_atom::value)
      .then([=](sandbox_info& info) mutable { rp.deliver(std::move(info)); },
            [=](caf::error& e) mutable { rp.deliver(std::move(e)); });
}

void handle_get(registry_actor* self, const std::string& name, bool create, caf::response_promise rp) {
  auto& s = self->state;
  if (s.shutting_down) return (void)rp.deliver(to_caf(stopping()));
  if (auto e = wire::validate_sandbox_name(name)) return (void)rp.deliver(to_caf(e));
  auto it = s.rec.names.find(name);
  if (it != s.rec.names.end()) return (void)start_and_deliver(self, ensure_actor(self, name, it->second.id), rp);
  if (!create) return (void)rp.deliver(to_caf(make_error(errc::not_found, "no sandbox is called " + name)));
  auto id = s.rec.next_id;
  wire::sandbox_created created{name, id};
  // The sandbox's own stream starts with the same fact, in the same atomic batch.
  storage::journal_batch batch;
  batch.appends.push_back(
      {id, 1, {wire::encode_envelope(wire::envelope{1, now_ms(), false, created})}});
  write(self, {created}, std::move(batch), [=](const error& e) mutable {
    if (e) return (void)rp.deliver(to_caf(e));
    spdlog::info("event=sandbox_created sandbox={} id={}", name, id);
    start_and_deliver(self, ensure_actor(self, name, id), rp);
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

  auto erase = [=]() mutable {
    storage::journal_batch batch;
    batch.erase_streams.push_back(id);
    write(self, {wire::sandbox_destroyed{name, id}}, std::move(batch), [=](const error& e) mutable {
      self->state.gate.release();  // The destroy's own hold; write() releases its hold next.
      if (e) return (void)rp.deliver(to_caf(e));
      auto& st = self->state;
      st.infos.erase(id);
      spdlog::info("event=sandbox_destroyed sandbox={} id={}", name, id);
      // Files go after the journal says the sandbox is gone: a crash in between leaves an
      // orphan directory that start-up garbage collection removes, never a sandbox without files.
      auto dir = st.layout->sandbox_dir(id);
      auto remover = self->system().spawn<caf::detached>([dir](caf::event_based_actor* worker) {
        auto e = storage::remove_tree(dir);
        if (e) spdlog::warn("event=sandbox_files_left dir={} reason=\"{}\"", dir, e.message);
        return caf::behavior{[](wr_destroy_atom) { return true; }};
      });
      self->request(remover, request_timeout(st) * 10, wr_destroy_atom::value)
          .then([=](bool) mutable {
                  self->send_exit(remover, caf::exit_reason::user_shutdown);
                  rp.deliver(true);
                },
                [=](caf::error& err) mutable {
                  self->send_exit(remover, caf::exit_reason::user_shutdown);
                  rp.deliver(true);
                });
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
      if (it->second.address() == msg.source) {
        if (msg.reason) spdlog::warn("event=sandbox_actor_died sandbox={} reason=\"{}\"", it->first, caf::to_string(msg.reason));
        s.actors.erase(it);
        return;
      }
    }
    // Not one of ours: an exit for the registry itself.
    self->quit(msg.reason);
  });
  return {
      [=](wr_synced_atom, std::uint64_t ticket, std::uint8_t code, std::string& msg) {
        self->state.writes.complete(ticket, code, std::move(msg));
      },
      [=](wr_status_atom, sandbox_info& info) {
        auto& s = self->state;
        auto it = s.rec.names.find(info.name);
        if (it != s.rec.names.end() && it->second.id == info.id) s.infos[info.id] = std::move(info);
      },
      [=](wr_stop_atom, std::uint64_t id) {
        auto& s = self->state;
        auto it = s.pending_stops.find(id);
        if (it == s.pending_stops.end()) return;
        auto f = std::move(it->second);
        s.pending_stops.erase(it);
        f();
      },
      [=](wr_get_atom, std::string& name, bool create) {
        return gated<sandbox_info>(self, [=](caf::response_promise rp) { handle_get(self, name, create, rp); });
      },
      [=](wr_list_atom) -> std::vector<sandbox_info> {
        auto& s = self->state;
        std::vector<sandbox_info> out;
        out.reserve(s.rec.names.size());
        for (auto& [name, e] : s.rec.names) out.push_back(stored_info(s, name, e));
        std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.name < b.name; });
        return out;
      },
      [=](wr_destroy_atom, std::string& name) {
        return gated<bool>(self, [=](caf::response_promise rp) { handle_destroy(self, name, rp); });
      },
      [=](wr_info_atom, std::string& name, std::uint64_t id) {
        return gated<sandbox_info>(self, [=](caf::response_promise rp) mutable {
          auto& s = self->state;
          auto* e = find_incarnation(s, name, id);
          if (!e) return (void)rp.deliver(to_caf(gone(name)));
          rp.deliver(stored_info(s, name, *e));
        });
      },
      [=](wr_exec_atom, std::string& name, std::uint64_t id, exec_request& req) {
        return gated<exec_ticket>(self, [=](caf::response_promise rp) mutable {
          auto& s = self->state;
          if (s.shutting_down) return (void)rp.deliver(to_caf(stopping()));
          if (!find_incarnation(s, name, id)) return (void)rp.deliver(to_caf(gone(name)));
          self->request(ensure_actor(self, name, id), start_timeout(s), wr_exec_atom::value, req)
              .then([=](exec_ticket& t) mutable { rp.deliver(std::move(t)); },
                    [=](caf::error& e) mutable { rp.deliver(std::move(e)); });
        });
      },
      [=](wr_ended_atom, std::string& name, std::uint64_t id, std::uint64_t exec_id, exec_outcome& o) {
        return gated<bool>(self, [=](caf::response_promise rp) mutable {
          auto& s = self->state;
          // After a destroy there is nothing to record the end in: not an error.
          if (!find_incarnation(s, name, id)) return (void)rp.deliver(false);
          self->request(ensure_actor(self, name, id), request_timeout(s), wr_ended_atom::value, exec_id, o)
              .then([=](bool ok) mutable { rp.deliver(ok); },
                    [=](caf::error& e) mutable { rp.deliver(std::move(e)); });
        });
      },
      [=](wr_down_atom) {
        return gated<bool>(self, [=](caf::response_promise rp) { handle_shutdown(self, rp); });
      },
  };
}

}  // namespace

caf::actor spawn_registry(caf::actor_system& system, registry_record replayed,
                          storage::journal& journal, const storage::layout& layout,
                          sandbox_runtime& runtime, const core_options& options) {
  return system.spawn([replayed = std::move(replayed), &journal, &layout, &runtime,
                       options](registry_actor* self) mutable {
    auto& s = self->state;
    s.rec = std::move(replayed);
    s.journal = &journal;
    s.layout = &layout;
    s.runtime = &runtime;
    s.options = options;
    return registry_behavior(self);
  });
}

}  // namespace warren::actors
