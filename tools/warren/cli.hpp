// What the CLI's command files share: parsed options, the connection, errors and exit codes.
#pragma once

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "wire/errors.hpp"
#include "wire/warren.capnp.h"

namespace warren::cli {

constexpr int exit_warren_error = 125;
constexpr int exit_usage = 2;
constexpr int exit_timed_out = 124;

struct options {
  std::string socket;
  std::string connect;
  std::string token_file;
  bool json = false;
  std::vector<std::string> rest;
};

struct connection {
  explicit connection(kj::AsyncIoContext& i) : io(i) {}
  kj::AsyncIoContext& io;
  kj::Own<kj::AsyncIoStream> stream;
  kj::Own<capnp::TwoPartyClient> client;
  wire::Warren::Client root = nullptr;
};

[[noreturn]] inline void die(const std::string& msg, int code = exit_warren_error) {
  std::fprintf(stderr, "warren: %s\n", msg.c_str());
  std::exit(code);
}

/// The message of a remote exception without the RPC layer's decoration.
inline std::string describe(const kj::Exception& e) {
  std::string d = e.getDescription().cStr();
  const std::string prefix = "remote exception: ";
  while (d.rfind(prefix, 0) == 0) d = d.substr(prefix.size());
  auto err = error::from_string(d);
  if (err.code == errc::internal && d.rfind("internal: ", 0) != 0) return d;  // Not ours.
  return err.message;
}

/// An existing sandbox, not woken by the lookup itself.
inline wire::Sandbox::Client existing(connection& c, const std::string& name) {
  auto req = c.root.sandboxRequest();
  req.setName(name);
  auto options = req.initOptions();
  options.setCreateIfMissing(false);
  options.setStart(false);
  return req.send().getSandbox();
}

/// What exec and start share on their command lines: NAME, flags, then [--] CMD [ARGS...].
struct command_line {
  std::string name;
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;
  bool shell = false;
  std::vector<std::string> command;
};

/// Parses o.rest: the sandbox name, --env/--cwd/--shell and the flags `extra` takes (it gets
/// the flag and a function that takes its value; false: not one of its flags), then the
/// command. Dies with a usage error on anything else.
command_line parse_command_line(const options& o, const char* what,
                                const std::function<bool(const std::string&, const std::function<std::string()>&)>& extra);

/// Sets an ExecRequest's command (argv, or the words joined as one shell line), env and cwd.
void fill_request(wire::ExecRequest::Builder r, const command_line& c);

/// files.cpp: cp, cat, ls-files.
int cmd_cp(connection& c, const options& o);
int cmd_cat(connection& c, const options& o);
int cmd_ls_files(connection& c, const options& o);

/// processes.cpp: start, ps, logs, kill; expose, unexpose, ports (preview URLs).
int cmd_expose(connection& c, const options& o);
int cmd_unexpose(connection& c, const options& o);
int cmd_ports(connection& c, const options& o);
int cmd_start(connection& c, const options& o);
int cmd_ps(connection& c, const options& o);
int cmd_logs(connection& c, const options& o);
int cmd_kill(connection& c, const options& o);

/// shell.cpp: an interactive terminal in a sandbox.
int cmd_shell(connection& c, const options& o);

/// "90", "90s", "10m", "2h", "1d" -> milliseconds; 0 on a malformed value.
std::uint64_t parse_duration_ms(const std::string& v);

/// snapshots.cpp: snapshot, snapshots, fork, restore; backup, backups.
int cmd_snapshot(connection& c, const options& o);
int cmd_snapshots(connection& c, const options& o);
int cmd_fork(connection& c, const options& o);
int cmd_restore(connection& c, const options& o);
int cmd_backup(connection& c, const options& o);
int cmd_backups(connection& c, const options& o);

}  // namespace warren::cli
