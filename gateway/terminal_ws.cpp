#include "gateway/terminal_ws.hpp"

#include <capnp/compat/json.h>
#include <capnp/message.h>
#include <spdlog/spdlog.h>

#include <deque>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>

#include "gateway/rpc_server.hpp"
#include "wire/json.hpp"
#include "wire/names.hpp"
#include "wire/process.capnp.h"
#include "wire/warren.capnp.h"

namespace warren::gateway {
namespace {

constexpr std::size_t max_frame = 64 * 1024;  // Client frames; larger ones close the socket (1009).
constexpr std::string_view prefix = "/terminal/";

std::string percent_decoded(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i] == '+' ? ' ' : s[i]);
    }
  }
  return out;
}

struct terminal_query {
  std::string name, token, id, session;
  std::uint16_t cols = 80, rows = 24;
  std::string error;  // Non-empty: a 400 with this.
};

terminal_query parse(std::string_view url) {
  terminal_query q;
  auto rest = url.substr(prefix.size());
  auto qm = rest.find('?');
  auto path = rest.substr(0, qm);
  auto slash = path.find('/');
  if (slash == std::string_view::npos || path.substr(slash) != "/ws") {
    q.error = "the terminal endpoint is /terminal/{sandbox}/ws";
    return q;
  }
  q.name = std::string(path.substr(0, slash));
  std::map<std::string, std::string> params;
  if (qm != std::string_view::npos) {
    auto query = rest.substr(qm + 1);
    while (!query.empty()) {
      auto amp = query.find('&');
      auto pair = query.substr(0, amp);
      auto eq = pair.find('=');
      params[std::string(pair.substr(0, eq))] = eq == std::string_view::npos ? "" : percent_decoded(pair.substr(eq + 1));
      if (amp == std::string_view::npos) break;
      query = query.substr(amp + 1);
    }
  }
  q.token = params["token"];
  q.id = params["id"];
  q.session = params["session"];
  for (auto [key, field] : {std::pair{"cols", &q.cols}, std::pair{"rows", &q.rows}}) {
    auto it = params.find(key);
    if (it == params.end()) continue;
    char* end = nullptr;
    auto n = std::strtoul(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || n < 1 || n > 1000) {
      q.error = std::string(key) + " must be 1-1000";
      return q;
    }
    *field = static_cast<std::uint16_t>(n);
  }
  return q;
}

std::string describe(const kj::Exception& e) {
  std::string d = e.getDescription().cStr();
  const std::string p = "remote exception: ";
  while (d.rfind(p, 0) == 0) d = d.substr(p.size());
  auto err = error::from_string(d);
  return err.code == errc::internal ? "internal error" : err.message;
}

// One open terminal socket. What goes to the client waits in a queue that one writer loop
// (owned by the request handler, like the socket itself) empties: the terminal's output sink
// only ever touches the queue, so the socket can go when the handler ends even if the agent
// still holds the sink. A slow client fills the queue to `high_water`; then the sink's writes
// wait, the agent's ring buffer moves on, and the client later gets what is still buffered
// (the daemon never buffers more than that).
struct session : kj::Refcounted {
  static constexpr std::size_t high_water = 1 << 20;

  session(rpc_context& c, kj::Own<kj::WebSocket> w, wire::Process::Client p, std::string n, std::uint64_t id)
      : ctx(c), ws(kj::mv(w)), process(kj::mv(p)), name(std::move(n)), sandbox_id(id) {}
  ~session() { ctx.core.release(name, sandbox_id, true); }  // The soft hold of the socket.

  struct frame {
    kj::Array<kj::byte> bytes;
    bool text = false, close = false;
  };

  rpc_context& ctx;
  kj::Own<kj::WebSocket> ws;
  wire::Process::Client process;
  std::string name;
  std::uint64_t sandbox_id;
  std::deque<frame> queue;
  std::size_t queued = 0;
  bool finished = false, closed = false;
  kj::Maybe<kj::Own<kj::PromiseFulfiller<void>>> writer_wake;
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> room;  // Sink writes waiting for space.

  kj::Promise<void> push(frame f) {
    if (finished) return KJ_EXCEPTION(DISCONNECTED, "the terminal's socket is closed");
    queued += f.bytes.size();
    queue.push_back(kj::mv(f));
    KJ_IF_MAYBE(w, writer_wake) {
      (*w)->fulfill();
      writer_wake = nullptr;
    }
    if (queued < high_water) return kj::READY_NOW;
    auto paf = kj::newPromiseAndFulfiller<void>();
    room.push_back(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }
  kj::Promise<void> text(const std::string& t) {
    return push({kj::heapArray<kj::byte>(reinterpret_cast<const kj::byte*>(t.data()), t.size()), true, false});
  }
  kj::Promise<void> error(const std::string& message) {
    return text("{\"type\":\"error\",\"message\":" + wire::json_quote(message) + "}");
  }

  // Sends the queue in order; ends after a close frame.
  kj::Promise<void> write_loop() {
    if (queue.empty()) {
      auto paf = kj::newPromiseAndFulfiller<void>();
      writer_wake = kj::mv(paf.fulfiller);
      return paf.promise.then([this]() { return write_loop(); });
    }
    auto f = kj::mv(queue.front());
    queue.pop_front();
    queued -= f.bytes.size();
    if (queued < high_water / 4) {
      for (auto& r : room) r->fulfill();
      room.clear();
    }
    if (f.close) {
      closed = true;
      return ws->close(1000, "the terminal exited");
    }
    kj::Promise<void> sent = nullptr;
    if (f.text) {
      auto t = kj::heapString(reinterpret_cast<const char*>(f.bytes.begin()), f.bytes.size());
      kj::StringPtr ptr = t;
      sent = ws->send(ptr).attach(kj::mv(t));
    } else {
      auto bytes = f.bytes.asPtr().asConst();
      sent = ws->send(bytes).attach(kj::mv(f.bytes));
    }
    return sent.then([this]() { return write_loop(); });
  }

  // At the handler's end: nothing more is queued, waiting sink writes fail.
  void finish() {
    finished = true;
    queue.clear();
    writer_wake = nullptr;
    for (auto& r : room) r->reject(KJ_EXCEPTION(DISCONNECTED, "the terminal's socket is closed"));
    room.clear();
  }
};

// The terminal's output to the socket, as binary frames.
class socket_sink final : public wire::LogSink::Server {
 public:
  explicit socket_sink(kj::Own<session> s) : s_(kj::mv(s)) {}

 protected:
  kj::Promise<void> write(WriteContext context) override {
    return s_->push({kj::heapArray<kj::byte>(context.getParams().getData()), false, false});
  }
  kj::Promise<void> dropped(DroppedContext) override { return kj::READY_NOW; }
  kj::Promise<void> ended(EndedContext context) override {
    auto i = context.getParams().getInfo();
    int code = i.getStatus() == wire::ProcessStatus::EXITED ? i.getExitCode() : 128 + i.getSignal();
    auto done = s_->text("{\"type\":\"exit\",\"code\":" + std::to_string(code) + "}");
    auto* s = s_.get();
    return done.then([s]() { return s->push({kj::Array<kj::byte>(), false, true}); });
  }

 private:
  kj::Own<session> s_;
};

// A control message from the client: {"type":"resize","cols":N,"rows":N}.
kj::Promise<void> control(session& s, kj::StringPtr text) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<capnp::JsonValue>();
  capnp::JsonCodec codec;
  codec.setMaxNestingDepth(4);
  try {
    codec.decodeRaw(text, root);
  } catch (const kj::Exception&) {
    return s.error("text frames carry JSON control messages, e.g. {\"type\":\"resize\",\"cols\":80,\"rows\":24}");
  }
  if (!root.isObject()) return s.error("a control message is a JSON object");
  std::string type;
  double cols = 0, rows = 0;
  for (auto f : root.getObject()) {
    auto v = f.getValue();
    if (f.getName() == "type" && v.isString()) type = v.getString().cStr();
    if (f.getName() == "cols" && v.isNumber()) cols = v.getNumber();
    if (f.getName() == "rows" && v.isNumber()) rows = v.getNumber();
  }
  if (type != "resize") return s.error("unknown control message type '" + type.substr(0, 40) + "' (known: resize)");
  if (cols < 1 || cols > 1000 || rows < 1 || rows > 1000 || cols != static_cast<int>(cols) || rows != static_cast<int>(rows))
    return s.error("resize needs whole cols and rows of 1-1000");
  auto r = s.process.resizeRequest();
  r.setCols(static_cast<std::uint16_t>(cols));
  r.setRows(static_cast<std::uint16_t>(rows));
  auto* sp = &s;
  return r.send().ignoreResult().catch_([sp](kj::Exception&& e) { return sp->error(describe(e)); });
}

// The client's frames: bytes are keys, text is control, close ends the socket.
kj::Promise<void> read_frames(kj::Own<session> s) {
  auto* sp = s.get();
  return sp->ws->receive(max_frame).then([s = kj::mv(s)](kj::WebSocket::Message&& m) mutable -> kj::Promise<void> {
    auto* sp = s.get();
    kj::Promise<void> done = kj::READY_NOW;
    KJ_SWITCH_ONEOF(m) {
      KJ_CASE_ONEOF(text, kj::String) { done = control(*sp, text); }
      KJ_CASE_ONEOF(bytes, kj::Array<kj::byte>) {
        if (bytes.size() > 0) {
          auto w = sp->process.writeRequest(capnp::MessageSize{bytes.size() / 8 + 8, 0});
          w.setData(bytes);
          done = w.send();
        }
      }
      KJ_CASE_ONEOF(close, kj::WebSocket::Close) { return kj::READY_NOW; }
    }
    return done.then([s = kj::mv(s)]() mutable { return read_frames(kj::mv(s)); });
  });
}

kj::Promise<void> reply(kj::HttpHeaderTable& table, kj::HttpService::Response& response, unsigned status,
                        kj::StringPtr status_text, const std::string& body) {
  kj::HttpHeaders h(table);
  h.set(kj::HttpHeaderId::CONTENT_TYPE, "text/plain; charset=utf-8");
  auto out = response.send(status, status_text, h, body.size());
  auto text = kj::heapString(body.c_str(), body.size());
  auto& ref = *out;
  return ref.write(text.begin(), text.size()).attach(kj::mv(text), kj::mv(out));
}

// The page: xterm.js on a WebSocket to /terminal/NAME/ws; the terminal's id is kept in the
// tab's sessionStorage, so a reload reattaches and replays the screen.
constexpr const char* page_html = R"HTML(<!doctype html>
<html><head><meta charset="utf-8"><title>warren</title>
<link rel="stylesheet" href="/terminal/-/xterm.css">
<style>html,body{margin:0;height:100%;background:#000}#t{height:100%}</style></head>
<body><div id="t"></div>
<script src="/terminal/-/xterm.js"></script>
<script>
(function () {
  const name = decodeURIComponent(location.pathname.split('/')[2]);
  const token = new URLSearchParams(location.search).get('token') || '';
  const key = 'warren-terminal-' + name;
  const term = new Terminal({cursorBlink: true, rows: Math.max(10, Math.floor(innerHeight / 17)), cols: Math.max(20, Math.floor(innerWidth / 9))});
  term.open(document.getElementById('t'));
  window.warrenTerm = term;
  const id = sessionStorage.getItem(key);
  const q = new URLSearchParams({token: token, cols: term.cols, rows: term.rows});
  if (id) q.set('id', id);
  const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host +
                           '/terminal/' + encodeURIComponent(name) + '/ws?' + q);
  ws.binaryType = 'arraybuffer';
  ws.onmessage = (e) => {
    if (typeof e.data !== 'string') return term.write(new Uint8Array(e.data));
    const m = JSON.parse(e.data);
    if (m.type === 'ready') { sessionStorage.setItem(key, m.id); document.title = 'warren: ' + name; }
    else if (m.type === 'exit') { sessionStorage.removeItem(key); term.write('\r\n[exited: ' + m.code + ']\r\n'); }
    else if (m.type === 'error') term.write('\r\n[warren: ' + m.message + ']\r\n');
  };
  ws.onclose = () => term.write('\r\n[disconnected]\r\n');
  const enc = new TextEncoder();
  term.onData((d) => { if (ws.readyState === 1) ws.send(enc.encode(d)); });
  term.onResize((s) => { if (ws.readyState === 1) ws.send(JSON.stringify({type: 'resize', cols: s.cols, rows: s.rows})); });
})();
</script></body></html>
)HTML";

kj::Promise<void> send_file(kj::HttpHeaderTable& table, kj::HttpService::Response& response, const std::string& path,
                            const char* type) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return reply(table, response, 503, "Service Unavailable",
                 "xterm.js is not installed next to warrend (run tools/dev build, or pass --web-dir)\n");
  std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  kj::HttpHeaders h(table);
  h.set(kj::HttpHeaderId::CONTENT_TYPE, type);
  auto out = response.send(200, "OK", h, body.size());
  auto text = kj::heapString(body.c_str(), body.size());
  auto& ref = *out;
  return ref.write(text.begin(), text.size()).attach(kj::mv(text), kj::mv(out));
}

}  // namespace

bool is_terminal_path(kj::StringPtr url) { return std::string_view(url.cStr()).rfind(prefix, 0) == 0; }

kj::Promise<void> serve_terminal(rpc_context& ctx, kj::HttpHeaderTable& table, kj::StringPtr url,
                                 const kj::HttpHeaders& headers, kj::HttpService::Response& response) {
  std::string_view u = url.cStr();
  auto path = u.substr(0, u.find('?'));
  // The page's scripts ('-' starts no sandbox name): public library files.
  if (path == "/terminal/-/xterm.js")
    return send_file(table, response, ctx.web_dir + "/node_modules/@xterm/xterm/lib/xterm.js", "text/javascript");
  if (path == "/terminal/-/xterm.css")
    return send_file(table, response, ctx.web_dir + "/node_modules/@xterm/xterm/css/xterm.css", "text/css");
  if (path.find('/', prefix.size()) == std::string_view::npos) {
    // The page, for /terminal/NAME?token=T (its WebSocket checks the token again).
    auto name = std::string(path.substr(prefix.size()));
    if (auto e = wire::validate_sandbox_name(name)) return reply(table, response, 400, "Bad Request", e.message + "\n");
    if (ctx.token.empty())
      return reply(table, response, 403, "Forbidden",
                   "terminals over HTTP need the daemon's bearer token: start warrend with --token-file\n");
    auto at = u.find("token=");
    auto given = at == std::string_view::npos ? std::string() : percent_decoded(u.substr(at + 6, u.find('&', at) - at - 6));
    if (!same_token(given, ctx.token)) return reply(table, response, 401, "Unauthorized", "a valid token is required\n");
    kj::HttpHeaders h(table);
    h.set(kj::HttpHeaderId::CONTENT_TYPE, "text/html; charset=utf-8");
    std::string body = page_html;
    auto out = response.send(200, "OK", h, body.size());
    auto text = kj::heapString(body.c_str(), body.size());
    auto& ref = *out;
    return ref.write(text.begin(), text.size()).attach(kj::mv(text), kj::mv(out));
  }
  auto q = parse(url.cStr());
  if (!q.error.empty()) return reply(table, response, 400, "Bad Request", q.error + "\n");
  if (auto e = wire::validate_sandbox_name(q.name)) return reply(table, response, 400, "Bad Request", e.message + "\n");
  if (!q.session.empty())
    if (auto e = wire::validate_sandbox_name(q.session)) return reply(table, response, 400, "Bad Request", "invalid session name\n");
  if (ctx.token.empty())
    return reply(table, response, 403, "Forbidden",
                 "terminals over HTTP need the daemon's bearer token: start warrend with --token-file\n");
  std::string given = q.token;
  headers.forEach([&given](kj::StringPtr name, kj::StringPtr value) {
    std::string n = name.cStr();
    for (auto& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string v = value.cStr();
    if (n == "authorization" && v.rfind("Bearer ", 0) == 0) given = v.substr(7);
  });
  if (!same_token(given, ctx.token)) return reply(table, response, 401, "Unauthorized", "a valid token is required\n");
  if (!headers.isWebSocket())
    return reply(table, response, 400, "Bad Request", "connect with a WebSocket (Upgrade: websocket)\n");

  // Through the public API's own objects, so that starting a terminal is journaled and
  // checked exactly like startProcess.
  auto warren = make_warren(ctx).castAs<wire::Warren>();
  auto sreq = warren.sandboxRequest();
  sreq.setName(q.name);
  sreq.initOptions().setCreateIfMissing(false);
  auto got = sreq.send();
  auto sandbox = got.getSandbox();
  kj::Promise<capnp::Response<wire::Sandbox::StartProcessResults>> started = nullptr;
  wire::Process::Client process = nullptr;
  kj::Promise<std::pair<bool, std::string>> checked = nullptr;  // (a terminal?, its id)
  if (q.id.empty()) {
    auto req = sandbox.startProcessRequest();
    auto argv = req.initRequest().initCommand().initArgv(1);
    argv.set(0, "/bin/bash");
    req.getRequest().setSession(q.session);
    auto o = req.initOptions();
    o.setPty(true);
    o.setCols(q.cols);
    o.setRows(q.rows);
    auto sent = req.send();
    process = sent.getProcess();
    checked = sent.then([](auto res) { return std::make_pair(true, std::string(res.getInfo().getId().cStr())); });
  } else {
    auto req = sandbox.getProcessRequest();
    req.setId(q.id);
    auto sent = req.send();
    process = sent.getProcess();
    checked = sent.then([](auto res) {
      return std::make_pair(res.getInfo().getPty(), std::string(res.getInfo().getId().cStr()));
    });
  }
  auto name = q.name;
  bool attach = !q.id.empty();
  auto cols = q.cols, rows = q.rows;
  return got.then([](auto res) { return res.getInfo().getId(); })
      .then([checked = kj::mv(checked)](std::uint64_t id) mutable {
        return checked.then([id](std::pair<bool, std::string> t) { return std::make_tuple(id, t.first, t.second); });
      })
      .then(
          [&ctx, &table, &response, process, name, attach, cols, rows](
              std::tuple<std::uint64_t, bool, std::string> r) mutable -> kj::Promise<void> {
            if (!std::get<1>(r)) return reply(table, response, 400, "Bad Request", "that process is not a terminal\n");
            auto sandbox_id = std::get<0>(r);
            auto terminal_id = std::get<2>(r);
            return ctx.calls.call<std::uint64_t>([&ctx, name, sandbox_id](auto cb) {
                     ctx.core.hold(name, sandbox_id, std::move(cb), true);
                   })
                .then([&ctx, &table, &response, process, name, sandbox_id, terminal_id, attach, cols, rows](
                          std::uint64_t) mutable {
                  kj::HttpHeaders h(table);
                  auto ws = response.acceptWebSocket(h);
                  auto s = kj::refcounted<session>(ctx, kj::mv(ws), process, name, sandbox_id);
                  spdlog::info("event=terminal_attached sandbox={} attach={}", name, attach);
                  kj::Promise<void> sized = kj::READY_NOW;
                  if (attach) {
                    auto r = process.resizeRequest();
                    r.setCols(cols);
                    r.setRows(rows);
                    sized = r.send().ignoreResult().catch_([](kj::Exception&&) {});
                  }
                  auto* sp = s.get();
                  // "id" (beyond Cloudflare's protocol) lets a page reattach after a reload.
                  auto ready = sized.then([sp, terminal_id]() {
                    return sp->text("{\"type\":\"ready\",\"id\":" + wire::json_quote(terminal_id) + "}");
                  });
                  auto follow = process.streamLogsRequest();
                  follow.setSink(kj::heap<socket_sink>(kj::addRef(*s)));
                  // The terminal's output into the queue (ends with the terminal, or fails
                  // once the socket is gone); the writer loop sends it; the input loop reads.
                  auto output = ready.then([follow = kj::mv(follow)]() mutable { return follow.send().ignoreResult(); })
                                    .catch_([](kj::Exception&&) {})
                                    .then([]() -> kj::Promise<void> { return kj::NEVER_DONE; });
                  auto writer = sp->write_loop();
                  auto input = read_frames(kj::addRef(*s));
                  return writer.exclusiveJoin(kj::mv(input))
                      .exclusiveJoin(kj::mv(output))
                      .catch_([sp](kj::Exception&& e) -> kj::Promise<void> {
                        if (sp->closed) return kj::READY_NOW;
                        // A frame over the limit or a broken socket: say why if we still can.
                        auto why = std::string(e.getDescription().cStr());
                        sp->closed = true;
                        return sp->ws->close(why.find("too large") != std::string::npos ? 1009 : 1011, "terminal error")
                            .catch_([](kj::Exception&&) {});
                      })
                      .then([sp]() {
                        sp->finish();
                        sp->ws = nullptr;  // KJ: gone before the handler returns.
                      })
                      .attach(kj::mv(s));
                });
          },
          [&table, &response](kj::Exception&& e) {
            auto d = describe(e);
            unsigned status = d.find("no sandbox") != std::string::npos || d.find("no process") != std::string::npos ? 404 : 400;
            return reply(table, response, status, status == 404 ? "Not Found" : "Bad Request", d + "\n");
          });
}

}  // namespace warren::gateway
