// Internal to gateway/: preview URLs. An HTTP server (kj-http) that routes
// `{port}-{sandbox}-{token}.{domain}` hosts and `/preview/{sandbox}/{port}/{token}/` paths to
// a port inside the sandbox: HTTP (streamed both ways, keep-alive upstream) and WebSocket
// upgrades. A request for a hibernated sandbox wakes it (which restarts its restart_on_wake
// processes) and waits for the port. Wrong or revoked tokens get a bare 404.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace kj {
class AsyncIoContext;
class ConnectionReceiver;
template <typename T>
class Promise;
template <typename T>
class Own;
}  // namespace kj

namespace warren::gateway {

struct rpc_context;

struct preview_options {
  /// Host names of preview URLs end in this domain. Default: localhost (*.localhost resolves
  /// to the loopback address without DNS).
  std::string domain = "localhost";
  /// How long after a sandbox's start a request waits for a port that its restart_on_wake
  /// processes will open. Default: 30 s.
  std::uint64_t wake_wait_ms = 30000;
  /// A sandbox stays held awake this long after its last preview request ended (so that a
  /// page and its assets do not cost a hold each). Default: 2 s.
  std::uint64_t linger_ms = 2000;
};

class preview_server {
 public:
  /// KJ thread only; `ctx` and `io` are borrowed.
  preview_server(kj::AsyncIoContext& io, rpc_context& ctx, preview_options options);
  ~preview_server() noexcept(false);

  /// Serves HTTP on `listener` (the URLs name `port`, its port) until the promise is dropped.
  kj::Promise<void> serve(kj::Own<kj::ConnectionReceiver> listener, std::uint16_t port);

  /// `http://{port}-{name}-{token}.{domain}:{gateway port}/`
  std::string host_url(const std::string& name, std::uint32_t port, const std::string& token) const;
  /// `http://{domain}:{gateway port}/preview/{name}/{port}/{token}/`
  std::string path_url(const std::string& name, std::uint32_t port, const std::string& token) const;

  /// Ports of the daemon itself (the HTTP gateway, the TCP API), which are never exposed.
  bool is_daemon_port(std::uint32_t port) const;
  void add_daemon_port(std::uint32_t port);

  /// Drops what the proxy remembers of `name` (after unexpose, destroy): the next request
  /// asks the sandbox's state again.
  void forget(const std::string& name);

  /// A sandbox (re)started and its restart_on_wake processes are being started: requests
  /// wait for their ports (up to wake_wait_ms) instead of getting 502. `any`: whether there
  /// were any (none: stop waiting).
  void restarts_began(std::uint64_t sandbox_id);
  void restarts_done(std::uint64_t sandbox_id, bool any);

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace warren::gateway
