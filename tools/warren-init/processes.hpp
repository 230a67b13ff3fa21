// Background processes of the sandbox, owned by the agent (processes.cpp).
#pragma once

#include <kj/async-io.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <capnp/orphan.h>

#include "wire/agent.capnp.h"
#include "wire/process.capnp.h"

namespace warren::init {

struct bg_process;

struct process_spec {
  std::string id;                 ///< Empty: p1, p2, ...
  std::vector<std::string> argv;  ///< argv[0] looked up in env's PATH.
  std::vector<std::string> env;   ///< Complete, NAME=VALUE.
  std::string cwd;
  std::uint32_t ring_bytes = 0;   ///< Per output stream; 0: 1 MiB (at most 64 MiB).
  kj::Maybe<wire::ProcessEvents::Client> events;  ///< Told when it has ended.
  bool restart_on_wake = false;  ///< Keep the spec in the sandbox to start it again.
  bool auto_cleanup = false;     ///< Forget it once it ended and `events` heard of it.
  std::vector<std::string> command;  ///< Shown in ProcessInfo; empty: argv.
  std::string session;               ///< The shell session argv/env/cwd were made for.
  bool pty = false;                  ///< On a terminal of its own (input: Process.write).
  std::uint16_t cols = 80, rows = 24;
};

class process_table {
 public:
  process_table(kj::AsyncIoContext& io, int exec_cgroups, std::vector<std::string>& cgroups_to_remove);
  ~process_table();

  /// Starts a process; throws "code: message" KJ exceptions for bad input.
  wire::Process::Client start(process_spec spec, wire::ProcessInfo::Builder info);
  std::size_t size() const;
  void fill_list(capnp::List<wire::ProcessInfo>::Builder out) const;
  kj::Maybe<wire::Process::Client> get(const std::string& id, wire::ProcessInfo::Builder info);
  /// Starts the restart_on_wake processes whose specs were left by the last start of the
  /// sandbox: `started` gets one entry each, `failed` "ID: reason" (that spec is dropped).
  void restart_all(wire::ProcessEvents::Client events, capnp::Orphanage orphanage,
                   std::vector<capnp::Orphan<wire::RestartedProcess>>& started, std::vector<std::string>& failed);
  /// Signal 0: kill every running process's tree. Returns how many were running.
  std::uint32_t kill_all(int signal);

  /// At most this many ended processes are kept (the oldest go first): their buffers are
  /// the agent's memory, charged to the sandbox.
  static constexpr std::size_t max_ended = 64;

 private:
  friend struct bg_process;
  /// A process ended and its end was reported: drops it (auto_cleanup) or the oldest ended
  /// ones beyond max_ended, in a later turn of the event loop (it may be running its code).
  void ended(bg_process& p);
  class error_handler final : public kj::TaskSet::ErrorHandler {
   public:
    void taskFailed(kj::Exception&&) override {}
  };

  kj::AsyncIoContext& io_;
  int exec_cgroups_;
  std::vector<std::string>& cgroups_to_remove_;
  std::map<std::string, kj::Own<bg_process>> procs_;
  std::uint64_t counter_ = 0;  // For cgroup names.
  std::uint64_t ids_ = 0;      // For default ids.
  std::vector<kj::Own<bg_process>> retired_;  // Dropped in a later turn.
  error_handler errors_;
  kj::TaskSet tasks_{errors_};
};

}  // namespace warren::init
