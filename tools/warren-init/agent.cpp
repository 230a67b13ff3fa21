// The agent: warren-init's side of the agent link. Single-threaded KJ loop, Cap'n Proto RPC
// over the socketpair inherited from warrend. As PID 1 of the sandbox it also reaps every
// orphan (KJ's child-exit handling waits for any child).
#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <kj/debug.h>

#include <fcntl.h>
#include <sched.h>
#include <linux/close_range.h>
#include <sys/syscall.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <map>
#include <vector>

#include "files.hpp"
#include "processes.hpp"
#include "sys.hpp"
#include "wire/agent.capnp.h"

namespace warren::init {
namespace {

constexpr std::size_t chunk_bytes = 64 * 1024;
constexpr auto kill_grace = 2 * kj::SECONDS;
// After the command exits (and what was left of its process group is killed), its pipes are
// drained to the end; only a process that left the group can keep them open, and once no
// output has come for this long the call ends without waiting for it.
constexpr auto drain_idle = 200 * kj::MILLISECONDS;

std::string str(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

// One running command. Destroying it (the call finished or was cancelled) kills whatever
// is left of its process group.
struct exec_job {
  kj::Maybe<pid_t> pid;  // Nulled by KJ once reaped.
  pid_t pgid = 0;
  bool exited = false;
  bool timed_out = false;
  int status = 0;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::uint64_t duration_us = 0;
  std::uint64_t pumped_bytes = 0;  // Output read so far (progress for the drain watchdog).
  std::uint64_t sent_bytes[3] = {0, 0, 0};  // Per fd (1, 2): bytes handed to the sink.
  int sends_in_flight = 0;         // Chunks waiting on the caller's flow control.
  int pipe_fds[2] = {-1, -1};      // Read ends (owned by the pumps' streams), for FIONREAD.

  // Bytes written into the pipes and not read yet.
  int unread_bytes() const {
    int total = 0;
    for (int fd : pipe_fds) {
      int n = 0;
      if (fd >= 0 && ::ioctl(fd, FIONREAD, &n) == 0) total += n;
    }
    return total;
  }

  // The command's own cgroup (below execs/): everything it started, whatever session or
  // process group, is in it.
  int cgroup_fd = -1;
  std::string cgroup_name;
  // A shell line in a session: its state is saved when it ends.
  std::string session;
  std::vector<std::string> call_env;
  std::vector<std::string>* cgroups_to_remove = nullptr;

  void kill_tree() {
    if (pgid > 0) ::kill(-pgid, SIGKILL);
    if (cgroup_fd >= 0) {
      int fd = ::openat(cgroup_fd, "cgroup.kill", O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        write_all(fd, "1", 1);
        ::close(fd);
      }
    }
  }

  ~exec_job() {
    // Cancelled (caller gone) or finished: no process of this command outlives the call.
    kill_tree();
    if (cgroup_fd >= 0) {
      ::close(cgroup_fd);
      cgroups_to_remove->push_back(cgroup_name);  // Once its processes are reaped.
    }
  }
};

}  // namespace

// Resolves a program name the way execvp would, against the PATH of the command's own
// environment, inside the sandbox (PID 1 lives in its mount namespace). Empty: not found.
std::string resolve_program(const std::string& prog, const std::vector<std::string>& env) {
  if (prog.find('/') != std::string::npos) return prog;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (auto& e : env)
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  std::size_t start = 0;
  while (start <= path.size()) {
    auto end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    auto dir = path.substr(start, end - start);
    auto candidate = (dir.empty() ? std::string(".") : dir) + "/" + prog;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return "";
}

// Starts a command: clone with CLONE_VM|CLONE_VFORK (like posix_spawn: no copy of PID 1's
// page tables; PID 1 waits until the child has exec'd or failed) and a child that, on its
// own stack and with system calls only, makes itself a session leader, joins the exec's own
// cgroup (`cgroup_procs`, -1: none) and sets up its fds and directory before execve. So the
// command is in its cgroup from its first instruction and cannot leave it by racing; the
// one process needs one exec. (posix_spawn cannot join a cgroup, and clone3 with
// CLONE_INTO_CGROUP is refused by the sandbox's seccomp filter, which PID 1 runs under too.)
// Capabilities and no_new_privs were set once for PID 1 and are inherited.
struct spawn_args {
  const char* program;
  char* const* argv;
  char* const* envp;
  const char* cwd;
  int in, out, err, cgroup_procs;
  int error;  // Set by the child when it cannot exec (shared memory: CLONE_VM).
  bool tty;   // `in` is a terminal's slave: it becomes the controlling terminal.
};

int spawn_child(void* p) {
  auto* a = static_cast<spawn_args*>(p);
  // KJ ignores SIGPIPE (an ignored signal would survive exec) and blocks others; the
  // handler table is the child's own copy (no CLONE_SIGHAND).
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  int in = a->in >= 0 ? a->in : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (::setsid() < 0 || (a->cgroup_procs >= 0 && ::write(a->cgroup_procs, "0", 1) != 1) || in < 0 ||
      ::dup2(in, 0) < 0 || ::dup2(a->out, 1) < 0 || ::dup2(a->err, 2) < 0 ||
      (a->tty && ::ioctl(0, TIOCSCTTY, 0) < 0) || ::chdir(a->cwd) < 0) {
    a->error = errno;
    ::_exit(127);
  }
  ::syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);  // Nothing of PID 1 leaks in.
  ::execve(a->program, a->argv, a->envp);
  a->error = errno;
  ::_exit(127);
}

alignas(64) char spawn_stack[64 * 1024];  // PID 1 is single-threaded and waits (vfork).

int spawn_command(const std::string& program, const std::vector<std::string>& argv, const std::vector<std::string>& env,
                  const std::string& cwd, int in, int out, int err, int cgroup_procs, pid_t& pid, bool tty) {
  std::vector<char*> args, envp;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  spawn_args a{program.c_str(), args.data(), envp.data(), cwd.c_str(), in, out, err, cgroup_procs, 0, tty};
  // No handler of ours may run on the child's stack between clone and its reset.
  sigset_t all, old;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, &old);
  int rc = ::clone(spawn_child, spawn_stack + sizeof spawn_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
  int clone_errno = errno;
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  if (rc < 0) return clone_errno;
  pid = rc;
  if (a.error != 0) {
    ::waitpid(pid, nullptr, 0);  // Gone already (vfork semantics); reap it here.
    return a.error;
  }
  return 0;
}

namespace {

// The write end of a command's stdin pipe, shared by the exec and its stdin_sink.
struct stdin_pipe : kj::Refcounted {
  explicit stdin_pipe(kj::Own<kj::AsyncOutputStream> s) : stream(kj::mv(s)) {}
  kj::Own<kj::AsyncOutputStream> stream;
};

// A command's stdin, handed to the caller (stdinStream): chunks go to the pipe in order,
// flow-controlled by the pipe; end() closes it (EOF), as does dropping the sink.
class stdin_sink final : public wire::ByteSink::Server {
 public:
  stdin_sink(kj::Own<stdin_pipe> pipe, kj::ForkedPromise<void> first)
      : pipe_(kj::mv(pipe)), tail_(first.addBranch()) {}

 protected:
  kj::Promise<void> write(WriteContext context) override {
    auto data = kj::heapArray<kj::byte>(context.getParams().getData());
    KJ_IF_MAYBE(p, pipe_) {
      auto* stream = (*p)->stream.get();
      auto done = tail_.then([stream, data = kj::mv(data)]() mutable {
                         auto* bytes = data.begin();
                         auto size = data.size();
                         return stream->write(bytes, size).attach(kj::mv(data));
                       })
                      .fork();
      tail_ = done.addBranch();
      return done.addBranch().catch_([](kj::Exception&&) -> kj::Promise<void> {
        return KJ_EXCEPTION(DISCONNECTED, "the command's stdin is closed (it exited or closed it)");
      });
    }
    return KJ_EXCEPTION(FAILED, "invalid_argument: stdin was already ended");
  }
  kj::Promise<void> end(EndContext) override {
    auto closing = kj::mv(tail_);
    tail_ = kj::READY_NOW;
    KJ_IF_MAYBE(p, pipe_) {
      auto pipe = kj::mv(*p);
      pipe_ = nullptr;
      return closing.catch_([](kj::Exception&&) {}).attach(kj::mv(pipe));  // Released: EOF.
    }
    return kj::READY_NOW;
  }

 private:
  kj::Maybe<kj::Own<stdin_pipe>> pipe_;
  kj::Promise<void> tail_;
};

class agent_impl final : public wire::Agent::Server {
 public:
  agent_impl(kj::AsyncIoContext& io, int exec_cgroups) : io_(io), exec_cgroups_(exec_cgroups) {}

  kj::Promise<void> ping(PingContext context) override {
    context.getResults().setPid(::getpid());
    return kj::READY_NOW;
  }

  kj::Promise<void> createSession(CreateSessionContext context) override {
    auto p = context.getParams();
    std::vector<std::string> env;
    for (auto e : p.getEnv()) env.push_back(str(e));
    auto name = str(p.getName());
    if (!create_session(name, env, str(p.getCwd())))
      kj::throwFatalException(kj::Exception(kj::Exception::Type::FAILED, __FILE__, __LINE__,
                                            kj::str("already_exists: session ", name.c_str(), " exists")));
    return kj::READY_NOW;
  }

  kj::Promise<void> listSessions(ListSessionsContext context) override {
    auto all = list_sessions();
    auto res = context.getResults();
    auto names = res.initNames(all.size());
    auto cwds = res.initCwds(all.size());
    for (unsigned i = 0; i < all.size(); ++i) {
      names.set(i, all[i].first);
      cwds.set(i, all[i].second);
    }
    return kj::READY_NOW;
  }

  kj::Promise<void> deleteSession(DeleteSessionContext context) override {
    context.getResults().setExisted(delete_session(str(context.getParams().getName())));
    return kj::READY_NOW;
  }

  kj::Promise<void> startProcess(StartProcessContext context) override {
    auto p = context.getParams();
    process_spec spec;
    spec.id = str(p.getId());
    for (auto a : p.getArgv()) spec.argv.push_back(str(a));
    for (auto e : p.getEnv()) spec.env.push_back(str(e));
    spec.cwd = str(p.getCwd());
    spec.ring_bytes = p.getRingBytes();
    if (p.hasEvents()) spec.events = p.getEvents();
    spec.restart_on_wake = p.getRestartOnWake();
    spec.auto_cleanup = p.getAutoCleanup();
    spec.pty = p.getPty();
    spec.cols = p.getCols() ? p.getCols() : 80;
    spec.rows = p.getRows() ? p.getRows() : 24;
    KJ_REQUIRE(!spec.argv.empty() && !spec.argv[0].empty(), "empty argv");
    spec.command = spec.argv;  // What the client asked for, whatever runs it.
    auto session = str(p.getSession());
    spec.session = session;
    if (!session.empty()) {
      std::vector<std::string> call_env;
      for (auto n : p.getCallEnv()) call_env.push_back(str(n));
      try {
        apply_session(session, p.getShell(), call_env, p.getCwdGiven(), spec.argv, spec.env, spec.cwd, false);
      } catch (const init_error& e) {
        kj::throwFatalException(kj::Exception(kj::Exception::Type::FAILED, __FILE__, __LINE__,
                                              kj::str("internal: session ", session.c_str(), ": ", e.what())));
      }
    }
    if (exec_cgroups_ >= 0) sweep_cgroups();
    auto res = context.getResults();
    res.setCwd(spec.cwd);
    res.setProcess(processes_.start(kj::mv(spec), res.initInfo()));
    return kj::READY_NOW;
  }

  kj::Promise<void> restartProcesses(RestartProcessesContext context) override {
    auto res = context.getResults();
    std::vector<capnp::Orphan<wire::RestartedProcess>> started;
    std::vector<std::string> failed;
    processes_.restart_all(context.getParams().getEvents(), capnp::Orphanage::getForMessageContaining(res), started,
                           failed);
    auto out = res.initStarted(static_cast<unsigned>(started.size()));
    for (unsigned i = 0; i < started.size(); ++i) out.setWithCaveats(i, started[i].getReader());
    auto f = res.initFailed(static_cast<unsigned>(failed.size()));
    for (unsigned i = 0; i < failed.size(); ++i) f.set(i, failed[i]);
    return kj::READY_NOW;
  }

  kj::Promise<void> listProcesses(ListProcessesContext context) override {
    processes_.fill_list(context.getResults().initProcesses(static_cast<unsigned>(processes_.size())));
    return kj::READY_NOW;
  }

  kj::Promise<void> getProcess(GetProcessContext context) override {
    auto id = str(context.getParams().getId());
    auto res = context.getResults();
    KJ_IF_MAYBE(process, processes_.get(id, res.initInfo())) {
      res.setProcess(kj::mv(*process));
      return kj::READY_NOW;
    }
    kj::throwFatalException(kj::Exception(kj::Exception::Type::FAILED, __FILE__, __LINE__,
                                          kj::str("not_found: no process ", id.c_str())));
  }

  kj::Promise<void> killAllProcesses(KillAllProcessesContext context) override {
    context.getResults().setCount(processes_.kill_all(context.getParams().getSignal()));
    return kj::READY_NOW;
  }

  kj::Promise<void> files(FilesContext context) override {
    context.getResults().setFiles(files_);
    return kj::READY_NOW;
  }

  kj::Promise<void> exec(ExecContext context) override {
    context.allowCancellation();  // The daemon dropping the call kills the command.
    auto session = str(context.getParams().getSession());
    if (session.empty()) return run(context);
    // One exec at a time per session: each waits for the one before it (finished or
    // cancelled) to end.
    auto paf = kj::newPromiseAndFulfiller<void>();
    kj::Promise<void> before = kj::READY_NOW;
    auto it = session_tails_.find(session);
    if (it != session_tails_.end()) {
      before = it->second.addBranch();
      session_tails_.erase(it);
    }
    session_tails_.emplace(session, paf.promise.fork());
    auto done = kj::defer([f = kj::mv(paf.fulfiller)]() mutable { f->fulfill(); });
    return before.then([this, context]() mutable { return run(context); }).attach(kj::mv(done));
  }

 private:
  kj::Promise<void> run(ExecContext context) {
    auto params = context.getParams();
    std::vector<std::string> argv, env, call_env;
    for (auto a : params.getArgv()) argv.push_back(str(a));
    for (auto e : params.getEnv()) env.push_back(str(e));
    for (auto n : params.getCallEnv()) call_env.push_back(str(n));
    auto cwd = str(params.getCwd());
    auto timeout_ms = params.getTimeoutMs();
    auto sink = params.getSink();
    KJ_REQUIRE(!argv.empty() && !argv[0].empty(), "empty argv");
    auto session = str(params.getSession());
    if (!session.empty()) {
      try {
        apply_session(session, params.getShell(), call_env, params.getCwdGiven(), argv, env, cwd);
      } catch (const init_error& e) {
        return fail_early(context, sink, std::string("session ") + session + ": " + e.what(), 126);
      }
    }

    // Failures before the command runs are results, like a shell's: a message on stderr
    // and exit status 127 (not found) or 126 (cannot run).
    auto program = resolve_program(argv[0], env);
    if (program.empty()) return fail_early(context, sink, argv[0] + ": command not found", 127);
    struct stat st;
    int cwd_error = ::stat(cwd.c_str(), &st) < 0 ? errno : (S_ISDIR(st.st_mode) ? 0 : ENOTDIR);
    if (cwd_error != 0)
      return fail_early(context, sink, "cannot change to directory " + cwd + ": " + std::strerror(cwd_error), 126);

    int out[2], err[2];
    check(::pipe2(out, O_CLOEXEC), "pipe2");
    check(::pipe2(err, O_CLOEXEC), "pipe2");
    unique_fd out_r(out[0]), out_w(out[1]), err_r(err[0]), err_w(err[1]);
    auto input = params.getStdin();
    bool stdin_stream = params.getStdinStream();
    unique_fd in_r, in_w;
    if (input.size() > 0 || stdin_stream) {
      int in[2];
      check(::pipe2(in, O_CLOEXEC), "pipe2");
      in_r.reset(in[0]);
      in_w.reset(in[1]);
    }

    auto job = kj::heap<exec_job>();
    job->cgroups_to_remove = &cgroups_to_remove_;
    if (!session.empty() && params.getShell()) {
      job->session = session;
      job->call_env = call_env;
    }
    if (exec_cgroups_ >= 0) {
      sweep_cgroups();
      job->cgroup_name = "e" + std::to_string(++exec_count_);
      if (::mkdirat(exec_cgroups_, job->cgroup_name.c_str(), 0755) == 0)
        job->cgroup_fd = ::openat(exec_cgroups_, job->cgroup_name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    unique_fd procs;
    if (job->cgroup_fd >= 0) procs.reset(::openat(job->cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC));
    pid_t pid = 0;
    int rc = spawn_command(program, argv, env, cwd, in_r.get(), out_w.get(), err_w.get(), procs.get(), pid);
    if (rc != 0) return fail_early(context, sink, argv[0] + ": " + std::strerror(rc), 126);
    procs.reset();
    job->pid = pid;
    job->pgid = pid;
    out_w.reset();
    err_w.reset();
    in_r.reset();
    auto exited = io_.unixEventPort.onChildExit(job->pid);  // Right after the spawn (KJ's rule).

    auto& low = *io_.lowLevelProvider;
    constexpr auto flags = kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP | kj::LowLevelAsyncIoProvider::ALREADY_CLOEXEC;
    job->pipe_fds[0] = out_r.get();
    job->pipe_fds[1] = err_r.get();
    auto out_stream = low.wrapInputFd(out_r.release(), flags);
    auto err_stream = low.wrapInputFd(err_r.release(), flags);
    kj::Promise<void> feed = kj::READY_NOW;
    if (in_w.get() >= 0) {
      // stdin is written while the command runs; closing the pipe afterwards is its EOF. A
      // command that stops reading early just ends the feed (EPIPE). With a stream, the
      // caller's sink takes over after the bytes, and its end() (or the sink's release)
      // closes the pipe.
      auto in_stream = kj::refcounted<stdin_pipe>(low.wrapOutputFd(in_w.release(), flags));
      auto data = kj::heapArray<kj::byte>(input);
      auto first = data.size() ? in_stream->stream->write(data.begin(), data.size()).attach(kj::mv(data))
                               : kj::Promise<void>(kj::READY_NOW);
      if (stdin_stream) {
        auto req = sink.startedRequest();
        req.setStdin(kj::heap<stdin_sink>(kj::addRef(*in_stream), first.fork()));
        feed = req.send().ignoreResult().catch_([](kj::Exception&&) {}).eagerlyEvaluate(nullptr);
      } else {
        feed = first.attach(kj::mv(in_stream)).catch_([](kj::Exception&&) {}).eagerlyEvaluate(nullptr);
      }
    }
    exec_job* raw = job.get();
    auto pumps = kj::joinPromises(kj::arr(pump(*out_stream, 1, sink, raw), pump(*err_stream, 2, sink, raw)))
                     .attach(kj::mv(out_stream), kj::mv(err_stream))
                     .fork();

    auto& timer = io_.provider->getTimer();
    kj::Promise<void> deadline = kj::NEVER_DONE;
    if (timeout_ms > 0) {
      deadline = timer.afterDelay(timeout_ms * kj::MILLISECONDS).then([raw, &timer]() {
        raw->timed_out = true;
        ::kill(-raw->pgid, SIGTERM);
        return timer.afterDelay(kill_grace).then([raw]() { raw->kill_tree(); });
      });
    }
    auto finished = exited.then([raw](int status) {
      raw->exited = true;
      raw->status = status;
      // The command is over: whatever is left of its tree goes with it (its cgroup, even
      // processes that left its process group), which also closes the pipes they held.
      raw->kill_tree();
      raw->duration_us = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                        std::chrono::steady_clock::now() - raw->started)
                                                        .count());
    });
    // Output is pumped while the command runs (eagerly, or a full pipe would block it).
    auto drained = pumps.addBranch().eagerlyEvaluate(nullptr);
    return finished.exclusiveJoin(kj::mv(deadline).then([]() -> kj::Promise<void> { return kj::NEVER_DONE; }))
        .then([drained = kj::mv(drained), &timer, raw]() mutable {
          return drained.exclusiveJoin(quiet_for(timer, raw, raw->pumped_bytes));
        })
        .then([context, raw]() mutable {
          if (!raw->session.empty()) finish_session_exec(raw->session, raw->call_env);
          auto st = context.getResults().initStatus();
          if (WIFEXITED(raw->status)) {
            st.setExitCode(WEXITSTATUS(raw->status));
          } else {
            st.setExitCode(-1);
            st.setSignal(WIFSIGNALED(raw->status) ? WTERMSIG(raw->status) : 0);
          }
          st.setTimedOut(raw->timed_out);
          st.setDurationUs(raw->duration_us);
          st.setStdoutBytes(raw->sent_bytes[1]);
          st.setStderrBytes(raw->sent_bytes[2]);
        })
        .attach(kj::mv(job), kj::mv(pumps), kj::mv(feed));
  }

  // Resolves once the pipes gave nothing during one drain_idle period. Time spent waiting for
  // a slow caller to take output (flow control) is not quiet: that output is never dropped.
  static kj::Promise<void> quiet_for(kj::Timer& timer, exec_job* job, std::uint64_t seen) {
    return timer.afterDelay(drain_idle).then([&timer, job, seen]() -> kj::Promise<void> {
      if (job->pumped_bytes == seen && job->sends_in_flight == 0 && job->unread_bytes() == 0) return kj::READY_NOW;
      return quiet_for(timer, job, job->pumped_bytes);
    });
  }

  kj::Promise<void> fail_early(ExecContext context, wire::OutputSink::Client sink, const std::string& msg,
                               int code) {
    auto req = sink.writeRequest();
    req.setFd(2);
    auto line = "warren: " + msg + "\n";
    req.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(line.data()), line.size()));
    return req.send().then([context, code]() mutable { context.getResults().initStatus().setExitCode(code); });
  }

  kj::Promise<void> pump(kj::AsyncInputStream& in, std::uint8_t fd, wire::OutputSink::Client sink, exec_job* job) {
    auto buf = kj::heapArray<kj::byte>(chunk_bytes);
    auto data = buf.begin();
    return in.tryRead(data, 1, chunk_bytes)
        .then([this, &in, fd, sink, job, buf = kj::mv(buf)](std::size_t n) mutable -> kj::Promise<void> {
          if (n == 0) return kj::READY_NOW;
          job->pumped_bytes += n;
          job->sent_bytes[fd] += n;
          auto req = sink.writeRequest();
          req.setFd(fd);
          req.setData(buf.slice(0, n));
          ++job->sends_in_flight;
          return req.send().then([this, &in, fd, sink, job]() mutable {
            --job->sends_in_flight;
            return pump(in, fd, sink, job);
          });
        });
  }

  kj::AsyncIoContext& io_;
  wire::Files::Client files_ = make_files();
  int exec_cgroups_ = -1;
  std::uint64_t exec_count_ = 0;
  std::vector<std::string> cgroups_to_remove_;  // Of finished execs, removed once empty.
  process_table processes_{io_, exec_cgroups_, cgroups_to_remove_};

  void sweep_cgroups() {
    std::vector<std::string> busy;
    for (auto& name : cgroups_to_remove_)
      if (::unlinkat(exec_cgroups_, name.c_str(), AT_REMOVEDIR) < 0 && errno == EBUSY) busy.push_back(name);
    cgroups_to_remove_ = std::move(busy);
  }
  std::map<std::string, kj::ForkedPromise<void>> session_tails_;  // The last exec of each session.
};

}  // namespace

int serve_agent(int sock_fd, int exec_cgroups) {
  auto io = kj::setupAsyncIo();
  auto stream = io.lowLevelProvider->wrapSocketFd(sock_fd, kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP);
  capnp::TwoPartyVatNetwork network(*stream, capnp::rpc::twoparty::Side::SERVER);
  auto server = capnp::makeRpcServer(network, kj::heap<agent_impl>(io, exec_cgroups));
  network.onDisconnect().wait(io.waitScope);
  return 0;
}

}  // namespace warren::init
