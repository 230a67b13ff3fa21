#include "gateway/gateway.hpp"

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "gateway/bridge.hpp"
#include "gateway/cgroups.hpp"
#include "gateway/inbox.hpp"
#include "gateway/preview.hpp"
#include "gateway/rpc_server.hpp"
#include "gateway/sandbox_host.hpp"

namespace warren::gateway {

namespace {

struct log_task_errors final : kj::TaskSet::ErrorHandler {
  void taskFailed(kj::Exception&& e) override {
    spdlog::debug("event=connection_ended reason=\"{}\"", e.getDescription().cStr());
  }
};

// Creates the listening unix socket with mode 0600 (set through umask before bind, so it
// is never reachable by others, not even for an instant). Refuses to steal the socket of a
// daemon that is still running.
int listen_unix(const std::string& path, error& err) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    err = make_error(errc::invalid_argument, "socket path " + path + " is longer than " +
                                                 std::to_string(sizeof addr.sun_path - 1) + " bytes");
    return -1;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    ::close(probe);
    err = make_error(errc::invalid_argument, "another warrend is already listening on " + path +
                                                 "; stop it or choose another --socket");
    return -1;
  }
  ::close(probe);
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      err = make_error(errc::invalid_argument, path + " exists and is not a socket; refusing to replace it");
      return -1;
    }
    ::unlink(path.c_str());  // A stale socket of a daemon that died.
  }
  auto dir = path.substr(0, path.rfind('/'));
  if (!dir.empty()) ::mkdir(dir.c_str(), 0755);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  mode_t old = ::umask(0177);
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int bind_errno = errno;
  ::umask(old);
  if (rc < 0 || ::listen(fd, 128) < 0) {
    err = make_error(errc::invalid_argument, "cannot listen on " + path + ": " + std::strerror(rc < 0 ? bind_errno : errno));
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

void prepare_process() {
  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  kj::UnixEventPort::captureChildExit();
  ::signal(SIGPIPE, SIG_IGN);
}

int run(const gateway_options& options, core_factory make_core) {
  auto io = kj::setupAsyncIo();
  inbox box(io);
  cgroup_tree cgroups(options.cgroup_root, options.cgroup_name,
                      cgroup_limits{options.sandbox_memory_bytes, options.sandbox_pids_max, options.sandbox_cpu_millis});
  if (auto e = cgroups.prepare()) {
    spdlog::error("event=start_failed reason=\"{}\"", e.message);
    return 1;
  }
  spdlog::info("event=cgroups parent={} limits={} memory_bytes={} pids_max={} cpu_millis={}", cgroups.parent(),
               cgroups.limits_mode(), options.sandbox_memory_bytes, options.sandbox_pids_max,
               options.sandbox_cpu_millis);
  sandbox_host host(io, box, cgroups,
                    host_options{options.init_path, options.sandbox_uid_base, options.sandbox_uid_ranges,
                                 options.user_namespace, options.seccomp, options.disk, options.sandbox_disk_bytes});
  if (!options.user_namespace || !options.seccomp)
    spdlog::warn("event=jail_weakened user_namespace={} seccomp={} note=\"for benchmarks only: sandboxes are less isolated\"",
                 options.user_namespace, options.seccomp);
  bridge calls(box);

  error err;
  auto core = make_core(host, err);
  if (!core) {
    spdlog::error("event=start_failed reason=\"{}\"", err.message);
    return 1;
  }
  rpc_context ctx{*core, host, calls, io.provider->getTimer(), options.version, options.token};
  ctx.blobs = options.blobs;
  ctx.io = &io;
  ctx.web_dir = options.web_dir;
  ctx.live_snapshot_note = options.live_snapshot_note;
  preview_options popts;
  popts.domain = options.preview_domain;
  preview_server preview(io, ctx, popts);
  log_task_errors restart_errors;
  kj::TaskSet restarts(restart_errors);
  host.on_agent_ready = [&ctx, &restarts](std::uint64_t id, const std::string& name, wire::Agent::Client agent) {
    restarts.add(restart_processes(ctx, name, id, kj::mv(agent)));
  };
  // Expired backups, and archives whose backup never reached the journal.
  restarts.add(sweep_backups(ctx, true));

  int code = 0;
  {
    log_task_errors errors;
    kj::TaskSet listeners(errors);
    int ufd = listen_unix(options.socket_path, err);
    if (ufd < 0) {
      spdlog::error("event=start_failed reason=\"{}\"", err.message);
      code = 1;
    }
    kj::Maybe<kj::Own<capnp::TwoPartyServer>> unix_server, tcp_server;
    if (code == 0) {
      auto listener = io.lowLevelProvider->wrapListenSocketFd(
          ufd, kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP | kj::LowLevelAsyncIoProvider::ALREADY_CLOEXEC |
                   kj::LowLevelAsyncIoProvider::ALREADY_NONBLOCK);
      auto server = kj::heap<capnp::TwoPartyServer>(make_warren(ctx));
      listeners.add(server->listen(*listener).attach(kj::mv(listener)));
      unix_server = kj::mv(server);
      spdlog::info("event=listening transport=unix socket={}", options.socket_path);
    }
    if (code == 0 && !options.tcp_listen.empty()) {
      try {
        auto addr = io.provider->getNetwork().parseAddress(options.tcp_listen).wait(io.waitScope);
        auto listener = addr->listen();
        auto server = kj::heap<capnp::TwoPartyServer>(make_login(ctx));
        spdlog::info("event=listening transport=tcp address={} port={}", options.tcp_listen, listener->getPort());
        preview.add_daemon_port(listener->getPort());
        listeners.add(server->listen(*listener).attach(kj::mv(listener)));
        tcp_server = kj::mv(server);
      } catch (const kj::Exception& e) {
        spdlog::error("event=start_failed reason=\"cannot listen on {}: {}\"", options.tcp_listen, e.getDescription().cStr());
        code = 1;
      }
    }
    if (code == 0 && !options.http_listen.empty()) {
      try {
        auto addr = io.provider->getNetwork().parseAddress(options.http_listen).wait(io.waitScope);
        auto listener = addr->listen();
        auto port = static_cast<std::uint16_t>(listener->getPort());
        spdlog::info("event=listening transport=http address={} port={} preview_domain={}", options.http_listen, port,
                     options.preview_domain);
        listeners.add(preview.serve(kj::mv(listener), port));
        ctx.preview = &preview;
      } catch (const kj::Exception& e) {
        spdlog::error("event=start_failed reason=\"cannot listen on {}: {}\"", options.http_listen, e.getDescription().cStr());
        code = 1;
      }
    }
    if (code == 0) {
      spdlog::info("event=daemon_ready pid={}", ::getpid());
      auto term = io.unixEventPort.onSignal(SIGTERM).exclusiveJoin(io.unixEventPort.onSignal(SIGINT));
      auto sig = term.wait(io.waitScope);
      spdlog::info("event=daemon_stopping signal={}", strsignal(sig.si_signo));
    }
    // Stop accepting; existing connections end with their servers below.
  }

  // Every sandbox stops (journaled state stays); then the actors, then the loop.
  auto stopped = calls.call<bool>([&](actors::callback<bool> cb) {
    core->shutdown([cb = std::move(cb)]() { cb({}, true); });
  });
  stopped.exclusiveJoin(io.provider->getTimer().afterDelay(60 * kj::SECONDS).then([]() {
    spdlog::warn("event=shutdown_slow reason=\"sandboxes did not stop within 60 s\"");
    return true;
  })).wait(io.waitScope);
  host.on_agent_ready = nullptr;
  host.stop_all().exclusiveJoin(io.provider->getTimer().afterDelay(30 * kj::SECONDS)).wait(io.waitScope);
  if (host.running() > 0) spdlog::error("event=sandboxes_left count={}", host.running());
  calls.close();
  core.reset();  // Joins the CAF threads; their late callbacks still find the inbox open.
  box.close();
  cgroups.remove_parent();
  if (code == 0) ::unlink(options.socket_path.c_str());
  spdlog::info("event=daemon_stopped");
  return code;
}

}  // namespace warren::gateway
