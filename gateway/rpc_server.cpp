#include "gateway/rpc_server.hpp"

#include "gateway/preview.hpp"

#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <functional>
#include <map>

#include "actors/sandbox_logic.hpp"
#include "wire/agent.capnp.h"
#include "wire/names.hpp"
#include "wire/files.capnp.h"
#include "wire/process.capnp.h"
#include "wire/warren.capnp.h"

namespace warren::gateway {

kj::Exception to_kj(const error& e) {
  auto type = kj::Exception::Type::FAILED;
  switch (e.code) {
    case errc::timeout:
    case errc::unavailable:
    case errc::shutting_down:
    case errc::busy:
      type = kj::Exception::Type::OVERLOADED;
      break;
    default:
      break;
  }
  std::string text = e.to_string();
  if (e.code == errc::internal) {
    // 5xx-style: no internals to the client; the details go to the log.
    spdlog::error("event=internal_error reason=\"{}\"", e.message);
    text = error{errc::internal, "internal error; the daemon's log has the details"}.to_string();
  }
  return kj::Exception(type, __FILE__, __LINE__, kj::str(text.c_str()));
}

namespace {

std::string str(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

wire::SandboxState to_wire(actors::sandbox_status s) {
  switch (s) {
    case actors::sandbox_status::starting:
      return wire::SandboxState::STARTING;
    case actors::sandbox_status::running:
      return wire::SandboxState::RUNNING;
    case actors::sandbox_status::hibernated:
      return wire::SandboxState::HIBERNATED;
    case actors::sandbox_status::needs_repair:
      return wire::SandboxState::NEEDS_REPAIR;
    default:
      return wire::SandboxState::STOPPED;
  }
}

// Copies strings into a Text list just initialized to their count.
void set_texts(capnp::List<capnp::Text>::Builder out, const std::vector<std::string>& in) {
  for (unsigned i = 0; i < in.size(); ++i) out.set(i, in[i]);
}

void fill(wire::SandboxInfo::Builder b, const actors::sandbox_info& i) {
  b.setName(i.name);
  b.setId(i.id);
  b.setState(to_wire(i.status));
  b.setCreatedAtMs(i.created_at_ms);
  b.setLastActivityMs(i.last_activity_ms);
  b.setSleepAfterMs(i.sleep_after_ms);
  b.setKeepAlive(i.keep_alive);
}

void fill(wire::SnapshotInfo::Builder b, const actors::snapshot_info& s) {
  b.setId(s.id);
  b.setLabel(s.label);
  b.setSandbox(s.sandbox);
  b.setSandboxId(s.sandbox_id);
  b.setCreatedAtMs(s.created_at_ms);
  b.setPauseUs(s.pause_us);
  auto ports = b.initPorts(static_cast<unsigned>(s.ports.size()));
  for (unsigned i = 0; i < s.ports.size(); ++i) ports.set(i, s.ports[i]);
  auto procs = b.initProcesses(static_cast<unsigned>(s.process_ids.size()));
  for (unsigned i = 0; i < s.process_ids.size(); ++i) {
    procs[i].setId(s.process_ids[i]);
    set_texts(procs[i].initCommand(static_cast<unsigned>(s.process_argvs[i].size())), s.process_argvs[i]);
  }
}

void fill(wire::BackupInfo::Builder b, const actors::backup_info& x) {
  b.setId(x.id);
  b.setSandbox(x.sandbox);
  b.setDir(x.dir);
  b.setBytes(x.bytes);
  b.setSha256(x.sha256);
  b.setCreatedAtMs(x.created_at_ms);
  b.setExpiresAtMs(x.expires_at_ms);
}

// Bytes of one exec's output handled so far, shared by the sink (which may outlive the
// call: the agent holds its capability until it lets go) and the exec. KJ thread only.
struct output_tally : kj::Refcounted {
  std::uint64_t out = 0, err = 0;
  // With collectOutput: the first `keep` bytes of each stream, for the result.
  std::size_t keep = 0;
  std::string kept[2];
  // finishOnCancel: once the client is gone, output is dropped and the command runs on.
  bool client_may_go = false;
  bool client_gone = false;
  bool truncated[2] = {false, false};

  void collect(int stream, capnp::Data::Reader data) {
    if (keep == 0) return;
    auto& k = kept[stream];
    auto room = keep - std::min(keep, k.size());
    k.append(reinterpret_cast<const char*>(data.begin()), std::min(room, data.size()));
    if (data.size() > room) truncated[stream] = true;
  }
  std::uint64_t want_out = 0, want_err = 0;
  kj::Maybe<kj::Own<kj::PromiseFulfiller<void>>> reached;

  void check() {
    if (out < want_out || err < want_err) return;
    KJ_IF_MAYBE(f, reached) {
      (*f)->fulfill();
      reached = nullptr;
    }
  }
  // Resolves once `o` and `e` bytes have passed: the agent's result can arrive before the
  // last stream calls have been dispatched here, and they must reach the client first.
  kj::Promise<void> wait_for(std::uint64_t o, std::uint64_t e) {
    want_out = o;
    want_err = e;
    if (out >= o && err >= e) return kj::READY_NOW;
    auto paf = kj::newPromiseAndFulfiller<void>();
    reached = kj::mv(paf.fulfiller);
    return kj::mv(paf.promise);
  }
};

// Counts and forwards a command's output from the agent to the client, chunk by chunk;
// flow control passes through (the agent's write completes when the client's does).
class forward_sink final : public wire::OutputSink::Server {
 public:
  forward_sink(kj::Maybe<wire::ExecOutput::Client> out, kj::Own<output_tally> tally)
      : out_(kj::mv(out)), tally_(kj::mv(tally)) {}

  kj::Promise<void> write(WriteContext context) override {
    auto p = context.getParams();
    auto data = p.getData();
    kj::Promise<void> sent = kj::READY_NOW;
    bool err = p.getFd() == 2;
    tally_->collect(err ? 1 : 0, data);
    if (tally_->client_gone) out_ = nullptr;
    KJ_IF_MAYBE(out, out_) {
      if (err) {
        auto req = out->writeStderrRequest(capnp::MessageSize{data.size() / 8 + 8, 0});
        req.setData(data);
        sent = req.send();
      } else {
        auto req = out->writeStdoutRequest(capnp::MessageSize{data.size() / 8 + 8, 0});
        req.setData(data);
        sent = req.send();
      }
    }
    (err ? tally_->err : tally_->out) += data.size();
    tally_->check();
    if (tally_->client_may_go) {
      auto* tally = tally_.get();
      return sent.catch_([tally](kj::Exception&&) { tally->client_gone = true; });
    }
    return sent;
  }

  kj::Promise<void> started(StartedContext context) override {
    KJ_IF_MAYBE(out, out_) {
      auto req = out->startedRequest();
      req.setStdin(context.getParams().getStdin());
      // A client that does not implement started() just does not feed stdin.
      return req.send().ignoreResult().catch_([](kj::Exception&&) {});
    }
    return kj::READY_NOW;
  }

 private:
  kj::Maybe<wire::ExecOutput::Client> out_;  // Null: the client takes the output from the result.
  kj::Own<output_tally> tally_;
};

// One exec in flight. If it is destroyed before its end was reported (the client cancelled
// or disconnected, which cancels the agent call and so kills the command), it reports the
// cancellation to the journal itself.
struct exec_run {
  rpc_context& ctx;
  std::string name;
  std::uint64_t sandbox_id;
  std::uint64_t exec_id = 0;
  bool reported = true;  // Nothing to report until the exec is journaled.
  std::uint64_t oom_kills_before = 0;
  kj::Own<output_tally> tally = kj::refcounted<output_tally>();
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  exec_run(rpc_context& c, std::string n, std::uint64_t id) : ctx(c), name(std::move(n)), sandbox_id(id) {}
  ~exec_run() {
    if (reported) return;
    actors::exec_outcome o;
    o.cancelled = true;
    o.duration_ms = elapsed_ms();
    o.stdout_bytes = tally->out;
    o.stderr_bytes = tally->err;
    spdlog::debug("event=exec_cancelled sandbox={} exec={}", name, exec_id);
    ctx.core.end_exec(name, sandbox_id, exec_id, o, [](const error&, bool) {});
  }
  std::uint64_t elapsed_ms() const {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::steady_clock::now() - started)
                                          .count());
  }
};

}  // namespace

kj::Promise<void> with_held_agent(rpc_context& ctx, const std::string& name, std::uint64_t id,
                                  std::function<kj::Promise<void>(wire::Agent::Client&)> call) {
  struct release_guard {
    rpc_context& ctx;
    std::string name;
    std::uint64_t id;
    bool held = false;
    ~release_guard() {
      if (held) ctx.core.release(name, id);
    }
  };
  auto guard = kj::heap<release_guard>(release_guard{ctx, name, id});
  auto* g = guard.get();
  return ctx.calls.call<std::uint64_t>([&ctx, name, id](auto cb) { ctx.core.hold(name, id, std::move(cb)); })
      .then([&ctx, g, call = std::move(call)](std::uint64_t sandbox_id) mutable -> kj::Promise<void> {
        g->held = true;
        KJ_IF_MAYBE(agent, ctx.host.agent(sandbox_id)) {
          return call(*agent).catch_([](kj::Exception&& e) -> kj::Promise<void> {
            std::string d = e.getDescription().cStr();
            const std::string prefix = "remote exception: ";
            while (d.rfind(prefix, 0) == 0) d = d.substr(prefix.size());
            auto err = error::from_string(d);
            if (err.code == errc::internal && d.rfind("internal: ", 0) != 0) {
              spdlog::warn("event=agent_call_failed reason=\"{}\"", d);
              err = make_error(errc::unavailable, "the sandbox stopped during the call; retry");
            }
            return kj::Promise<void>(to_kj(err));
          });
        }
        return to_kj(make_error(errc::unavailable, "the sandbox is not running; retry"));
      })
      .attach(kj::mv(guard));
}

namespace {

// Sandbox.files(): every call is forwarded, unchanged, to the Files capability of the
// sandbox's agent (which resolves paths inside the sandbox), after the sandbox was woken and
// while it is held awake. Capabilities in results (openWrite's FileSink) and in params
// (streamFile's ByteSink) pass through; Cap'n Proto proxies them.
class files_proxy final : public capnp::Capability::Server {
 public:
  files_proxy(rpc_context& ctx, std::string name, std::uint64_t id) : ctx_(ctx), name_(std::move(name)), id_(id) {}

  DispatchCallResult dispatchCall(std::uint64_t interface_id, std::uint16_t method_id,
                                  capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer> context) override {
    if (interface_id != capnp::typeId<wire::Files>())
      return {KJ_EXCEPTION(UNIMPLEMENTED, "not a Files method"), false};
    context.allowCancellation();
    return {with_held_agent(ctx_, name_, id_,
                            [interface_id, method_id, context](wire::Agent::Client& agent) mutable {
                              auto files = agent.filesRequest().send().getFiles();
                              auto params = context.getParams();
                              auto req = files.typelessRequest(interface_id, method_id, params.targetSize());
                              req.set(params);
                              context.releaseParams();
                              return req.send().then([context](capnp::Response<capnp::AnyPointer> res) mutable {
                                context.getResults().set(res);
                              });
                            }),
            false};
  }

 private:
  rpc_context& ctx_;
  std::string name_;
  std::uint64_t id_;
};

// A process's capability as clients get it: every call goes to the agent's Process as it
// is; a client following its output (streamLogs: `warren logs -f`, `warren shell`) holds the
// sandbox awake, softly (an explicit sleep still goes ahead), until it stops following.
class process_proxy final : public capnp::Capability::Server {
 public:
  process_proxy(rpc_context& ctx, std::string name, std::uint64_t id, wire::Process::Client target)
      : ctx_(ctx), name_(std::move(name)), id_(id), target_(kj::mv(target)) {}

  DispatchCallResult dispatchCall(std::uint64_t interface_id, std::uint16_t method_id,
                                  capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer> context) override {
    if (interface_id != capnp::typeId<wire::Process>())
      return {KJ_EXCEPTION(UNIMPLEMENTED, "not a Process method"), false};
    constexpr std::uint16_t stream_logs = 3, write = 7;
    context.allowCancellation();
    auto params = context.getParams();
    auto req = target_.typelessRequest(interface_id, method_id, params.targetSize());
    req.set(params);
    context.releaseParams();
    auto forwarded = req.send().then([context](capnp::Response<capnp::AnyPointer> res) mutable {
      context.getResults().set(res);
    });
    if (method_id != stream_logs) return {kj::mv(forwarded), method_id == write};
    struct soft_hold {
      rpc_context& ctx;
      std::string name;
      std::uint64_t id;
      bool held = false;
      ~soft_hold() {
        if (held) ctx.core.release(name, id, true);
      }
    };
    auto hold = kj::heap<soft_hold>(soft_hold{ctx_, name_, id_});
    auto* h = hold.get();
    auto held = ctx_.calls.call<std::uint64_t>([this](auto cb) { ctx_.core.hold(name_, id_, std::move(cb), true); })
                    .then([h](std::uint64_t) { h->held = true; }, [](kj::Exception&&) {});
    return {held.then([forwarded = kj::mv(forwarded)]() mutable { return kj::mv(forwarded); }).attach(kj::mv(hold)), false};
  }

 private:
  rpc_context& ctx_;
  std::string name_;
  std::uint64_t id_;
  wire::Process::Client target_;
};

// Told by the agent when a background process ended; journals it, after its start (a short
// process can end before its start is on disk).
class process_events final : public wire::ProcessEvents::Server {
 public:
  process_events(rpc_context& ctx, std::string name, std::uint64_t id, kj::Promise<void> started)
      : ctx_(ctx), name_(std::move(name)), id_(id), started_(started.fork()) {}

 protected:
  kj::Promise<void> ended(EndedContext context) override {
    auto p = context.getParams();
    auto info = p.getInfo();
    actors::process_update u;
    u.process_id = str(p.getId());
    u.status = info.getStatus() == wire::ProcessStatus::EXITED ? 1 : 2;
    u.exit_code = info.getExitCode();
    u.signal = info.getSignal();
    return started_.addBranch().then([this, u]() {
      return ctx_.calls.call<bool>([this, u](auto cb) { ctx_.core.process_event(name_, id_, u, std::move(cb)); })
          .ignoreResult();
    });
  }

 private:
  rpc_context& ctx_;
  std::string name_;
  std::uint64_t id_;
  kj::ForkedPromise<void> started_;
};

}  // namespace

kj::Promise<void> restart_processes(rpc_context& ctx, std::string name, std::uint64_t id, wire::Agent::Client agent) {
  auto journaled = kj::newPromiseAndFulfiller<void>();
  auto req = agent.restartProcessesRequest();
  req.setEvents(kj::heap<process_events>(ctx, name, id, kj::mv(journaled.promise)));
  auto fulfiller = kj::mv(journaled.fulfiller);
  if (ctx.preview) ctx.preview->restarts_began(id);
  return req.send()
      .then([&ctx, name, id](capnp::Response<wire::Agent::RestartProcessesResults> res) {
        if (ctx.preview) ctx.preview->restarts_done(id, res.getStarted().size() > 0);
        for (auto f : res.getFailed()) spdlog::warn("event=process_restart_failed sandbox={} reason=\"{}\"", name, f.cStr());
        auto started = kj::heapArrayBuilder<kj::Promise<void>>(res.getStarted().size());
        for (auto s : res.getStarted()) {
          actors::process_update u;
          u.process_id = s.getInfo().getId().cStr();
          for (auto a : s.getInfo().getCommand()) u.argv.push_back(a.cStr());
          u.cwd = s.getCwd().cStr();
          u.restart_on_wake = true;
          u.auto_cleanup = s.getAutoCleanup();
          u.session = s.getSession().cStr();
          spdlog::info("event=process_restarted sandbox={} process={}", name, u.process_id);
          started.add(ctx.calls.call<bool>([&ctx, name, id, u](auto cb) { ctx.core.process_event(name, id, u, std::move(cb)); })
                          .ignoreResult());
        }
        return kj::joinPromises(started.finish());
      })
      .then([fulfiller = kj::mv(fulfiller)]() mutable { fulfiller->fulfill(); },
            [&ctx, name, id](kj::Exception&& e) {
              if (ctx.preview) ctx.preview->restarts_done(id, false);
              spdlog::warn("event=process_restart_failed sandbox={} reason=\"{}\"", name, e.getDescription().cStr());
            });
}

namespace {

wire::ProcessStatus to_wire_status(std::uint8_t s) {
  switch (s) {
    case 0: return wire::ProcessStatus::RUNNING;
    case 1: return wire::ProcessStatus::EXITED;
    case 2: return wire::ProcessStatus::KILLED;
    default: return wire::ProcessStatus::LOST;
  }
}

class sandbox_impl final : public wire::Sandbox::Server {
 public:
  sandbox_impl(rpc_context& ctx, std::string name, std::uint64_t id) : ctx_(ctx), name_(std::move(name)), id_(id) {}

  // Runs a core call whose value is the sandbox's info, and answers with it.
  template <class Context, class Start>
  kj::Promise<void> answer_info(Context context, Start start) {
    return ctx_.calls.call<actors::sandbox_info>(kj::mv(start)).then([context](actors::sandbox_info i) mutable {
      fill(context.getResults().initInfo(), i);
    });
  }

  kj::Promise<void> info(InfoContext context) override {
    return answer_info(context, [this](auto cb) { ctx_.core.sandbox_info(name_, id_, std::move(cb)); });
  }

  kj::Promise<void> configure(ConfigureContext context) override {
    auto p = context.getParams();
    actors::sandbox_settings settings{p.getSleepAfterMs(), p.getKeepAlive(), true, {}};
    return answer_info(context, [this, settings](auto cb) { ctx_.core.configure(name_, id_, settings, std::move(cb)); });
  }

  kj::Promise<void> usage(UsageContext context) override {
    return ctx_.calls.call<actors::sandbox_usage>([this](auto cb) { ctx_.core.usage(name_, id_, std::move(cb)); })
        .then([context](actors::sandbox_usage u) mutable {
          auto out = context.getResults().initUsage();
          out.setCpuSeconds(static_cast<double>(u.cpu_us) / 1e6);
          out.setMemoryBytes(u.memory_bytes);
          out.setMemoryPeakBytes(u.memory_peak_bytes);
          out.setPids(static_cast<std::uint32_t>(u.pids));
          out.setDiskBytes(u.disk_bytes);
          out.setMemoryLimitBytes(u.memory_limit_bytes);
          out.setPidsLimit(static_cast<std::uint32_t>(u.pids_limit));
          out.setDiskLimitBytes(u.disk_limit_bytes);
        });
  }

  kj::Promise<void> setLimits(SetLimitsContext context) override {
    auto p = context.getParams();
    actors::sandbox_settings settings;
    settings.change_lifecycle = false;
    settings.change_limits = true;
    settings.limits = {p.getMemoryBytes(), p.getPidsMax(), p.getCpuMillis(), p.getDiskBytes()};
    return answer_info(context, [this, settings](auto cb) { ctx_.core.configure(name_, id_, settings, std::move(cb)); });
  }

  kj::Promise<void> hibernate(HibernateContext context) override {
    return answer_info(context, [this](auto cb) { ctx_.core.hibernate(name_, id_, std::move(cb)); });
  }

  kj::Promise<void> createSession(CreateSessionContext context) override {
    auto p = context.getParams();
    actors::exec_request check;  // The exec rules validate env and cwd.
    check.argv = {"true"};
    check.session = str(p.getName());
    check.cwd = str(p.getCwd());
    for (auto e : p.getEnv()) check.env.emplace_back(str(e.getName()), str(e.getValue()));
    if (auto e = actors::validate_session_name(check.session)) return to_kj(e);
    if (auto e = actors::validate_exec(check)) return to_kj(e);
    std::vector<std::string> env;
    std::map<std::string, std::string> merged;
    for (auto& [k, v] : actors::default_env(name_)) merged[k] = v;
    for (auto& [k, v] : check.env) merged[k] = v;
    for (auto& [k, v] : merged) env.push_back(k + "=" + v);
    auto cwd = check.cwd.empty() ? std::string("/workspace") : check.cwd;
    return with_held_agent(ctx_, name_, id_, [name = check.session, env, cwd](wire::Agent::Client& agent) {
      auto req = agent.createSessionRequest();
      req.setName(name);
      set_texts(req.initEnv(env.size()), env);
      req.setCwd(cwd);
      return req.send().ignoreResult();
    });
  }

  kj::Promise<void> listSessions(ListSessionsContext context) override {
    return with_held_agent(ctx_, name_, id_, [context](wire::Agent::Client& agent) mutable {
      return agent.listSessionsRequest().send().then([context](auto res) mutable {
        auto names = res.getNames();
        auto cwds = res.getCwds();
        auto out = context.getResults().initSessions(names.size());
        for (unsigned i = 0; i < names.size(); ++i) {
          out[i].setName(names[i]);
          if (i < cwds.size()) out[i].setCwd(cwds[i]);
        }
      });
    });
  }

  kj::Promise<void> deleteSession(DeleteSessionContext context) override {
    auto name = str(context.getParams().getName());
    if (auto e = actors::validate_session_name(name)) return to_kj(e);
    return with_held_agent(ctx_, name_, id_, [context, name](wire::Agent::Client& agent) mutable {
      auto req = agent.deleteSessionRequest();
      req.setName(name);
      return req.send().then([context](auto res) mutable { context.getResults().setExisted(res.getExisted()); });
    });
  }

  kj::Promise<void> startProcess(StartProcessContext context) override {
    auto p = context.getParams();
    auto r = p.getRequest();
    actors::exec_request req;
    auto command = r.getCommand();
    if (command.isShell()) req.argv = {"/bin/bash", "-c", str(command.getShell())};
    else
      for (auto a : command.getArgv()) req.argv.push_back(str(a));
    for (auto e : r.getEnv()) req.env.emplace_back(str(e.getName()), str(e.getValue()));
    req.cwd = str(r.getCwd());
    req.session = str(r.getSession());
    if (r.getStdin().size() > 0 || r.getStdinStream() || r.getCollectOutput() || r.getTimeoutMs())
      return to_kj(make_error(errc::invalid_argument,
                              "stdin, collectOutput and timeoutMs are for exec; a background process is read with "
                              "logs/streamLogs and ended with kill"));
    if (auto e = actors::validate_exec(req)) return to_kj(e);
    std::map<std::string, std::string> merged;
    for (auto& [k, v] : actors::default_env(name_)) merged[k] = v;
    auto options = p.getOptions();
    bool pty = options.getPty();
    if (pty) merged["TERM"] = "xterm-256color";  // What the client's terminal speaks, unless env says otherwise.
    for (auto& [k, v] : req.env) merged[k] = v;
    std::vector<std::string> env;
    for (auto& [k, v] : merged) env.push_back(k + "=" + v);
    auto cols = options.getCols(), rows = options.getRows();
    if (pty && (cols > 1000 || rows > 1000))
      return to_kj(make_error(errc::invalid_argument, "cols and rows must be 1-1000 (0: 80x24)"));
    auto id = str(options.getId());
    auto ring = options.getLogBytes();
    bool restart = options.getRestartOnWake();
    bool cleanup = options.getAutoCleanup();
    auto cwd = req.cwd.empty() ? std::string("/workspace") : req.cwd;
    bool shell = command.isShell();
    return with_held_agent(ctx_, name_, id_, [this, context, req, env, cwd, id, ring, restart, cleanup, shell, pty,
                                              cols, rows](wire::Agent::Client& agent) mutable {
      auto call = agent.startProcessRequest();
      call.setId(id);
      set_texts(call.initArgv(static_cast<unsigned>(req.argv.size())), req.argv);
      set_texts(call.initEnv(static_cast<unsigned>(env.size())), env);
      call.setCwd(cwd);
      call.setRingBytes(ring);
      call.setRestartOnWake(restart);
      call.setAutoCleanup(cleanup);
      call.setPty(pty);
      call.setCols(cols);
      call.setRows(rows);
      if (!req.session.empty()) {
        // The session's directory and environment apply unless the request set its own.
        call.setSession(req.session);
        call.setShell(shell);
        call.setCwdGiven(!req.cwd.empty());
        auto names = call.initCallEnv(static_cast<unsigned>(req.env.size()));
        for (unsigned i = 0; i < req.env.size(); ++i) names.set(i, req.env[i].first);
      }
      auto journaled = kj::newPromiseAndFulfiller<void>();
      call.setEvents(kj::heap<process_events>(ctx_, name_, id_, kj::mv(journaled.promise)));
      auto fulfiller = kj::mv(journaled.fulfiller);
      return call.send().then([this, context, req, cwd, restart, cleanup, fulfiller = kj::mv(fulfiller)](
                                  capnp::Response<wire::Agent::StartProcessResults> res) mutable {
        // Journaled before the client hears of it.
        actors::process_update u;
        u.process_id = res.getInfo().getId().cStr();
        u.argv = req.argv;
        u.cwd = res.getCwd().size() ? res.getCwd().cStr() : cwd;  // A session's own directory, if it applied.
        for (auto& kv : req.env) u.env_names.push_back(kv.first);
        u.restart_on_wake = restart;
        u.auto_cleanup = cleanup;
        u.session = req.session;
        auto started = ctx_.calls.call<bool>([this, u](auto cb) { ctx_.core.process_event(name_, id_, u, std::move(cb)); });
        return started.then([this, context, res = kj::mv(res), fulfiller = kj::mv(fulfiller)](bool) mutable {
          fulfiller->fulfill();
          auto out = context.getResults();
          out.setProcess(wrap_process(res.getProcess()));
          out.setInfo(res.getInfo());
        });
      });
    });
  }

  kj::Promise<void> listProcesses(ListProcessesContext context) override {
    // The journaled history (which survives hibernation and restarts) in order, with the
    // agent's live figures for the processes it still has.
    return ctx_.calls
        .call<std::vector<actors::process_update>>([this](auto cb) { ctx_.core.processes(name_, id_, std::move(cb)); })
        .then([this, context](std::vector<actors::process_update> history) mutable {
          return with_held_agent(ctx_, name_, id_, [context, history](wire::Agent::Client& agent) mutable {
            return agent.listProcessesRequest().send().then([context, history](auto res) mutable {
              auto live = res.getProcesses();
              // Each entry: the agent's live figures, or the journaled end (journaled as
              // running but gone from the agent: its sandbox restarted, so lost).
              std::vector<std::pair<std::size_t, kj::Maybe<wire::ProcessInfo::Reader>>> rows;
              auto wanted = context.getParams().getStatuses();
              for (std::size_t i = 0; i < history.size(); ++i) {
                auto& h = history[i];
                kj::Maybe<wire::ProcessInfo::Reader> found;
                for (auto l : live)
                  if (h.process_id == l.getId().cStr() && h.status == 0) found = l;
                // auto_cleanup: gone from the agent means ended (its end is being journaled).
                if (h.auto_cleanup && found == nullptr) continue;
                auto status = to_wire_status(h.status == 0 ? 3 : h.status);
                KJ_IF_MAYBE(l, found) { status = l->getStatus(); }
                bool keep = wanted.size() == 0;
                for (auto w : wanted) keep |= w == status;
                if (keep) rows.emplace_back(i, found);
              }
              auto out = context.getResults().initProcesses(static_cast<unsigned>(rows.size()));
              for (unsigned k = 0; k < rows.size(); ++k) {
                KJ_IF_MAYBE(l, rows[k].second) {
                  out.setWithCaveats(k, *l);
                  continue;
                }
                auto& h = history[rows[k].first];
                auto o = out[k];
                o.setId(h.process_id);
                set_texts(o.initCommand(static_cast<unsigned>(h.argv.size())), h.argv);
                o.setStatus(to_wire_status(h.status == 0 ? 3 : h.status));
                o.setExitCode(h.exit_code);
                o.setSignal(h.signal);
              }
            });
          });
        });
  }

  kj::Promise<void> getProcess(GetProcessContext context) override {
    auto id = str(context.getParams().getId());
    return with_held_agent(ctx_, name_, id_, [this, context, id](wire::Agent::Client& agent) mutable {
      auto req = agent.getProcessRequest();
      req.setId(id);
      return req.send().then([this, context](auto res) mutable {
        auto out = context.getResults();
        out.setProcess(wrap_process(res.getProcess()));
        out.setInfo(res.getInfo());
      });
    });
  }

  wire::Process::Client wrap_process(wire::Process::Client target) {
    return capnp::Capability::Client(kj::heap<process_proxy>(ctx_, name_, id_, kj::mv(target))).castAs<wire::Process>();
  }

  kj::Promise<void> killAllProcesses(KillAllProcessesContext context) override {
    auto signal = context.getParams().getSignal();
    return with_held_agent(ctx_, name_, id_, [context, signal](wire::Agent::Client& agent) mutable {
      auto req = agent.killAllProcessesRequest();
      req.setSignal(signal);
      return req.send().then([context](auto res) mutable { context.getResults().setCount(res.getCount()); });
    });
  }

  // Preview URLs: the ports are journaled by the sandbox's actor; the URLs are the gateway's.
  template <class Results>
  void fill_ports(Results out, const std::vector<actors::exposed_port>& ports) {
    for (unsigned i = 0; i < ports.size(); ++i) {
      auto o = out[i];
      o.setPort(ports[i].port);
      o.setName(ports[i].label);
      o.setUrl(ctx_.preview->host_url(name_, ports[i].port, ports[i].token));
      o.setPathUrl(ctx_.preview->path_url(name_, ports[i].port, ports[i].token));
    }
  }
  kj::Promise<void> ports_call(actors::ports_op op, std::uint32_t port, std::string label,
                               std::function<void(std::vector<actors::exposed_port>&)> answer) {
    if (!ctx_.preview)
      return to_kj(make_error(errc::unavailable, "preview URLs are off: start warrend with --http-listen ADDRESS:PORT"));
    if (op == actors::ports_op::expose && ctx_.preview->is_daemon_port(port))
      return to_kj(make_error(errc::invalid_argument, "port " + std::to_string(port) + " is one of the daemon's own"));
    return ctx_.calls
        .call<std::vector<actors::exposed_port>>(
            [this, op, port, label](auto cb) { ctx_.core.ports(name_, id_, op, port, label, std::move(cb)); })
        .then([this, op, answer = kj::mv(answer)](std::vector<actors::exposed_port> ports) mutable {
          // Revoked: the proxy forgets what it knew, before the client hears of it.
          if (op == actors::ports_op::unexpose) ctx_.preview->forget(name_);
          answer(ports);
        });
  }

  kj::Promise<void> exposePort(ExposePortContext context) override {
    auto p = context.getParams();
    return ports_call(actors::ports_op::expose, p.getPort(), str(p.getName()), [this, context](auto& ports) mutable {
      auto out = context.getResults().initPort();
      if (ports.empty()) return;
      auto& e = ports[0];
      out.setPort(e.port);
      out.setName(e.label);
      out.setUrl(ctx_.preview->host_url(name_, e.port, e.token));
      out.setPathUrl(ctx_.preview->path_url(name_, e.port, e.token));
    });
  }

  kj::Promise<void> unexposePort(UnexposePortContext context) override {
    return ports_call(actors::ports_op::unexpose, context.getParams().getPort(), "",
                      [context](auto& ports) mutable { context.getResults().setExisted(!ports.empty()); });
  }

  kj::Promise<void> listExposedPorts(ListExposedPortsContext context) override {
    return ports_call(actors::ports_op::list, 0, "", [this, context](auto& ports) mutable {
      fill_ports(context.getResults().initPorts(static_cast<unsigned>(ports.size())), ports);
    });
  }

  kj::Promise<void> snapshot(SnapshotContext context) override {
    auto label = str(context.getParams().getLabel());
    if (context.getParams().getWithMemory())
      return to_kj(make_error(errc::unsupported, "snapshots of process memory: " + ctx_.live_snapshot_note +
                                                     "; a snapshot without withMemory keeps the files"));
    return ctx_.calls
        .call<actors::snapshot_info>([this, label](auto cb) { ctx_.core.snapshot(name_, id_, label, std::move(cb)); })
        .then([context](actors::snapshot_info s) mutable { fill(context.getResults().initSnapshot(), s); });
  }

  kj::Promise<void> fork(ForkContext context) override {
    std::vector<std::string> names;
    for (auto n : context.getParams().getNames()) names.push_back(str(n));
    if (names.empty() || names.size() > max_forks)
      return to_kj(make_error(errc::invalid_argument, "fork takes 1 to " + std::to_string(max_forks) + " names"));
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (auto e = wire::validate_sandbox_name(names[i])) return to_kj(e);
      for (std::size_t k = 0; k < i; ++k)
        if (names[k] == names[i]) return to_kj(make_error(errc::invalid_argument, "fork names " + names[i] + " twice"));
    }
    // Names in use are refused before anything is made (no snapshot is left behind for them).
    return ctx_.calls.call<std::vector<actors::sandbox_info>>([this](auto cb) { ctx_.core.list(std::move(cb)); })
        .then([this, names](std::vector<actors::sandbox_info> all) -> kj::Promise<actors::snapshot_info> {
          for (auto& s : all)
            for (auto& n : names)
              if (s.name == n)
                return to_kj(make_error(errc::already_exists, "sandbox " + n + " exists: fork names must be new"));
          return ctx_.calls.call<actors::snapshot_info>(
              [this](auto cb) { ctx_.core.snapshot(name_, id_, "fork", std::move(cb)); });
        })
        .then([this, context, names](actors::snapshot_info snap) mutable {
          // The new sandboxes start in parallel (the registry journals their creation in turn).
          auto starts = kj::heapArrayBuilder<kj::Promise<actors::sandbox_info>>(names.size());
          for (auto& n : names) {
            actors::sandbox_settings settings;
            settings.from_snapshot = snap.id;
            starts.add(ctx_.calls.call<actors::sandbox_info>(
                [this, n, settings](auto cb) { ctx_.core.get_sandbox(n, true, settings, std::move(cb)); }));
          }
          return kj::joinPromises(starts.finish()).then([context, snap](kj::Array<actors::sandbox_info> made) mutable {
            auto res = context.getResults();
            fill(res.initSnapshot(), snap);
            auto out = res.initSandboxes(static_cast<unsigned>(made.size()));
            for (unsigned i = 0; i < made.size(); ++i) fill(out[i], made[i]);
          });
        });
  }
  static constexpr std::size_t max_forks = 16;

  kj::Promise<void> backup(BackupContext context) override {
    auto p = context.getParams();
    backup_request req;
    req.dir = str(p.getDir());
    for (auto x : p.getExcludes()) req.excludes.push_back(str(x));
    req.respect_gitignore = p.getRespectGitignore();
    req.ttl_ms = p.getTtlMs();
    return make_backup(ctx_, name_, id_, std::move(req)).then([this, context](actors::backup_info b) mutable {
      fill(context.getResults().initBackup(), b);
      // Expired backups go when new ones come (and at every start of the daemon).
      return sweep_backups(ctx_, false);
    });
  }

  kj::Promise<void> restoreBackup(RestoreBackupContext context) override {
    auto p = context.getParams();
    return restore_backup(ctx_, name_, id_, str(p.getId()), str(p.getDir()));
  }

  kj::Promise<void> restore(RestoreContext context) override {
    auto snap = context.getParams().getSnapshotId();
    return ctx_.calls
        .call<actors::sandbox_info>([this, snap](auto cb) { ctx_.core.restore(name_, id_, snap, std::move(cb)); })
        .then([context](actors::sandbox_info i) mutable { fill(context.getResults().initInfo(), i); });
  }

  kj::Promise<void> files(FilesContext context) override {
    context.getResults().setFiles(
        capnp::Capability::Client(kj::heap<files_proxy>(ctx_, name_, id_)).castAs<wire::Files>());
    return kj::READY_NOW;
  }

  kj::Promise<void> exec(ExecContext context) override {
    auto params = context.getParams();
    auto r = params.getRequest();
    bool finish_on_cancel = r.getFinishOnCancel();
    if (!finish_on_cancel) context.allowCancellation();  // A client that goes away kills its command.
    actors::exec_request req;
    auto command = r.getCommand();
    if (command.isShell()) {
      req.argv = {"/bin/bash", "-c", str(command.getShell())};
      req.shell = true;
    } else {
      for (auto a : command.getArgv()) req.argv.push_back(str(a));
    }
    for (auto e : r.getEnv()) req.env.emplace_back(str(e.getName()), str(e.getValue()));
    req.cwd = str(r.getCwd());
    req.timeout_ms = r.getTimeoutMs();
    req.session = str(r.getSession());
    auto in = r.getStdin();
    req.stdin_data.assign(reinterpret_cast<const char*>(in.begin()), in.size());
    req.stdin_stream = r.getStdinStream();
    kj::Maybe<wire::ExecOutput::Client> output;
    if (params.hasOutput()) output = params.getOutput();
    auto collect = r.getCollectOutput();
    if (collect > (16u << 20))
      return to_kj(make_error(errc::invalid_argument, "collectOutput is at most 16 MiB (16777216); stream larger output"));
    auto run = kj::heap<exec_run>(ctx_, name_, id_);
    auto* state = run.get();
    state->tally->keep = collect;
    state->tally->client_may_go = finish_on_cancel;

    return ctx_.calls
        .call<actors::exec_ticket>(
            [this, req = std::move(req)](auto cb) mutable { ctx_.core.begin_exec(name_, id_, std::move(req), std::move(cb)); })
        .then([this, state, output](actors::exec_ticket t) mutable {
          state->exec_id = t.exec_id;
          state->reported = false;
          state->started = std::chrono::steady_clock::now();
          state->oom_kills_before = ctx_.host.oom_kills(t.sandbox_id);
          KJ_IF_MAYBE(agent, ctx_.host.agent(t.sandbox_id)) {
            auto call = agent->execRequest();
            set_texts(call.initArgv(t.argv.size()), t.argv);
            set_texts(call.initEnv(t.env.size()), t.env);
            call.setCwd(t.cwd);
            call.setTimeoutMs(t.timeout_ms);
            call.setSession(t.session);
            call.setShell(t.shell);
            call.setStdin(kj::arrayPtr(reinterpret_cast<const kj::byte*>(t.stdin_data.data()), t.stdin_data.size()));
            set_texts(call.initCallEnv(t.call_env.size()), t.call_env);
            call.setCwdGiven(t.cwd_given);
            call.setStdinStream(t.stdin_stream);
            call.setSink(kj::heap<forward_sink>(kj::mv(output), kj::addRef(*state->tally)));
            return call.send().then(
                [this, state](capnp::Response<wire::Agent::ExecResults> res) -> kj::Promise<actors::exec_outcome> {
                  auto st = res.getStatus();
                  actors::exec_outcome o;
                  o.exit_code = st.getExitCode();
                  o.signal = st.getSignal();
                  o.timed_out = st.getTimedOut();
                  o.duration_ms = st.getDurationUs() / 1000;
                  o.oom_killed = ctx_.host.oom_kills(state->sandbox_id) > state->oom_kills_before;
                  return state->tally->wait_for(st.getStdoutBytes(), st.getStderrBytes())
                      .exclusiveJoin(ctx_.timer.afterDelay(10 * kj::SECONDS).then([state]() {
                        spdlog::warn("event=exec_output_incomplete exec={}", state->exec_id);
                      }))
                      .then([o]() { return o; });
                },
                [state](kj::Exception&& e) {
                  actors::exec_outcome o;
                  o.failed = "the sandbox stopped while the command ran";
                  o.duration_ms = state->elapsed_ms();
                  spdlog::debug("event=exec_link_failed exec={} reason=\"{}\"", state->exec_id, e.getDescription().cStr());
                  return o;
                });
          }
          actors::exec_outcome o;
          o.failed = "the sandbox is not running";
          return kj::Promise<actors::exec_outcome>(kj::mv(o));
        })
        .then([this, state, context, keep = collect](actors::exec_outcome o) mutable {
          o.stdout_bytes = state->tally->out;
          o.stderr_bytes = state->tally->err;
          state->reported = true;
          auto exec_id = state->exec_id;
          return ctx_.calls
              .call<bool>([this, exec_id, o](auto cb) { ctx_.core.end_exec(name_, id_, exec_id, o, std::move(cb)); })
              .then([context, o, exec_id, state, keep](bool) mutable -> kj::Promise<void> {
                if (!o.failed.empty()) return to_kj(make_error(errc::unavailable, o.failed + "; retry"));
                auto res = context.getResults().initResult();
                res.setExitCode(o.exit_code);
                res.setSignal(o.signal);
                res.setDurationMs(o.duration_ms);
                res.setTimedOut(o.timed_out);
                res.setStdoutBytes(o.stdout_bytes);
                res.setStderrBytes(o.stderr_bytes);
                res.setExecId(exec_id);
                res.setOomKilled(o.oom_killed);
                if (keep > 0) {
                  auto& t = *state->tally;
                  res.setStdout(kj::arrayPtr(reinterpret_cast<const kj::byte*>(t.kept[0].data()), t.kept[0].size()));
                  res.setStderr(kj::arrayPtr(reinterpret_cast<const kj::byte*>(t.kept[1].data()), t.kept[1].size()));
                  res.setStdoutTruncated(t.truncated[0]);
                  res.setStderrTruncated(t.truncated[1]);
                }
                return kj::READY_NOW;
              });
        })
        .attach(kj::mv(run));
  }

 private:
  rpc_context& ctx_;
  std::string name_;
  std::uint64_t id_;
};

class warren_impl final : public wire::Warren::Server {
 public:
  explicit warren_impl(rpc_context& ctx) : ctx_(ctx) {}

  kj::Promise<void> sandbox(SandboxContext context) override {
    auto p = context.getParams();
    auto name = str(p.getName());
    auto options = p.getOptions();  // Defaults apply when the client sent none.
    bool create = options.getCreateIfMissing();
    actors::sandbox_settings settings{options.getSleepAfterMs(), options.getKeepAlive(), options.getStart(),
                                      {options.getMemoryBytes(), options.getPidsMax(), options.getCpuMillis(), options.getDiskBytes()}};
    settings.from_snapshot = options.getFromSnapshot();
    return ctx_.calls
        .call<actors::sandbox_info>(
            [this, name, create, settings](auto cb) { ctx_.core.get_sandbox(name, create, settings, std::move(cb)); })
        .then([this, context](actors::sandbox_info i) mutable {
          auto res = context.getResults();
          fill(res.initInfo(), i);
          res.setSandbox(kj::heap<sandbox_impl>(ctx_, i.name, i.id));
        });
  }

  kj::Promise<void> list(ListContext context) override {
    return ctx_.calls.call<std::vector<actors::sandbox_info>>([this](auto cb) { ctx_.core.list(std::move(cb)); })
        .then([context](std::vector<actors::sandbox_info> all) mutable {
          auto out = context.getResults().initSandboxes(all.size());
          for (unsigned i = 0; i < all.size(); ++i) fill(out[i], all[i]);
        });
  }

  kj::Promise<void> destroy(DestroyContext context) override {
    auto name = str(context.getParams().getName());
    return ctx_.calls.call<bool>([this, name](auto cb) { ctx_.core.destroy(name, std::move(cb)); })
        .then([this, context, name](bool existed) mutable {
          if (ctx_.preview) ctx_.preview->forget(name);
          context.getResults().setExisted(existed);
        });
  }

  kj::Promise<void> journal(JournalContext context) override {
    auto p = context.getParams();
    auto name = str(p.getName());
    auto from = p.getFromSeq();
    auto limit = p.getLimit();
    return ctx_.calls
        .call<actors::core::journal_page>(
            [this, name, from, limit](auto cb) { ctx_.core.read_journal(name, from, limit, std::move(cb)); })
        .then([context](actors::core::journal_page page) mutable {
          auto res = context.getResults();
          res.setLastSeq(page.last_seq);
          auto out = res.initEntries(page.entries.size());
          for (unsigned i = 0; i < page.entries.size(); ++i) {
            auto& e = page.entries[i];
            out[i].setSeq(e.seq);
            out[i].setAtMs(e.at_ms);
            out[i].setKind(e.kind);
            out[i].setSummary(e.summary);
            out[i].setJson(e.json);
          }
        });
  }

  kj::Promise<void> journalState(JournalStateContext context) override {
    auto p = context.getParams();
    auto name = str(p.getName());
    auto at = p.getAtSeq();
    return ctx_.calls
        .call<std::string>([this, name, at](auto cb) { ctx_.core.journal_state(name, at, std::move(cb)); })
        .then([context](std::string json) mutable { context.getResults().setJson(json); });
  }

  kj::Promise<void> checkJournals(CheckJournalsContext context) override {
    return ctx_.calls
        .call<actors::core::check_report>([this](auto cb) { ctx_.core.check_journals(std::move(cb)); })
        .then([context](actors::core::check_report r) mutable {
          auto res = context.getResults();
          res.setChecked(r.checked);
          set_texts(res.initProblems(r.problems.size()), r.problems);
        });
  }

  kj::Promise<void> listSnapshots(ListSnapshotsContext context) override {
    return ctx_.calls
        .call<std::vector<actors::snapshot_info>>([this](auto cb) { ctx_.core.list_snapshots(std::move(cb)); })
        .then([context](std::vector<actors::snapshot_info> all) mutable {
          auto out = context.getResults().initSnapshots(static_cast<unsigned>(all.size()));
          for (unsigned i = 0; i < all.size(); ++i) fill(out[i], all[i]);
        });
  }

  kj::Promise<void> deleteSnapshot(DeleteSnapshotContext context) override {
    auto id = context.getParams().getId();
    return ctx_.calls.call<bool>([this, id](auto cb) { ctx_.core.delete_snapshot(id, std::move(cb)); })
        .then([context](bool existed) mutable { context.getResults().setExisted(existed); });
  }

  kj::Promise<void> exportSnapshot(ExportSnapshotContext context) override {
    return export_snapshot(ctx_, context.getParams().getId()).then([context](snapshot_export x) mutable {
      auto res = context.getResults();
      res.setBlob(x.blob);
      res.setSha256(x.sha256);
      res.setBytes(x.bytes);
    });
  }

  kj::Promise<void> importSnapshot(ImportSnapshotContext context) override {
    auto p = context.getParams();
    return import_snapshot(ctx_, str(p.getBlob()), str(p.getSha256()), str(p.getLabel()))
        .then([context](actors::snapshot_info s) mutable { fill(context.getResults().initSnapshot(), s); });
  }

  kj::Promise<void> listBackups(ListBackupsContext context) override {
    return ctx_.calls.call<std::vector<actors::backup_info>>([this](auto cb) { ctx_.core.backups(std::move(cb)); })
        .then([context](std::vector<actors::backup_info> all) mutable {
          auto now = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                    std::chrono::system_clock::now().time_since_epoch())
                                                    .count());
          std::erase_if(all, [now](auto& b) { return b.expires_at_ms <= now; });
          auto out = context.getResults().initBackups(static_cast<unsigned>(all.size()));
          for (unsigned i = 0; i < all.size(); ++i) fill(out[i], all[i]);
        });
  }

  kj::Promise<void> deleteBackup(DeleteBackupContext context) override {
    auto id = str(context.getParams().getId());
    return ctx_.calls.call<bool>([this, id](auto cb) { ctx_.core.delete_backup(id, std::move(cb)); })
        .then([this, context, id](bool existed) mutable {
          if (existed && ctx_.blobs)
            if (auto e = ctx_.blobs->remove("backup-" + id + ".tar.zst"))
              spdlog::warn("event=backup_archive_left backup={} reason=\"{}\"", id, e.message);
          context.getResults().setExisted(existed);
        });
  }

  kj::Promise<void> version(VersionContext context) override {
    auto res = context.getResults();
    res.setDaemon(ctx_.version);
    res.setApi(1);
    return kj::READY_NOW;
  }

 private:
  rpc_context& ctx_;
};


class login_impl final : public wire::Login::Server {
 public:
  explicit login_impl(rpc_context& ctx) : ctx_(ctx) {}

  kj::Promise<void> login(LoginContext context) override {
    auto token = str(context.getParams().getToken());
    if (!ctx_.token.empty() && same_token(token, ctx_.token)) {
      context.getResults().setWarren(kj::heap<warren_impl>(ctx_));
      return kj::READY_NOW;
    }
    spdlog::warn("event=login_refused");
    // A pause on every refusal makes guessing slow.
    return ctx_.timer.afterDelay(200 * kj::MILLISECONDS).then([]() -> kj::Promise<void> {
      return to_kj(make_error(errc::unauthenticated, "wrong or missing token"));
    });
  }

 private:
  rpc_context& ctx_;
};

}  // namespace

bool same_token(const std::string& given, const std::string& expected) {
  unsigned char diff = given.size() != expected.size() ? 1 : 0;
  for (std::size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>((i < given.size() ? given[i] : 0) ^ expected[i]);
  return diff == 0;
}

capnp::Capability::Client make_warren(rpc_context& ctx) { return kj::heap<warren_impl>(ctx); }
capnp::Capability::Client make_login(rpc_context& ctx) { return kj::heap<login_impl>(ctx); }

}  // namespace warren::gateway
