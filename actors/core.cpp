#include "actors/core.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <unordered_set>

#include "actors/messages.hpp"
#include "actors/registry_actor.hpp"
#include "storage/journal.hpp"
#include "storage/layout.hpp"

namespace warren::actors {

struct core::impl {
  core_options options;
  storage::journal* journal = nullptr;  // Borrowed.
  const storage::layout* layout = nullptr;  // Borrowed.
  sandbox_runtime* runtime = nullptr;   // Borrowed.
  std::unique_ptr<caf::actor_system_config> config;
  std::unique_ptr<caf::actor_system> system;
  caf::actor registry;

  std::chrono::milliseconds timeout(std::uint64_t extra_ms = 0) const {
    return std::chrono::milliseconds(options.request_timeout_ms * 4 + extra_ms);
  }

  // Sends a request from a short-lived actor and hands the reply to `done` (on that
  // actor's worker thread). The actor ends after the reply or the timeout.
  template <class T, class... Ts>
  void ask(std::chrono::milliseconds t, callback<T> done, Ts&&... xs) {
    system->spawn([t, done = std::move(done), dest = registry,
                   msg = caf::make_message(std::forward<Ts>(xs)...)](caf::event_based_actor* self) {
      self->request(dest, t, msg).then(
          [done](T& value) { done({}, std::move(value)); },
          [done](caf::error& e) { done(from_caf(e), T{}); });
    });
  }
};

core::core(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

core::~core() {
  if (impl_->registry) caf::anon_send_exit(impl_->registry, caf::exit_reason::user_shutdown);
  impl_->registry = nullptr;
  impl_->system.reset();  // Waits for every actor to finish.
}

std::unique_ptr<core> core::start(const core_options& options, storage::journal& journal,
                                  const storage::layout& layout, sandbox_runtime& runtime,
                                  error& err) {
  registry_record rec;
  std::uint64_t from = 1;
  if (auto bytes = journal.load_snapshot(registry_stream)) {
    if (auto snap = wire::decode_registry_snapshot(*bytes)) {
      rec = from_snapshot(*snap);
      from = snap->seq + 1;
    } else {
      spdlog::warn("event=snapshot_ignored stream=registry reason=\"unreadable or unknown version\"");
    }
  }
  for (auto& [seq, bytes] : journal.read(registry_stream, from)) {
    auto d = wire::decode_envelope(bytes);
    if (d.skipped) {
      rec.last_seq = seq;
      continue;
    }
    if (!d.value) {
      err = make_error(errc::journal_failed, "the registry journal is unreadable at seq " +
                                                 std::to_string(seq) + ": " + d.error);
      return nullptr;
    }
    apply(rec, *d.value);
  }
  spdlog::info("event=registry_replayed sandboxes={} seq={} from_seq={}", rec.names.size(), rec.last_seq, from);

  // Garbage: directories of sandboxes whose destroy was journaled but whose files were not
  // removed yet when the daemon stopped (files always go after the journal entry).
  std::unordered_set<std::uint64_t> live;
  for (auto& [name, e] : rec.names) live.insert(e.id);
  for (auto id : storage::list_sandbox_dirs(layout)) {
    if (live.count(id)) continue;
    spdlog::info("event=orphan_files_removed sandbox_id={}", id);
    if (auto e = storage::remove_tree(layout.sandbox_dir(id)))
      spdlog::warn("event=orphan_files_left sandbox_id={} reason=\"{}\"", id, e.message);
  }
  // Imports a crash interrupted.
  {
    std::error_code ec;
    for (auto& entry : std::filesystem::directory_iterator(layout.snapshots_dir(), ec))
      if (entry.path().filename().string().rfind(".import-", 0) == 0) runtime.remove_snapshot(entry.path().string());
  }
  // And snapshots whose deletion (or whose taking) the journal does not hold.
  for (auto id : storage::list_snapshot_dirs(layout)) {
    if (rec.snapshots.count(id)) continue;
    spdlog::info("event=orphan_snapshot_removed snapshot_id={}", id);
    if (auto e = runtime.remove_snapshot(layout.snapshot_dir(id)))
      spdlog::warn("event=orphan_snapshot_left snapshot_id={} reason=\"{}\"", id, e.message);
  }

  auto p = std::make_unique<impl>();
  p->options = options;
  p->journal = &journal;
  p->layout = &layout;
  p->runtime = &runtime;
  p->config = std::make_unique<caf::actor_system_config>();
  p->config->set("scheduler.max-threads", options.scheduler_threads);
  p->config->set("logger.console", caf::atom("none"));
  p->system = std::make_unique<caf::actor_system>(*p->config);
  p->registry = spawn_registry(*p->system, std::move(rec), journal, layout, runtime, options);
  return std::unique_ptr<core>(new core(std::move(p)));
}

void core::get_sandbox(std::string name, bool create, sandbox_settings settings, callback<actors::sandbox_info> done) {
  impl_->ask<actors::sandbox_info>(impl_->timeout(impl_->options.start_timeout_ms), std::move(done),
                                   wr_get_atom::value, std::move(name), create, settings);
}

void core::configure(std::string name, std::uint64_t id, sandbox_settings settings, callback<actors::sandbox_info> done) {
  impl_->ask<actors::sandbox_info>(impl_->timeout(impl_->options.start_timeout_ms), std::move(done),
                                   wr_config_atom::value, std::move(name), id, settings);
}

void core::hibernate(std::string name, std::uint64_t id, callback<actors::sandbox_info> done) {
  impl_->ask<actors::sandbox_info>(impl_->timeout(impl_->options.start_timeout_ms), std::move(done),
                                   wr_sleep_atom::value, std::move(name), id);
}

void core::list(callback<std::vector<actors::sandbox_info>> done) {
  impl_->ask<std::vector<actors::sandbox_info>>(impl_->timeout(), std::move(done), wr_list_atom::value);
}

void core::destroy(std::string name, callback<bool> done) {
  impl_->ask<bool>(impl_->timeout(impl_->options.request_timeout_ms * 10), std::move(done),
                   wr_destroy_atom::value, std::move(name));
}

void core::sandbox_info(std::string name, std::uint64_t id, callback<actors::sandbox_info> done) {
  impl_->ask<actors::sandbox_info>(impl_->timeout(), std::move(done), wr_info_atom::value,
                                   std::move(name), id);
}

void core::begin_exec(std::string name, std::uint64_t id, exec_request request,
                      callback<exec_ticket> done) {
  impl_->ask<exec_ticket>(impl_->timeout(impl_->options.start_timeout_ms), std::move(done),
                          wr_exec_atom::value, std::move(name), id, std::move(request));
}

void core::end_exec(std::string name, std::uint64_t id, std::uint64_t exec_id, exec_outcome outcome,
                    callback<bool> done) {
  impl_->ask<bool>(impl_->timeout(), std::move(done), wr_ended_atom::value, std::move(name), id,
                   exec_id, std::move(outcome));
}

void core::hold(std::string name, std::uint64_t id, callback<std::uint64_t> done, bool soft) {
  impl_->ask<std::uint64_t>(impl_->timeout(impl_->options.start_timeout_ms), std::move(done), wr_hold_atom::value,
                            std::move(name), id, soft);
}

void core::process_event(std::string name, std::uint64_t id, process_update update, callback<bool> done) {
  impl_->ask<bool>(impl_->timeout(), std::move(done), wr_proc_atom::value, std::move(name), id, std::move(update));
}

void core::processes(std::string name, std::uint64_t id, callback<std::vector<process_update>> done) {
  impl_->ask<std::vector<process_update>>(impl_->timeout(impl_->options.start_timeout_ms), std::move(done),
                                          wr_procs_atom::value, std::move(name), id);
}

void core::ports(std::string name, std::uint64_t id, ports_op op, std::uint32_t port, std::string label,
                 callback<std::vector<exposed_port>> done) {
  impl_->ask<std::vector<exposed_port>>(impl_->timeout(), std::move(done), wr_ports_atom::value, std::move(name), id,
                                        static_cast<std::uint8_t>(op), port, std::move(label));
}

void core::snapshot(std::string name, std::uint64_t id, std::string label, callback<snapshot_info> done) {
  // A snapshot may wait for a start or a stop of its sandbox (the sandbox's gate).
  impl_->ask<snapshot_info>(impl_->timeout() * 3, std::move(done), wr_snap_atom::value, std::move(name), id,
                            std::move(label));
}

void core::restore(std::string name, std::uint64_t id, std::uint64_t snapshot_id, callback<actors::sandbox_info> done) {
  impl_->ask<actors::sandbox_info>(impl_->timeout() * 3, std::move(done), wr_restore_atom::value, std::move(name), id,
                                   snapshot_id);
}

void core::record_backup(backup_info backup, callback<backup_info> done) {
  impl_->ask<backup_info>(impl_->timeout(), std::move(done), wr_backup_atom::value, std::move(backup));
}

void core::backups(callback<std::vector<backup_info>> done) {
  impl_->ask<std::vector<backup_info>>(impl_->timeout(), std::move(done), wr_backups_atom::value);
}

void core::delete_backup(std::string id, callback<bool> done) {
  impl_->ask<bool>(impl_->timeout(), std::move(done), wr_bkdel_atom::value, std::move(id));
}

void core::begin_import(std::string label, callback<snapshot_info> done) {
  impl_->ask<snapshot_info>(impl_->timeout(), std::move(done), wr_import_atom::value, std::move(label));
}

void core::finish_import(snapshot_info staged, callback<snapshot_info> done) {
  impl_->ask<snapshot_info>(impl_->timeout(), std::move(done), wr_imported_atom::value, std::move(staged));
}

void core::list_snapshots(callback<std::vector<snapshot_info>> done) {
  impl_->ask<std::vector<snapshot_info>>(impl_->timeout(), std::move(done), wr_snaps_atom::value);
}

void core::delete_snapshot(std::uint64_t snapshot_id, callback<bool> done) {
  impl_->ask<bool>(impl_->timeout(), std::move(done), wr_snapdel_atom::value, snapshot_id);
}

void core::find_preview(std::string name, callback<preview_target> done) {
  auto t = impl_->timeout();
  impl_->system->spawn([t, name, done = std::move(done), registry = impl_->registry](caf::event_based_actor* self) {
    self->request(registry, t, wr_lookup_atom::value, name)
        .then(
            [=](std::uint64_t id) {
              self->request(registry, t, wr_ports_atom::value, name, id, static_cast<std::uint8_t>(ports_op::list),
                            std::uint32_t{0}, std::string())
                  .then([=](std::vector<exposed_port>& ports) { done({}, preview_target{id, std::move(ports)}); },
                        [=](caf::error& e) { done(from_caf(e), {}); });
            },
            [=](caf::error& e) { done(from_caf(e), {}); });
  });
}

void core::release(std::string name, std::uint64_t id, bool soft) {
  impl_->ask<bool>(impl_->timeout(), [](const error&, bool) {}, wr_release_atom::value, std::move(name), id, soft);
}

namespace {

// Looks up `name` in the registry, then runs the blocking `work(id)` on a detached actor's
// own thread (journal reads must not occupy a scheduler thread).
template <class T>
void with_stream(caf::actor_system& sys, caf::actor registry, std::chrono::milliseconds timeout, std::string name,
                 std::function<error(std::uint64_t, T&)> work, callback<T> done) {
  sys.spawn<caf::detached>([=](caf::event_based_actor* self) {
    self->request(registry, timeout, wr_lookup_atom::value, name)
        .then(
            [=](std::uint64_t id) {
              T value{};
              auto e = work(id, value);
              done(e, std::move(value));
            },
            [=](caf::error& e) { done(from_caf(e), T{}); });
  });
}

}  // namespace

void core::read_journal(std::string name, std::uint64_t from_seq, std::uint32_t limit, callback<journal_page> done) {
  auto* j = impl_->journal;
  if (limit == 0 || limit > 10000) limit = 10000;
  with_stream<journal_page>(
      *impl_->system, impl_->registry, impl_->timeout(), std::move(name),
      [j, from_seq, limit](std::uint64_t id, journal_page& page) {
        page.entries = read_entries(*j, id, from_seq, limit);
        page.last_seq = j->last_seq(id);
        return error{};
      },
      std::move(done));
}

void core::journal_state(std::string name, std::uint64_t at_seq, callback<std::string> done) {
  auto* j = impl_->journal;
  with_stream<std::string>(
      *impl_->system, impl_->registry, impl_->timeout(), std::move(name),
      [j, at_seq](std::uint64_t id, std::string& json) { return state_at(*j, id, at_seq, json); }, std::move(done));
}

void core::usage(std::string name, std::uint64_t id, callback<sandbox_usage> done) {
  auto* runtime = impl_->runtime;
  auto dir = impl_->layout->sandbox_dir(id) + "/upper";
  // The lookup checks the incarnation; the tree walk (which can be long) runs on its own thread.
  with_stream<sandbox_usage>(
      *impl_->system, impl_->registry, impl_->timeout(), std::move(name),
      [runtime, dir, id](std::uint64_t found, sandbox_usage& u) {
        if (found != id) return make_error(errc::sandbox_gone, "this sandbox was destroyed");
        u = runtime->resource_usage(id);
        if (!u.disk_known) u.disk_bytes = storage::tree_bytes(dir);
        return error{};
      },
      std::move(done));
}

void core::check_journals(callback<check_report> done) {
  auto* j = impl_->journal;
  auto registry = impl_->registry;
  auto timeout = impl_->timeout();
  impl_->system->spawn<caf::detached>([=](caf::event_based_actor* self) {
    self->request(registry, timeout, wr_list_atom::value)
        .then(
            [=](std::vector<actors::sandbox_info>& all) {
              check_report report;
              if (auto e = check_stream(*j, registry_stream, true)) report.problems.push_back("registry: " + e.message);
              ++report.checked;
              for (auto& s : all) {
                if (auto e = check_stream(*j, s.id, false))
                  report.problems.push_back("sandbox " + s.name + " (id " + std::to_string(s.id) + "): " + e.message);
                ++report.checked;
              }
              done({}, std::move(report));
            },
            [=](caf::error& e) { done(from_caf(e), check_report{}); });
  });
}

void core::shutdown(std::function<void()> done) {
  impl_->ask<bool>(impl_->timeout(impl_->options.request_timeout_ms * 2),
                   [done = std::move(done)](const error& e, bool) {
                     if (e) spdlog::warn("event=shutdown_incomplete reason=\"{}\"", e.message);
                     done();
                   },
                   wr_down_atom::value);
}

}  // namespace warren::actors
