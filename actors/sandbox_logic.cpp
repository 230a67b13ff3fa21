#include "actors/sandbox_logic.hpp"

#include <algorithm>
#include <map>

namespace warren::actors {

namespace {

template <class... Fs>
struct overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
overloaded(Fs...) -> overloaded<Fs...>;

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

}  // namespace

void apply(sandbox_record& rec, const wire::envelope& e) {
  rec.last_seq = e.seq;
  std::visit(overloaded{
                 [&](const wire::sandbox_created& x) {
                   rec.name = x.name;
                   rec.id = x.sandbox_id;
                   rec.created_at_ms = e.at_ms;
                 },
                 [&](const wire::sandbox_destroyed&) {},
                 [&](const wire::exec_started& x) {
                   rec.exec_count = std::max(rec.exec_count, x.exec_id);
                   rec.open_execs.insert(x.exec_id);
                 },
                 [&](const wire::exec_finished& x) { rec.open_execs.erase(x.exec_id); },
                 [&](const wire::sandbox_hibernated&) {
                   rec.hibernated = true;
                   ++rec.hibernations;
                 },
                 [&](const wire::sandbox_woke&) { rec.hibernated = false; },
                 [&](const wire::sandbox_configured& x) {
                   rec.config = {x.sleep_after_ms, x.keep_alive, {x.memory_bytes, x.pids_max, x.cpu_millis, x.disk_bytes}};
                 },
                 [&](const wire::process_started& x) {
                   auto& ps = rec.processes;
                   ps.erase(std::remove_if(ps.begin(), ps.end(), [&](auto& p) { return p.process_id == x.process_id; }),
                            ps.end());
                   ps.push_back(wire::process_entry{x.process_id, x.argv, 0, 0, 0, x.restart_on_wake, x.auto_cleanup});
                   // The history is bounded: the oldest ended ones go first.
                   while (ps.size() > max_processes) {
                     auto ended = std::find_if(ps.begin(), ps.end(), [](auto& p) { return p.status != 0; });
                     ps.erase(ended == ps.end() ? ps.begin() : ended);
                   }
                 },
                 [&](const wire::process_ended& x) {
                   auto& ps = rec.processes;
                   for (auto& p : ps)
                     if (p.process_id == x.process_id && p.status == 0) {
                       p.status = x.status;
                       p.exit_code = x.exit_code;
                       p.signal = x.signal;
                     }
                   // auto_cleanup: an ended process leaves the state (its events stay in the journal).
                   ps.erase(std::remove_if(ps.begin(), ps.end(), [&](auto& p) {
                              return p.process_id == x.process_id && p.status != 0 && p.auto_cleanup;
                            }),
                            ps.end());
                 },
                 [&](const wire::port_exposed& x) {
                   auto& ps = rec.ports;
                   auto at = std::lower_bound(ps.begin(), ps.end(), x.port, [](auto& p, std::uint32_t port) { return p.port < port; });
                   if (at != ps.end() && at->port == x.port) *at = wire::exposed_port{x.port, x.label, x.token};
                   else ps.insert(at, wire::exposed_port{x.port, x.label, x.token});
                 },
                 [&](const wire::port_unexposed& x) {
                   std::erase_if(rec.ports, [&](auto& p) { return p.port == x.port; });
                 },
                 // Registry events: nothing of a sandbox's own state.
                 [&](const wire::sandbox_restored&) { ++rec.restores; },
                 [&](const wire::snapshot_taken&) {},
                 [&](const wire::backup_created&) {},
                 [&](const wire::backup_deleted&) {},
                 [&](const wire::snapshot_deleted&) {},
             },
             e.body);
}

error validate_session_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 63;
  for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
  if (!ok) return make_error(errc::invalid_argument, "session names are 1-63 characters of a-z, 0-9, '-' and '_'");
  return {};
}

error validate_exec(const exec_request& req, const exec_limits& limits) {
  auto bad = [](std::string what) { return make_error(errc::invalid_argument, std::move(what)); };
  if (!req.session.empty())
    if (auto e = validate_session_name(req.session)) return e;
  if (req.stdin_data.size() > limits.max_stdin)
    return bad("stdin is " + std::to_string(req.stdin_data.size()) + " bytes; the limit for one exec is " +
               std::to_string(limits.max_stdin));
  if (req.argv.empty() || req.argv[0].empty())
    return bad("the command is empty: give a program and its arguments, or a shell command");
  if (req.argv.size() > limits.max_args)
    return bad("the command has " + std::to_string(req.argv.size()) + " arguments; the limit is " +
               std::to_string(limits.max_args));
  std::size_t total = req.cwd.size();
  for (std::size_t i = 0; i < req.argv.size(); ++i) {
    if (has_nul(req.argv[i])) return bad("argument " + std::to_string(i) + " contains a NUL byte");
    total += req.argv[i].size();
  }
  if (req.env.size() > limits.max_env)
    return bad("the request sets " + std::to_string(req.env.size()) +
               " environment variables; the limit is " + std::to_string(limits.max_env));
  for (auto& [name, value] : req.env) {
    bool ok = !name.empty() && name.size() <= 255 && !(name[0] >= '0' && name[0] <= '9');
    for (char c : name)
      ok = ok && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
    if (!ok)
      return bad("environment variable name '" + name.substr(0, 64) +
                 "' is invalid: use letters, digits and '_', not starting with a digit");
    if (has_nul(value)) return bad("the value of environment variable " + name + " contains a NUL byte");
    total += name.size() + value.size() + 2;
  }
  if (!req.cwd.empty() && (req.cwd[0] != '/' || has_nul(req.cwd)))
    return bad("the working directory must be an absolute path inside the sandbox, like /workspace");
  if (total > limits.max_total_bytes)
    return bad("the command, environment and working directory take " + std::to_string(total) +
               " bytes; the limit is " + std::to_string(limits.max_total_bytes));
  if (req.timeout_ms > limits.max_timeout_ms)
    return bad("the timeout is longer than the limit of " +
               std::to_string(limits.max_timeout_ms / 1000) + " seconds");
  return {};
}

std::vector<std::pair<std::string, std::string>> default_env(const std::string& sandbox_name) {
  return {
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {"HOME", "/root"},
      {"USER", "root"},
      {"LANG", "C.UTF-8"},
      {"HOSTNAME", sandbox_name},
      {"TERM", "xterm-256color"},
  };
}

exec_decision decide_exec(const sandbox_record& rec, const exec_request& req) {
  exec_decision d;
  d.ticket.sandbox_id = rec.id;
  d.ticket.exec_id = rec.exec_count + 1;
  d.ticket.argv = req.argv;
  d.ticket.cwd = req.cwd.empty() ? default_cwd : req.cwd;
  d.ticket.timeout_ms = req.timeout_ms;
  d.ticket.session = req.session.empty() ? "default" : req.session;
  d.ticket.shell = req.shell;
  d.ticket.stdin_data = req.stdin_data;
  d.ticket.stdin_stream = req.stdin_stream;
  d.ticket.cwd_given = !req.cwd.empty();
  for (auto& kv : req.env) d.ticket.call_env.push_back(kv.first);
  // Later entries override earlier ones with the same name; order of first appearance kept.
  std::map<std::string, std::size_t> index;
  std::vector<std::pair<std::string, std::string>> env;
  auto put = [&](const std::string& k, const std::string& v) {
    auto [it, fresh] = index.emplace(k, env.size());
    if (fresh) env.emplace_back(k, v);
    else env[it->second].second = v;
  };
  for (auto& [k, v] : default_env(rec.name)) put(k, v);
  for (auto& [k, v] : req.env) put(k, v);
  for (auto& [k, v] : env) d.ticket.env.push_back(k + "=" + v);

  d.event.exec_id = d.ticket.exec_id;
  d.event.argv = req.argv;
  d.event.cwd = req.cwd;  // Empty: the session's directory applied.
  d.event.session = d.ticket.session;
  for (auto& kv : req.env) d.event.env_names.push_back(kv.first);
  d.event.timeout_ms = req.timeout_ms;
  return d;
}

wire::exec_finished decide_exec_end(std::uint64_t exec_id, const exec_outcome& o) {
  wire::exec_finished f;
  f.exec_id = exec_id;
  f.exit_code = o.exit_code;
  f.signal = o.signal;
  f.timed_out = o.timed_out;
  f.cancelled = o.cancelled;
  f.duration_ms = o.duration_ms;
  f.stdout_bytes = o.stdout_bytes;
  f.stderr_bytes = o.stderr_bytes;
  f.failed = o.failed;
  f.oom_killed = o.oom_killed;
  return f;
}

error validate_config(const sandbox_config& c) {
  constexpr std::uint64_t min_ms = 1000, max_ms = 30ull * 24 * 3600 * 1000;
  if (c.sleep_after_ms < min_ms || c.sleep_after_ms > max_ms)
    return make_error(errc::invalid_argument, "sleep_after must be between 1 second and 30 days, got " +
                                                  std::to_string(c.sleep_after_ms) + " ms");
  return {};
}

bool may_hibernate(const sandbox_record& rec, std::uint64_t now_ms, std::uint64_t last_activity_ms) {
  return !rec.config.keep_alive && rec.open_execs.empty() && now_ms >= idle_deadline_ms(rec, last_activity_ms);
}

std::uint64_t idle_deadline_ms(const sandbox_record& rec, std::uint64_t last_activity_ms) {
  return last_activity_ms + rec.config.sleep_after_ms;
}

wire::sandbox_snapshot to_snapshot(const sandbox_record& rec) {
  wire::sandbox_snapshot s;
  s.seq = rec.last_seq;
  s.name = rec.name;
  s.sandbox_id = rec.id;
  s.created_at_ms = rec.created_at_ms;
  s.exec_count = rec.exec_count;
  s.open_execs.assign(rec.open_execs.begin(), rec.open_execs.end());
  s.sleep_after_ms = rec.config.sleep_after_ms;
  s.keep_alive = rec.config.keep_alive;
  s.hibernated = rec.hibernated;
  s.hibernations = rec.hibernations;
  s.restores = rec.restores;
  s.memory_bytes = rec.config.limits.memory_bytes;
  s.pids_max = rec.config.limits.pids_max;
  s.cpu_millis = rec.config.limits.cpu_millis;
  s.disk_bytes = rec.config.limits.disk_bytes;
  s.processes = rec.processes;
  s.ports = rec.ports;
  return s;
}

sandbox_record from_snapshot(const wire::sandbox_snapshot& s) {
  sandbox_record rec;
  rec.last_seq = s.seq;
  rec.name = s.name;
  rec.id = s.sandbox_id;
  rec.created_at_ms = s.created_at_ms;
  rec.exec_count = s.exec_count;
  rec.open_execs.insert(s.open_execs.begin(), s.open_execs.end());
  rec.config = {s.sleep_after_ms, s.keep_alive, {s.memory_bytes, s.pids_max, s.cpu_millis, s.disk_bytes}};
  rec.hibernated = s.hibernated;
  rec.hibernations = s.hibernations;
  rec.restores = s.restores;
  rec.processes = s.processes;
  rec.ports = s.ports;
  return rec;
}

std::string record_json(const sandbox_record& rec) {
  std::string open = "[";
  for (auto id : rec.open_execs) open += (open.size() > 1 ? "," : "") + std::to_string(id);
  open += "]";
  std::string ports = "[";  // Ports only: the tokens are the URLs' secrets.
  for (auto& p : rec.ports) ports += (ports.size() > 1 ? "," : "") + std::to_string(p.port);
  ports += "]";
  return "{\"name\":\"" + rec.name + "\",\"id\":" + std::to_string(rec.id) + ",\"seq\":" +
         std::to_string(rec.last_seq) + ",\"createdAtMs\":" + std::to_string(rec.created_at_ms) +
         ",\"execCount\":" + std::to_string(rec.exec_count) + ",\"openExecs\":" + open +
         ",\"sleepAfterMs\":" + std::to_string(rec.config.sleep_after_ms) +
         ",\"keepAlive\":" + (rec.config.keep_alive ? "true" : "false") +
         ",\"hibernated\":" + (rec.hibernated ? "true" : "false") +
         ",\"hibernations\":" + std::to_string(rec.hibernations) + ",\"restores\":" + std::to_string(rec.restores) +
         ",\"memoryBytes\":" + std::to_string(rec.config.limits.memory_bytes) +
         ",\"pidsMax\":" + std::to_string(rec.config.limits.pids_max) +
         ",\"cpuMillis\":" + std::to_string(rec.config.limits.cpu_millis) +
         ",\"diskBytes\":" + std::to_string(rec.config.limits.disk_bytes) + ",\"exposedPorts\":" + ports + "}";
}

error validate_expose(const sandbox_record& rec, std::uint32_t port, const std::string& label) {
  if (port < 1 || port > 65535)
    return make_error(errc::invalid_argument, "port " + std::to_string(port) + " is not a TCP port (1-65535)");
  if (label.size() > 63 || !std::all_of(label.begin(), label.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
      }))
    return make_error(errc::invalid_argument, "port name '" + label.substr(0, 80) +
                                                  "' must be at most 63 characters of a-z, 0-9, '-' and '_'");
  bool known = std::any_of(rec.ports.begin(), rec.ports.end(), [&](auto& p) { return p.port == port; });
  if (!known && rec.ports.size() >= max_exposed_ports)
    return make_error(errc::invalid_argument, "sandbox " + rec.name + " already exposes " +
                                                    std::to_string(max_exposed_ports) + " ports; unexpose one first");
  return {};
}

std::vector<wire::event> decide_recovery(const sandbox_record& rec) {
  std::vector<wire::event> out;
  for (auto id : rec.open_execs) {
    wire::exec_finished f;
    f.exec_id = id;
    f.failed = "lost: the daemon stopped while the command ran";
    out.push_back(std::move(f));
  }
  // Its processes died with its init (hibernation, a restart of the daemon, a crash).
  for (auto& p : rec.processes)
    if (p.status == 0) out.push_back(wire::process_ended{p.process_id, 3, 0, 0});
  return out;
}

}  // namespace warren::actors
