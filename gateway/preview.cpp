#include "gateway/preview.hpp"

#include "gateway/terminal_ws.hpp"

#include <kj/async-io.h>
#include <kj/compat/http.h>
#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "gateway/rpc_server.hpp"
#include "wire/names.hpp"

namespace warren::gateway {

namespace {

// Where a request goes: from its host name or its path.
struct target {
  std::string name;
  std::uint32_t port = 0;
  std::string token;
  std::string url;        // Request-target for the sandbox's server.
  std::string redirect;   // Path form without the trailing slash: where to go instead.
};

std::string lower(std::string s) {
  for (auto& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

bool parse_port(std::string_view s, std::uint32_t& port) {
  if (s.empty() || s.size() > 5 || s[0] == '0') return false;
  port = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    port = port * 10 + static_cast<std::uint32_t>(c - '0');
  }
  return port >= 1 && port <= 65535;
}

bool valid_token(std::string_view t) {
  if (t.size() != 22) return false;
  for (char c : t)
    if (!((c >= 'a' && c <= 'z') || (c >= '2' && c <= '7'))) return false;
  return true;
}

bool valid_target(const target& t) { return !wire::validate_sandbox_name(t.name) && valid_token(t.token); }

// "{port}-{name}-{token}.{domain}[:port]" (the name may hold '-'; port and token do not).
std::optional<target> from_host(const std::string& host_header, const std::string& domain, kj::StringPtr url) {
  auto host = lower(host_header);
  if (auto colon = host.rfind(':'); colon != std::string::npos && host.find(']') == std::string::npos)
    host.resize(colon);
  auto suffix = "." + domain;
  if (host.size() <= suffix.size() || host.compare(host.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  auto label = host.substr(0, host.size() - suffix.size());
  auto first = label.find('-'), last = label.rfind('-');
  if (label.find('.') != std::string::npos || first == std::string::npos || first == last) return std::nullopt;
  target t;
  if (!parse_port(std::string_view(label).substr(0, first), t.port)) return std::nullopt;
  t.name = label.substr(first + 1, last - first - 1);
  t.token = label.substr(last + 1);
  t.url = url.cStr();
  if (!valid_target(t)) return std::nullopt;
  return t;
}

// "/preview/{name}/{port}/{token}/rest"; the prefix is cut before the sandbox sees the URL.
std::optional<target> from_path(std::string_view url) {
  constexpr std::string_view prefix = "/preview/";
  if (url.substr(0, prefix.size()) != prefix) return std::nullopt;
  auto rest = url.substr(prefix.size());
  std::string_view parts[3];
  for (auto& p : parts) {
    auto end = rest.find_first_of("/?");
    p = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    if (&p != &parts[2]) {
      if (rest.empty() || rest[0] != '/') return std::nullopt;
      rest.remove_prefix(1);
    }
  }
  target t;
  t.name = std::string(parts[0]);
  t.token = std::string(parts[2]);
  if (!parse_port(parts[1], t.port) || !valid_target(t)) return std::nullopt;
  if (rest.empty() || rest[0] == '?') {
    // Relative links of the page resolve against a directory: add the slash.
    t.redirect = std::string(prefix) + t.name + "/" + std::to_string(t.port) + "/" + t.token + "/" + std::string(rest);
  } else {
    t.url = std::string(rest);
  }
  return t;
}

class random_entropy final : public kj::EntropySource {
 public:
  void generate(kj::ArrayPtr<kj::byte> buffer) override {
    std::size_t got = 0;
    while (got < buffer.size()) {
      auto n = ::getrandom(buffer.begin() + got, buffer.size() - got, 0);
      if (n > 0) got += static_cast<std::size_t>(n);
    }
  }
};

// Remembers whether a response was begun, so that a failure before it becomes a 502.
class tracked_response final : public kj::HttpService::Response {
 public:
  explicit tracked_response(kj::HttpService::Response& inner) : inner_(inner) {}
  kj::Own<kj::AsyncOutputStream> send(uint status, kj::StringPtr text, const kj::HttpHeaders& headers,
                                      kj::Maybe<uint64_t> size) override {
    sent = true;
    return inner_.send(status, text, headers, size);
  }
  kj::Own<kj::WebSocket> acceptWebSocket(const kj::HttpHeaders& headers) override {
    sent = true;
    return inner_.acceptWebSocket(headers);
  }
  bool sent = false;

 private:
  kj::HttpService::Response& inner_;
};

struct proxy_error {
  unsigned status;
  std::string text;
};

}  // namespace

struct preview_server::impl final : kj::HttpService, kj::HttpServerErrorHandler, kj::TaskSet::ErrorHandler {
  impl(kj::AsyncIoContext& io, rpc_context& ctx, preview_options options)
      : io(io), ctx(ctx), options(std::move(options)), table_builder(), expect(table_builder.add("Expect")),
        table_own(table_builder.build()), table(*table_own), tasks(*this) {
    own_netns = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    KJ_SYSCALL(own_netns, "open /proc/thread-self/ns/net");
  }
  ~impl() noexcept(false) {
    clients.clear();
    if (own_netns >= 0) ::close(own_netns);
  }

  // 127.0.0.1:port inside one start of a sandbox: the socket is created in its network
  // namespace (setns there and back on this thread), so it reaches its loopback and nothing
  // else; the daemon's own ports live in another namespace.
  class sandbox_address final : public kj::NetworkAddress {
   public:
    sandbox_address(impl& srv, std::uint64_t sandbox_id, std::uint16_t port) : srv_(srv), id_(sandbox_id), port_(port) {}
    kj::Promise<kj::Own<kj::AsyncIoStream>> connect() override {
      int fd = srv_.socket_in(id_);
      if (fd < 0) return KJ_EXCEPTION(DISCONNECTED, "sandbox not running");
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(port_);
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      return srv_.io.lowLevelProvider->wrapConnectingSocketFd(
          fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr,
          kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP | kj::LowLevelAsyncIoProvider::ALREADY_CLOEXEC |
              kj::LowLevelAsyncIoProvider::ALREADY_NONBLOCK);
    }
    kj::Own<kj::ConnectionReceiver> listen() override { KJ_UNIMPLEMENTED("a sandbox address only connects"); }
    kj::Own<kj::NetworkAddress> clone() override { return kj::heap<sandbox_address>(srv_, id_, port_); }
    kj::String toString() override { return kj::str("sandbox ", id_, " port ", port_); }

   private:
    impl& srv_;
    std::uint64_t id_;
    std::uint16_t port_;
  };

  int socket_in(std::uint64_t sandbox_id) {
    KJ_IF_MAYBE(net, ctx.host.network(sandbox_id)) {
      if (::setns(net->netns_fd, CLONE_NEWNET) < 0) return -1;
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (::setns(own_netns, CLONE_NEWNET) < 0) {
        // This thread would now serve every connection from inside a sandbox: never go on.
        spdlog::critical("event=setns_back_failed errno={}", errno);
        std::abort();
      }
      return fd;
    }
    return -1;
  }

  // Upstream clients (pooled keep-alive connections), one per sandbox start and port.
  struct upstream {
    kj::Own<sandbox_address> address;
    kj::Own<kj::HttpClient> client;
    kj::Own<kj::HttpService> service;
  };
  upstream& upstream_for(std::uint64_t sandbox_id, int init_pid, std::uint16_t port) {
    auto key = std::make_tuple(sandbox_id, init_pid, port);
    auto it = clients.find(key);
    if (it != clients.end()) return it->second;
    // Clients of an earlier start of this sandbox are dead: drop them.
    for (auto i = clients.begin(); i != clients.end();)
      i = std::get<0>(i->first) == sandbox_id && std::get<1>(i->first) != init_pid ? clients.erase(i) : std::next(i);
    upstream u;
    u.address = kj::heap<sandbox_address>(*this, sandbox_id, port);
    kj::HttpClientSettings settings;
    settings.entropySource = entropy;
    u.client = kj::newHttpClient(io.provider->getTimer(), table, *u.address, settings);
    u.service = kj::newHttpService(*u.client);
    return clients.emplace(key, kj::mv(u)).first->second;
  }

  // --- which sandbox, and is the token right ------------------------------------------
  struct known_sandbox {
    std::uint64_t id = 0;
    std::vector<actors::exposed_port> ports;
  };

  // The sandbox id when `t` names an exposed port with its token; else rejects with 404.
  kj::Promise<std::uint64_t> authorize(const target& t) {
    auto check = [t](const known_sandbox& k) -> kj::Maybe<std::uint64_t> {
      for (auto& p : k.ports)
        if (p.port == t.port && same_token(t.token, p.token)) return k.id;  // (given, expected)
      return nullptr;
    };
    auto it = known.find(t.name);
    if (it != known.end()) {
      KJ_IF_MAYBE(id, check(it->second)) { return *id; }
      bool port_known = false;
      for (auto& p : it->second.ports) port_known |= p.port == t.port;
      if (port_known) return not_found();  // Wrong token: no need to ask the sandbox.
    }
    auto name = t.name;
    return ctx.calls
        .call<actors::core::preview_target>([this, name](auto cb) { ctx.core.find_preview(name, std::move(cb)); })
        .then(
            [this, name, check](actors::core::preview_target found) -> kj::Promise<std::uint64_t> {
              auto& k = known[name];
              k.id = found.sandbox_id;
              k.ports = std::move(found.ports);
              KJ_IF_MAYBE(id, check(k)) { return *id; }
              return not_found();
            },
            [](kj::Exception&&) -> kj::Promise<std::uint64_t> { return not_found(); });
  }
  static kj::Promise<std::uint64_t> not_found() { return KJ_EXCEPTION(FAILED, "warren-preview: 404"); }

  // --- keeping the sandbox awake while requests run -----------------------------------
  struct awake_entry {
    std::string name;
    int active = 0;
    bool held = false;
    kj::Maybe<kj::ForkedPromise<void>> holding;
    std::uint64_t linger = 0;
  };

  // Resolves once the sandbox runs and is held.
  kj::Promise<void> acquire(std::uint64_t id, const std::string& name) {
    auto& e = awake[id];
    e.name = name;
    ++e.active;
    ++e.linger;
    if (!e.held && e.holding == nullptr) {
      e.holding = ctx.calls.call<std::uint64_t>([this, name, id](auto cb) { ctx.core.hold(name, id, std::move(cb), true); })
                      .then([this, id](std::uint64_t) { awake[id].held = true; })
                      .fork();
    }
    KJ_IF_MAYBE(h, e.holding) { return h->addBranch(); }
    return kj::READY_NOW;
  }

  void finish(std::uint64_t id) {
    auto it = awake.find(id);
    if (it == awake.end()) return;
    auto& e = it->second;
    if (--e.active > 0) return;
    if (!e.held) {  // The hold failed: nothing to release.
      awake.erase(it);
      return;
    }
    auto gen = e.linger;
    tasks.add(io.provider->getTimer().afterDelay(options.linger_ms * kj::MILLISECONDS).then([this, id, gen]() {
      auto it = awake.find(id);
      if (it == awake.end() || it->second.active > 0 || it->second.linger != gen) return;
      ctx.core.release(it->second.name, id, true);
      awake.erase(it);
    }));
  }

  // While a sandbox's restart_on_wake processes come back (after a wake or a restart of the
  // daemon), a request waits for its port: it tries until the port accepts or the window
  // closes. Otherwise nothing will open a closed port by itself: the request gets 502 at once.
  kj::Promise<void> wait_for_port(std::uint64_t id, std::uint16_t port) {
    auto it = restarting.find(id);
    if (it == restarting.end() || std::chrono::steady_clock::now() >= it->second) return kj::READY_NOW;
    // Not running (put to sleep since we held it): the caller wakes it again.
    if (ctx.host.network(id) == nullptr) return kj::READY_NOW;
    sandbox_address addr(*this, id, port);
    return addr.connect().then([](kj::Own<kj::AsyncIoStream>) -> kj::Promise<void> { return kj::READY_NOW; },
                               [this, id, port](kj::Exception&&) -> kj::Promise<void> {
      return io.provider->getTimer().afterDelay(50 * kj::MILLISECONDS).then([this, id, port]() {
        return wait_for_port(id, port);
      });
    });
  }

  // --- the HTTP service ------------------------------------------------------------------
  kj::Promise<void> request(kj::HttpMethod method, kj::StringPtr url, const kj::HttpHeaders& headers,
                            kj::AsyncInputStream& body, Response& response) override {
    std::optional<target> t;
    KJ_IF_MAYBE(host, headers.get(kj::HttpHeaderId::HOST)) { t = from_host(host->cStr(), options.domain, url); }
    // The daemon's own pages (not on a preview host, where every path is the sandbox's).
    if (!t && is_terminal_path(url)) return serve_terminal(ctx, table, url, headers, response);
    if (!t) t = from_path(url.cStr());
    if (!t) return reply(response, 404, "Not Found", "not found\n");
    if (!t->redirect.empty()) {
      kj::HttpHeaders h(table);
      h.set(kj::HttpHeaderId::LOCATION, kj::StringPtr(t->redirect.c_str(), t->redirect.size()));
      return response.sendError(308, "Permanent Redirect", h);
    }
    auto tgt = kj::heap<target>(std::move(*t));
    auto& tr = *tgt;
    return authorize(tr)
        .then(
            [this, &tr, method, &headers, &body, &response](std::uint64_t id) {
              return proxy(tr, id, method, headers, body, response, true);
            },
            [this, &response](kj::Exception&& e) -> kj::Promise<void> {
              if (std::string(e.getDescription().cStr()).find("warren-preview: 404") == std::string::npos) return kj::mv(e);
              return reply(response, 404, "Not Found", "not found\n");
            })
        .attach(kj::mv(tgt));
  }

  // Wakes and holds the sandbox, waits for the port after a wake, and forwards the request.
  kj::Promise<void> proxy(const target& tr, std::uint64_t id, kj::HttpMethod method, const kj::HttpHeaders& headers,
                          kj::AsyncInputStream& body, Response& response, bool first_attempt) {
    return acquire(id, tr.name)
        .then([this, &tr, id]() { return wait_for_port(id, static_cast<std::uint16_t>(tr.port)); })
        .then(
            [this, &tr, id, method, &headers, &body, &response, first_attempt]() -> kj::Promise<void> {
              KJ_IF_MAYBE(net, ctx.host.network(id)) { return forward(tr, id, net->init_pid, method, headers, body, response); }
              // Held, yet not running: it was put to sleep on request (a hold of ours does
              // not stop that) or its init died. Let go and wake it once more.
              auto it = awake.find(id);
              if (it != awake.end() && it->second.held) {
                ctx.core.release(tr.name, id, true);
                it->second.held = false;
                it->second.holding = nullptr;
              }
              if (it != awake.end()) --it->second.active;
              if (first_attempt) return proxy(tr, id, method, headers, body, response, false);
              ++awake[id].active;  // finish() below ends this request's share.
              return reply(response, 503, "Service Unavailable", "sandbox " + tr.name + " stopped; retry\n");
            },
            [this, &tr, &response](kj::Exception&& e) -> kj::Promise<void> {
              // The hold failed (the sandbox could not start) or the port never opened.
              std::string d = e.getDescription().cStr();
              if (d.find("Connection refused") != std::string::npos || d.find("sandbox not running") != std::string::npos)
                return not_listening(response, tr);
              auto err = error::from_string(d);
              spdlog::info("event=preview_failed sandbox={} port={} reason=\"{}\"", tr.name, tr.port, err.message);
              return reply(response, 503, "Service Unavailable", "sandbox " + tr.name + " is not available: " + err.message + "\n");
            })
        .then([this, id, first_attempt]() { if (first_attempt) finish(id); },
              [this, id, first_attempt](kj::Exception&& e) {
                if (first_attempt) finish(id);
                kj::throwFatalException(kj::mv(e));
              });
  }

  kj::Promise<void> forward(const target& tr, std::uint64_t id, int init_pid, kj::HttpMethod method,
                            const kj::HttpHeaders& headers, kj::AsyncInputStream& body, Response& response) {
    auto& up = upstream_for(id, init_pid, static_cast<std::uint16_t>(tr.port));
    auto h = kj::heap(headers.clone());
    KJ_IF_MAYBE(host, headers.get(kj::HttpHeaderId::HOST)) { h->add(kj::str("X-Forwarded-Host"), kj::str(*host)); }
    h->add(kj::str("X-Forwarded-Proto"), kj::str("http"));
    // KJ's client takes an interim "100 Continue" for the response: the server must not
    // send one. (A client that sent Expect waits its own timeout, curl 1 s, then sends.)
    h->unset(expect);
    auto tracked = kj::heap<tracked_response>(response);
    auto& trk = *tracked;
    auto url = kj::StringPtr(tr.url.c_str(), tr.url.size());
    // WebSockets through KJ's adapter; HTTP bodies through our pump (KJ's moves 4 KiB per
    // read and write, which held the proxy at a sixth of the direct throughput).
    auto forwarded = headers.isWebSocket() ? up.service->request(method, url, *h, body, trk)
                                           : forward_http(*up.client, method, url, *h, body, trk);
    return kj::mv(forwarded)
        .catch_([this, &tr, &trk, &response](kj::Exception&& e) -> kj::Promise<void> {
          if (trk.sent) return kj::mv(e);  // Mid-response: the connection ends.
          spdlog::debug("event=preview_upstream_failed sandbox={} port={} reason=\"{}\"", tr.name, tr.port,
                        e.getDescription().cStr());
          return not_listening(response, tr);
        })
        .attach(kj::mv(h), kj::mv(tracked));
  }

  static kj::Promise<void> pump(kj::AsyncInputStream& in, kj::AsyncOutputStream& out, kj::Array<kj::byte> buf) {
    auto* data = buf.begin();
    auto size = buf.size();
    return in.tryRead(data, 1, size).then([&in, &out, buf = kj::mv(buf)](std::size_t n) mutable -> kj::Promise<void> {
      if (n == 0) return kj::READY_NOW;
      auto* data = buf.begin();
      return out.write(data, n).then([&in, &out, buf = kj::mv(buf)]() mutable { return pump(in, out, kj::mv(buf)); });
    });
  }

  static kj::Promise<void> forward_http(kj::HttpClient& client, kj::HttpMethod method, kj::StringPtr url,
                                        const kj::HttpHeaders& headers, kj::AsyncInputStream& body, Response& response) {
    auto length = body.tryGetLength();
    auto req = client.request(method, url, headers, length);
    kj::Promise<void> upload = kj::READY_NOW;
    bool empty = false;
    KJ_IF_MAYBE(l, length) { empty = *l == 0; }
    if (!empty && req.body.get() != nullptr)
      upload = pump(body, *req.body, kj::heapArray<kj::byte>(pump_bytes)).attach(kj::mv(req.body)).eagerlyEvaluate(nullptr);
    else
      req.body = nullptr;
    auto download = req.response.then([&response](kj::HttpClient::Response r) {
      auto out = response.send(r.statusCode, r.statusText, *r.headers, r.body->tryGetLength());
      auto p = pump(*r.body, *out, kj::heapArray<kj::byte>(pump_bytes));
      return p.attach(kj::mv(out), kj::mv(r.body));
    });
    return kj::joinPromises(kj::arr(kj::mv(upload), kj::mv(download)));
  }
  static constexpr std::size_t pump_bytes = 256 * 1024;

  kj::Promise<void> not_listening(Response& response, const target& t) {
    return reply(response, 502, "Bad Gateway",
                 "nothing accepts connections on port " + std::to_string(t.port) + " in sandbox " + t.name +
                     " (yet): start a server there that listens on 0.0.0.0 or 127.0.0.1\n");
  }

  kj::Promise<void> reply(Response& response, unsigned status, kj::StringPtr text, std::string body) {
    kj::HttpHeaders h(table);
    h.set(kj::HttpHeaderId::CONTENT_TYPE, "text/plain; charset=utf-8");
    auto out = response.send(status, text, h, body.size());
    auto data = kj::heapString(body.data(), body.size());
    auto p = out->write(data.begin(), data.size());
    return p.attach(kj::mv(out), kj::mv(data));
  }

  // HttpServerErrorHandler: never show an exception's text to a client.
  kj::Promise<void> handleApplicationError(kj::Exception e, kj::Maybe<Response&> response) override {
    spdlog::debug("event=preview_error reason=\"{}\"", e.getDescription().cStr());
    if (e.getType() == kj::Exception::Type::DISCONNECTED) return kj::READY_NOW;
    KJ_IF_MAYBE(r, response) { return reply(*r, 502, "Bad Gateway", "the sandbox's server failed\n"); }
    return kj::READY_NOW;
  }

  void taskFailed(kj::Exception&& e) override {
    spdlog::debug("event=preview_task_failed reason=\"{}\"", e.getDescription().cStr());
  }

  kj::AsyncIoContext& io;
  rpc_context& ctx;
  preview_options options;
  kj::HttpHeaderTable::Builder table_builder;
  kj::HttpHeaderId expect;
  kj::Own<kj::HttpHeaderTable> table_own;
  kj::HttpHeaderTable& table;
  random_entropy entropy;
  int own_netns = -1;
  std::uint16_t port = 0;
  std::set<std::uint32_t> daemon_ports;
  std::unordered_map<std::string, known_sandbox> known;
  std::unordered_map<std::uint64_t, awake_entry> awake;
  std::unordered_map<std::uint64_t, std::chrono::steady_clock::time_point> restarting;  // Until when.
  std::map<std::tuple<std::uint64_t, int, std::uint16_t>, upstream> clients;
  kj::TaskSet tasks;
  kj::Maybe<kj::Own<kj::HttpServer>> server;
};

preview_server::preview_server(kj::AsyncIoContext& io, rpc_context& ctx, preview_options options)
    : impl_(std::make_unique<impl>(io, ctx, std::move(options))) {}

preview_server::~preview_server() noexcept(false) {}

kj::Promise<void> preview_server::serve(kj::Own<kj::ConnectionReceiver> listener, std::uint16_t port) {
  impl_->port = port;
  impl_->daemon_ports.insert(port);
  kj::HttpServerSettings settings;
  settings.errorHandler = *impl_;
  auto server = kj::heap<kj::HttpServer>(impl_->io.provider->getTimer(), impl_->table, *impl_, settings);
  auto promise = server->listenHttp(*listener).attach(kj::mv(listener));
  impl_->server = kj::mv(server);
  return promise;
}

std::string preview_server::host_url(const std::string& name, std::uint32_t port, const std::string& token) const {
  return "http://" + std::to_string(port) + "-" + name + "-" + token + "." + impl_->options.domain +
         (impl_->port == 80 ? "" : ":" + std::to_string(impl_->port)) + "/";
}

std::string preview_server::path_url(const std::string& name, std::uint32_t port, const std::string& token) const {
  return "http://" + impl_->options.domain + (impl_->port == 80 ? "" : ":" + std::to_string(impl_->port)) +
         "/preview/" + name + "/" + std::to_string(port) + "/" + token + "/";
}

bool preview_server::is_daemon_port(std::uint32_t port) const { return impl_->daemon_ports.count(port) > 0; }
void preview_server::add_daemon_port(std::uint32_t port) { impl_->daemon_ports.insert(port); }

void preview_server::forget(const std::string& name) { impl_->known.erase(name); }

void preview_server::restarts_began(std::uint64_t sandbox_id) {
  impl_->restarting[sandbox_id] = std::chrono::steady_clock::now() + std::chrono::milliseconds(impl_->options.wake_wait_ms);
}

void preview_server::restarts_done(std::uint64_t sandbox_id, bool any) {
  if (!any) impl_->restarting.erase(sandbox_id);
}

}  // namespace warren::gateway
