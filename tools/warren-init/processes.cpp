// Background processes (wire/process.capnp), owned by the agent: each runs in a cgroup of its
// own below execs/ (so kill reaches its whole tree), and each output stream goes into a
// ring buffer with absolute offsets, from which any number of clients stream at their own
// pace (a slow one falls behind and is told what it missed; nobody makes the agent buffer
// more than the ring).
#include "processes.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/async-unix.h>
#include <kj/debug.h>

#include <dirent.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <vector>

#include "sys.hpp"

namespace warren::init {
namespace {

constexpr std::size_t read_bytes = 64 * 1024;
constexpr std::size_t send_bytes = 256 * 1024;
constexpr std::uint32_t default_ring = 1u << 20;
constexpr std::uint32_t max_ring = 64u << 20;
constexpr auto kill_grace = 2 * kj::SECONDS;

[[noreturn]] void throw_code(const char* code, const std::string& message) {
  kj::throwFatalException(
      kj::Exception(kj::Exception::Type::FAILED, __FILE__, __LINE__, kj::str(code, ": ", message.c_str())));
}

std::uint64_t now_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

// The last `capacity` bytes of a stream, addressed by absolute offset. The buffer grows with
// the output (a quiet process costs nothing; a full 64 MiB ring only when it printed that).
struct ring {
  std::vector<char> buf;  // Byte o lives at o % capacity (all of [0, end) fit until it wraps).
  std::size_t capacity;
  std::uint64_t end = 0;  // Bytes written in all.

  explicit ring(std::size_t cap) : capacity(cap) {}
  std::uint64_t start() const { return end > capacity ? end - capacity : 0; }
  void append(const char* p, std::size_t n) {
    if (n >= capacity) {  // Only the tail fits.
      p += n - capacity;
      end += n - capacity;
      n = capacity;
    }
    auto needed = static_cast<std::size_t>(std::min<std::uint64_t>(capacity, end + n));
    if (buf.size() < needed) buf.resize(std::min(capacity, std::max(needed, buf.size() * 2)));
    for (std::size_t i = 0; i < n;) {
      auto at = static_cast<std::size_t>(end % capacity);
      auto k = std::min(n - i, capacity - at);
      std::copy(p + i, p + i + k, buf.begin() + static_cast<std::ptrdiff_t>(at));
      i += k;
      end += k;
    }
  }
  // Bytes [from, from + max) that are still buffered (from >= start()).
  std::string read(std::uint64_t from, std::size_t max) const {
    std::string out;
    auto to = std::min<std::uint64_t>(end, from + max);
    out.reserve(static_cast<std::size_t>(to - from));
    for (auto o = from; o < to;) {
      auto at = static_cast<std::size_t>(o % capacity);
      auto k = std::min<std::uint64_t>(to - o, capacity - at);
      out.append(buf.data() + at, static_cast<std::size_t>(k));
      o += k;
    }
    return out;
  }
};

// Specs of restart_on_wake processes: inside the sandbox, since their env may hold secrets.
const std::string specs_dir = "/var/lib/warren/processes";
std::string spec_path(const std::string& id) { return specs_dir + "/" + id + ".spec"; }

// Writes the spec durably (temp file, fsync, rename, directory fsync).
void save_spec(const process_spec& spec, const std::string& id) {
  for (auto dir : {"/var", "/var/lib", "/var/lib/warren", "/var/lib/warren/processes"})
    if (::mkdir(dir, 0700) < 0 && errno != EEXIST) throw_code("internal", std::string("mkdir ") + dir + ": " + std::strerror(errno));
  capnp::MallocMessageBuilder m;
  auto b = m.initRoot<wire::ProcessSpec>();
  b.setId(id);
  auto argv = b.initArgv(static_cast<unsigned>(spec.argv.size()));
  for (unsigned i = 0; i < spec.argv.size(); ++i) argv.set(i, spec.argv[i]);
  auto env = b.initEnv(static_cast<unsigned>(spec.env.size()));
  for (unsigned i = 0; i < spec.env.size(); ++i) env.set(i, spec.env[i]);
  b.setCwd(spec.cwd);
  b.setRingBytes(spec.ring_bytes);
  b.setAutoCleanup(spec.auto_cleanup);
  b.setSession(spec.session);
  b.setPty(spec.pty);
  b.setCols(spec.cols);
  b.setRows(spec.rows);
  auto command = b.initCommand(static_cast<unsigned>(spec.command.size()));
  for (unsigned i = 0; i < spec.command.size(); ++i) command.set(i, spec.command[i]);
  auto tmp = spec_path(id) + ".tmp";
  unique_fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (fd.get() < 0) throw_code("internal", "cannot save the process's spec: " + std::string(std::strerror(errno)));
  capnp::writeMessageToFd(fd.get(), m);
  if (::fsync(fd.get()) < 0 || ::rename(tmp.c_str(), spec_path(id).c_str()) < 0)
    throw_code("internal", "cannot save the process's spec: " + std::string(std::strerror(errno)));
  unique_fd dir(::open(specs_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) ::fsync(dir.get());
}

}  // namespace

struct bg_process : kj::Refcounted {
  std::string id;
  std::vector<std::string> command;
  kj::Maybe<pid_t> pid_slot;
  pid_t pid = 0;
  int cgroup_fd = -1;
  std::string cgroup_name;
  bool running = true, killed = false;
  bool restart_on_wake = false;  // Its spec stays until it exits or a client ends it.
  bool auto_cleanup = false;     // Forgotten by the table once its end was reported.
  bool reported = false;         // Its end reached the daemon (or there is no one to tell).
  std::string session;           // Shell session it reads (kept for restarts).
  bool pty = false;              // On a terminal: `term` is its master side (output and input).
  kj::Own<kj::AsyncIoStream> term;
  int term_fd = -1;              // Borrowed from `term`, for TIOCSWINSZ.
  bool ended_by_client = false;
  process_table* table = nullptr;  // Null once the table is gone.
  int status = 0;
  std::uint64_t started_ms = now_ms(), ended_ms = 0;
  bool drained = false;  // Both pipes reached EOF after the end.
  ring out, err;
  // Woken on new output and at the end; each waiter re-checks its own condition.
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> waiters;
  kj::Promise<void> pumps = nullptr;
  kj::Maybe<wire::ProcessEvents::Client> events;
  kj::Promise<void> told = kj::READY_NOW;
  kj::Promise<void> grace = kj::READY_NOW;
  std::vector<std::string>* cgroups_to_remove = nullptr;

  bg_process(std::size_t ring_bytes) : out(ring_bytes), err(ring_bytes) {}
  ~bg_process() {
    kill_tree();
    if (cgroup_fd >= 0) {
      ::close(cgroup_fd);
      cgroups_to_remove->push_back(cgroup_name);
    }
  }

  ring& stream(int fd) { return fd == 2 ? err : out; }
  bool done() const { return !running && drained; }

  void wake() {
    auto all = std::move(waiters);
    waiters.clear();
    for (auto& f : all) f->fulfill();
  }
  kj::Promise<void> changed() {
    auto paf = kj::newPromiseAndFulfiller<void>();
    waiters.push_back(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }

  void kill_tree() {
    if (running && pid > 0) ::kill(-pid, SIGKILL);
    if (cgroup_fd >= 0) {
      int fd = ::openat(cgroup_fd, "cgroup.kill", O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        write_all(fd, "1", 1);
        ::close(fd);
      }
    }
  }

  void fill(wire::ProcessInfo::Builder b) const {
    b.setId(id);
    auto c = b.initCommand(static_cast<unsigned>(command.size()));
    for (unsigned i = 0; i < command.size(); ++i) c.set(i, command[i]);
    if (running) {
      b.setStatus(wire::ProcessStatus::RUNNING);
    } else if (WIFEXITED(status)) {
      b.setStatus(wire::ProcessStatus::EXITED);
      b.setExitCode(WEXITSTATUS(status));
    } else {
      b.setStatus(wire::ProcessStatus::KILLED);
      b.setExitCode(-1);
      b.setSignal(WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
    b.setPid(pid);
    b.setStartedAtMs(started_ms);
    b.setEndedAtMs(ended_ms);
    b.setStdoutBytes(out.end);
    b.setStderrBytes(err.end);
    b.setPty(pty);
  }
};

namespace {

kj::Promise<void> pump(kj::AsyncInputStream& in, int fd, bg_process& p) {
  auto buf = kj::heapArray<kj::byte>(read_bytes);
  auto* data = buf.begin();
  return in.tryRead(data, 1, read_bytes).then([&in, fd, &p, buf = kj::mv(buf)](std::size_t n) mutable -> kj::Promise<void> {
    if (n == 0) return kj::READY_NOW;
    p.stream(fd).append(reinterpret_cast<const char*>(buf.begin()), n);
    p.wake();
    return pump(in, fd, p);
  });
}

void fill_chunk(wire::LogChunk::Builder b, const ring& r) {
  auto data = r.read(r.start(), r.capacity);
  b.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(data.data()), data.size()));
  b.setStartOffset(r.start());
  b.setEndOffset(r.end);
  b.setDroppedBytes(r.start());
}

class process_impl final : public wire::Process::Server {
 public:
  process_impl(kj::Own<bg_process> p, kj::Timer& timer, kj::Network& net) : p_(kj::mv(p)), timer_(timer), net_(net) {}

 protected:
  kj::Promise<void> info(InfoContext context) override {
    p_->fill(context.getResults().initInfo());
    return kj::READY_NOW;
  }

  kj::Promise<void> kill(KillContext context) override {
    auto& p = *p_;
    if (!p.running) return kj::READY_NOW;
    int sig = context.getParams().getSignal();
    if (sig < 0 || sig >= NSIG) throw_code("invalid_argument", "no such signal: " + std::to_string(sig));
    p.ended_by_client = true;
    if (sig != 0) {
      ::kill(-p.pid, sig);
      return kj::READY_NOW;
    }
    p.killed = true;
    ::kill(-p.pid, SIGTERM);
    auto* raw = p_.get();
    p.grace = timer_.afterDelay(kill_grace).then([raw]() { raw->kill_tree(); }).eagerlyEvaluate(nullptr);
    return kj::READY_NOW;
  }

  kj::Promise<void> logs(LogsContext context) override {
    auto res = context.getResults();
    fill_chunk(res.initStdout(), p_->out);
    fill_chunk(res.initStderr(), p_->err);
    return kj::READY_NOW;
  }

  kj::Promise<void> streamLogs(StreamLogsContext context) override {
    context.allowCancellation();
    auto params = context.getParams();
    auto state = kj::heap<stream_state>(stream_state{params.getSink(), {params.getStdoutFrom(), params.getStderrFrom()}});
    auto& ref = *state;
    return send_more(ref).attach(kj::mv(state));
  }

  kj::Promise<void> waitForExit(WaitForExitContext context) override {
    context.allowCancellation();
    auto timeout = context.getParams().getTimeoutMs();
    auto wait = until_done().then([this, context]() mutable { p_->fill(context.getResults().initInfo()); });
    if (timeout == 0) return wait;
    return wait.exclusiveJoin(timer_.afterDelay(timeout * kj::MILLISECONDS).then([]() -> kj::Promise<void> {
      throw_code("timeout", "the process is still running");
    }));
  }

  kj::Promise<void> waitForPort(WaitForPortContext context) override {
    context.allowCancellation();
    auto p = context.getParams();
    if (p.getPort() == 0) throw_code("invalid_argument", "port 0");
    probe_spec spec{p.getPort(), p.getHttp(), p.hasPath() && p.getPath().size() ? std::string(p.getPath().cStr()) : "/",
                    p.getStatusMin() ? p.getStatusMin() : std::uint16_t(200),
                    p.getStatusMax() ? p.getStatusMax() : std::uint16_t(399),
                    p.getIntervalMs() ? p.getIntervalMs() : 100u};
    if (spec.path.empty() || spec.path[0] != '/' || spec.path.find_first_of("\r\n ") != std::string::npos)
      throw_code("invalid_argument", "the path must start with / and hold no spaces or line breaks");
    // One watch on the process's end for the whole wait (not one per try).
    auto ended = kj::heap<kj::ForkedPromise<void>>(until_done().fork());
    auto& ref = *ended;
    auto wait = probe_until_ready(spec, ref).then([context](std::uint16_t status) mutable {
      context.getResults().setStatus(status);
    }).attach(kj::mv(ended));
    auto timeout = p.getTimeoutMs();
    if (timeout == 0) return wait;
    return wait.exclusiveJoin(timer_.afterDelay(timeout * kj::MILLISECONDS).then([port = spec.port]() -> kj::Promise<void> {
      throw_code("timeout", "nothing answered on port " + std::to_string(port) + " yet");
    }));
  }

  kj::Promise<void> waitForLog(WaitForLogContext context) override {
    context.allowCancellation();
    auto params = context.getParams();
    std::string pattern(params.getPattern().cStr(), params.getPattern().size());
    if (pattern.empty()) throw_code("invalid_argument", "the pattern is empty");
    std::uint64_t from[2] = {params.getFromStart() ? p_->out.start() : p_->out.end,
                             params.getFromStart() ? p_->err.start() : p_->err.end};
    auto wait = scan(pattern, from[0], from[1], context);
    auto timeout = params.getTimeoutMs();
    if (timeout == 0) return wait;
    return wait.exclusiveJoin(timer_.afterDelay(timeout * kj::MILLISECONDS).then([pattern]() -> kj::Promise<void> {
      throw_code("timeout", "no line containing \"" + pattern.substr(0, 100) + "\" yet");
    }));
  }

  kj::Promise<void> write(WriteContext context) override {
    auto& p = *p_;
    if (!p.pty) throw_code("invalid_argument", "this process has no terminal: start it with pty to write to it");
    if (!p.running || p.term.get() == nullptr) throw_code("not_found", "the process has ended");
    auto data = context.getParams().getData();
    if (data.size() > 64 * 1024) throw_code("too_large", "at most 64 KiB per write");
    auto copy = kj::heapArray<kj::byte>(data);
    auto* bytes = copy.begin();
    auto size = copy.size();
    return p.term->write(bytes, size).attach(kj::mv(copy)).catch_([](kj::Exception&&) {
      throw_code("not_found", "the process's terminal is closed");
    });
  }

  kj::Promise<void> resize(ResizeContext context) override {
    auto& p = *p_;
    if (!p.pty) throw_code("invalid_argument", "this process has no terminal");
    auto params = context.getParams();
    if (params.getCols() < 1 || params.getCols() > 1000 || params.getRows() < 1 || params.getRows() > 1000)
      throw_code("invalid_argument", "cols and rows must be 1-1000");
    struct winsize ws {};
    ws.ws_col = params.getCols();
    ws.ws_row = params.getRows();
    if (p.term_fd >= 0 && ::ioctl(p.term_fd, TIOCSWINSZ, &ws) < 0) throw_code("not_found", "the process's terminal is closed");
    return kj::READY_NOW;
  }

 private:
  struct stream_state {
    wire::LogSink::Client sink;
    std::uint64_t next[2];  // stdout, stderr
  };

  struct probe_spec {
    std::uint16_t port;
    bool http;
    std::string path;
    std::uint16_t status_min, status_max;
    std::uint32_t interval_ms;
  };

  // One attempt: 0 when nothing listens (or, for http, the answer is not in range yet),
  // else the HTTP status (or 1 for a bare TCP accept).
  kj::Promise<std::uint16_t> probe(const probe_spec& spec) {
    auto& net = network();
    return net.parseAddress("127.0.0.1", spec.port)
        .then([](kj::Own<kj::NetworkAddress> addr) { return addr->connect().attach(kj::mv(addr)); })
        .then([spec](kj::Own<kj::AsyncIoStream> conn) -> kj::Promise<std::uint16_t> {
          if (!spec.http) return std::uint16_t(1);
          auto request = kj::str("GET ", spec.path.c_str(), " HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n\r\n");
          auto& ref = *conn;
          return ref.write(request.begin(), request.size())
              .attach(kj::mv(request))
              .then([&ref]() { return ref.readAllText(64 * 1024); })
              .then([spec](kj::String reply) -> std::uint16_t {
                // "HTTP/1.x NNN ..."
                std::string head(reply.cStr(), std::min<std::size_t>(reply.size(), 16));
                if (head.rfind("HTTP/", 0) != 0 || head.size() < 12) return 0;
                auto status = static_cast<std::uint16_t>(std::atoi(head.c_str() + 9));
                return status >= spec.status_min && status <= spec.status_max ? status : 0;
              })
              .attach(kj::mv(conn));
        })
        .catch_([](kj::Exception&&) -> std::uint16_t { return 0; });
  }

  kj::Promise<std::uint16_t> probe_until_ready(probe_spec spec, kj::ForkedPromise<void>& ended) {
    return probe(spec).then([this, spec, &ended](std::uint16_t status) -> kj::Promise<std::uint16_t> {
      if (status != 0) return status;
      if (p_->done()) throw_code("not_found", "the process ended before port " + std::to_string(spec.port) + " answered");
      // The next try after the interval, or at once when the process ends.
      return timer_.afterDelay(spec.interval_ms * kj::MILLISECONDS)
          .exclusiveJoin(ended.addBranch())
          .then([this, spec, &ended]() { return probe_until_ready(spec, ended); });
    });
  }

  kj::Network& network();

  kj::Promise<void> until_done() {
    if (p_->done()) return kj::READY_NOW;
    return p_->changed().then([this]() { return until_done(); });
  }

  // Sends what the client has not seen yet, one chunk at a time (flow control), then waits
  // for more; ends after the process's end and the last byte.
  kj::Promise<void> send_more(stream_state& s) {
    for (int i = 0; i < 2; ++i) {
      auto& r = i == 0 ? p_->out : p_->err;
      auto fd = static_cast<std::uint8_t>(i + 1);
      if (s.next[i] < r.start()) {
        auto req = s.sink.droppedRequest();
        req.setStream(fd);
        req.setFromOffset(s.next[i]);
        req.setToOffset(r.start());
        s.next[i] = r.start();
        return req.send().then([this, &s](auto) { return send_more(s); });
      }
      if (s.next[i] < r.end) {
        auto data = r.read(s.next[i], send_bytes);
        auto req = s.sink.writeRequest();
        req.setStream(fd);
        req.setOffset(s.next[i]);
        req.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(data.data()), data.size()));
        s.next[i] += data.size();
        return req.send().then([this, &s]() { return send_more(s); });
      }
    }
    if (p_->done()) {
      auto req = s.sink.endedRequest();
      p_->fill(req.initInfo());
      return req.send().ignoreResult();
    }
    return p_->changed().then([this, &s]() { return send_more(s); });
  }

  template <class Context>
  kj::Promise<void> scan(std::string pattern, std::uint64_t out_from, std::uint64_t err_from, Context context) {
    std::uint64_t from[2] = {out_from, err_from};
    for (int i = 0; i < 2; ++i) {
      auto& r = i == 0 ? p_->out : p_->err;
      if (from[i] < r.start()) from[i] = r.start();
      // Search a little before `from` so that a pattern split across chunks is found.
      auto back = std::min<std::uint64_t>(from[i] - r.start(), pattern.size() - 1);
      auto base = from[i] - back;
      auto text = r.read(base, r.capacity);
      auto hit = text.find(pattern);
      if (hit != std::string::npos) {
        auto line_start = text.rfind('\n', hit);
        line_start = line_start == std::string::npos ? 0 : line_start + 1;
        auto line_end = text.find('\n', hit);
        auto res = context.getResults();
        res.setStream(static_cast<std::uint8_t>(i + 1));
        res.setOffset(base + hit);
        res.setLine(text.substr(line_start, line_end == std::string::npos ? std::string::npos : line_end - line_start));
        return kj::READY_NOW;
      }
      from[i] = r.end;
    }
    if (p_->done()) throw_code("not_found", "the process ended without printing \"" + pattern.substr(0, 100) + "\"");
    return p_->changed().then([this, pattern, f0 = from[0], f1 = from[1], context]() mutable {
      return scan(pattern, f0, f1, context);
    });
  }

  kj::Own<bg_process> p_;
  kj::Timer& timer_;
  kj::Network& net_;
};

kj::Network& process_impl::network() { return net_; }

bool valid_id(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  return true;
}

}  // namespace

process_table::process_table(kj::AsyncIoContext& io, int exec_cgroups, std::vector<std::string>& cgroups_to_remove)
    : io_(io), exec_cgroups_(exec_cgroups), cgroups_to_remove_(cgroups_to_remove) {}

process_table::~process_table() {
  for (auto& [id, p] : procs_) p->table = nullptr;
  for (auto& p : retired_) p->table = nullptr;
}

void process_table::ended(bg_process& p) {
  auto forget = [this](std::map<std::string, kj::Own<bg_process>>::iterator it) {
    it->second->table = nullptr;
    retired_.push_back(kj::mv(it->second));
    procs_.erase(it);
  };
  auto it = procs_.find(p.id);
  if (p.auto_cleanup && it != procs_.end() && it->second.get() == &p) forget(it);
  std::size_t ended = 0;
  for (auto& [id, q] : procs_) ended += q->reported;
  while (ended-- > max_ended) {
    auto oldest = procs_.end();
    for (auto i = procs_.begin(); i != procs_.end(); ++i)
      if (i->second->reported && (oldest == procs_.end() || i->second->ended_ms < oldest->second->ended_ms)) oldest = i;
    forget(oldest);
  }
  if (!retired_.empty())
    tasks_.add(kj::evalLater([this]() { retired_.clear(); }));
}

wire::Process::Client process_table::start(process_spec spec, wire::ProcessInfo::Builder info) {
  auto id = spec.id.empty() ? "p" + std::to_string(++ids_) : spec.id;
  if (!valid_id(id)) throw_code("invalid_argument", "process ids are 1-64 characters of letters, digits, '-', '_' and '.'");
  auto existing = procs_.find(id);
  if (existing != procs_.end()) {
    if (existing->second->running) throw_code("already_exists", "a process called " + id + " is already running (kill it first, or pick another id)");
    procs_.erase(existing);  // An ended one gives its id to the new one.
  }
  auto ring_bytes = spec.ring_bytes ? std::min(spec.ring_bytes, max_ring) : default_ring;
  auto program = resolve_program(spec.argv[0], spec.env);
  if (program.empty()) throw_code("not_found", spec.argv[0] + ": command not found");
  struct stat st {};
  if (::stat(spec.cwd.c_str(), &st) < 0 || !S_ISDIR(st.st_mode))
    throw_code("not_found", "cannot change to directory " + spec.cwd);

  if (spec.restart_on_wake) save_spec(spec, id);
  auto p = kj::refcounted<bg_process>(ring_bytes);
  p->id = id;
  p->restart_on_wake = spec.restart_on_wake;
  p->auto_cleanup = spec.auto_cleanup;
  p->table = this;
  p->command = spec.command.empty() ? spec.argv : spec.command;
  p->cgroups_to_remove = &cgroups_to_remove_;
  if (exec_cgroups_ >= 0) {
    p->cgroup_name = "p-" + id + "-" + std::to_string(++counter_);
    if (::mkdirat(exec_cgroups_, p->cgroup_name.c_str(), 0755) == 0)
      p->cgroup_fd = ::openat(exec_cgroups_, p->cgroup_name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  unique_fd out_r, out_w, err_r, err_w, master, slave;
  if (spec.pty) {
    // A terminal of its own: the sandbox's devpts (newinstance), the slave as stdin, stdout,
    // stderr and controlling terminal; the master is its output and input.
    master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (master.get() < 0 || ::grantpt(master.get()) < 0 || ::unlockpt(master.get()) < 0)
      throw_code("internal", std::string("cannot open a terminal: ") + std::strerror(errno));
    char name[64];
    if (::ptsname_r(master.get(), name, sizeof name) != 0) throw_code("internal", "ptsname failed");
    slave.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (slave.get() < 0) throw_code("internal", std::string("cannot open ") + name + ": " + std::strerror(errno));
    struct winsize ws {};
    ws.ws_col = spec.cols;
    ws.ws_row = spec.rows;
    ::ioctl(master.get(), TIOCSWINSZ, &ws);
  } else {
    int out[2], err[2];
    check(::pipe2(out, O_CLOEXEC), "pipe2");
    check(::pipe2(err, O_CLOEXEC), "pipe2");
    out_r.reset(out[0]);
    out_w.reset(out[1]);
    err_r.reset(err[0]);
    err_w.reset(err[1]);
  }
  unique_fd procs;
  if (p->cgroup_fd >= 0) procs.reset(::openat(p->cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC));
  pid_t pid = 0;
  int in_fd = spec.pty ? slave.get() : -1;
  int out_fd = spec.pty ? slave.get() : out_w.get();
  int err_fd = spec.pty ? slave.get() : err_w.get();
  if (int rc = spawn_command(program, spec.argv, spec.env, spec.cwd, in_fd, out_fd, err_fd, procs.get(), pid, spec.pty)) {
    if (spec.restart_on_wake) ::unlink(spec_path(id).c_str());
    throw_code("invalid_argument", spec.argv[0] + ": " + std::strerror(rc));
  }
  out_w.reset();
  err_w.reset();
  slave.reset();
  p->pid = pid;
  p->pid_slot = pid;
  auto exited = io_.unixEventPort.onChildExit(p->pid_slot);  // Right after the spawn (KJ's rule).

  constexpr auto flags = kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP | kj::LowLevelAsyncIoProvider::ALREADY_CLOEXEC;
  auto* raw = p.get();
  kj::Promise<void> pumps = nullptr;
  if (spec.pty) {
    p->pty = true;
    p->term_fd = master.get();
    p->term = io_.lowLevelProvider->wrapSocketFd(master.release(), flags);
    // Reading the master fails with EIO once the last holder of the slave is gone: its end.
    pumps = pump(*p->term, 1, *raw).catch_([](kj::Exception&&) {});
  } else {
    auto out_stream = io_.lowLevelProvider->wrapInputFd(out_r.release(), flags);
    auto err_stream = io_.lowLevelProvider->wrapInputFd(err_r.release(), flags);
    pumps = kj::joinPromises(kj::arr(pump(*out_stream, 1, *raw), pump(*err_stream, 2, *raw)))
                .attach(kj::mv(out_stream), kj::mv(err_stream));
  }
  // The process's end: its tree goes with it (which closes the pipes its children held),
  // then the output is drained.
  auto ended = exited.then([raw](int status) {
    // Its own exit or a client's kill ends it for good; a kill from outside (its sandbox
    // stopping, the OOM killer) leaves the spec for the next start.
    if (raw->restart_on_wake && (WIFEXITED(status) || raw->ended_by_client)) ::unlink(spec_path(raw->id).c_str());
    raw->running = false;
    raw->status = status;
    raw->ended_ms = now_ms();
    raw->kill_tree();
    raw->wake();
  });
  p->events = kj::mv(spec.events);
  auto finish = [raw]() {
    raw->drained = true;
    raw->wake();
    KJ_IF_MAYBE(events, raw->events) {
      auto req = events->endedRequest();
      req.setId(raw->id);
      raw->fill(req.initInfo());
      raw->told = req.send()
                      .ignoreResult()
                      .then([raw]() {
                        raw->reported = true;
                        if (raw->table) raw->table->ended(*raw);
                      })
                      .eagerlyEvaluate([](kj::Exception&&) {});
    } else {
      raw->reported = true;
      if (raw->table) raw->table->ended(*raw);
    }
  };
  // (Copies: KJ's then() keeps a reference to an lvalue functor, and `finish` is a local.)
  raw->pumps = kj::joinPromises(kj::arr(kj::mv(ended), kj::mv(pumps)))
                   .then([finish]() { finish(); })
                   .eagerlyEvaluate([finish](kj::Exception&&) { finish(); });
  p->fill(info);
  procs_.emplace(id, kj::addRef(*p));
  return kj::heap<process_impl>(kj::mv(p), io_.provider->getTimer(), io_.provider->getNetwork());
}

void process_table::fill_list(capnp::List<wire::ProcessInfo>::Builder out) const {
  unsigned i = 0;
  for (auto& [id, p] : procs_) p->fill(out[i++]);
}

std::size_t process_table::size() const { return procs_.size(); }

kj::Maybe<wire::Process::Client> process_table::get(const std::string& id, wire::ProcessInfo::Builder info) {
  auto it = procs_.find(id);
  if (it == procs_.end()) return nullptr;
  it->second->fill(info);
  return wire::Process::Client(
      kj::heap<process_impl>(kj::addRef(*it->second), io_.provider->getTimer(), io_.provider->getNetwork()));
}

void process_table::restart_all(wire::ProcessEvents::Client events,
                                capnp::Orphanage orphanage, std::vector<capnp::Orphan<wire::RestartedProcess>>& started,
                                std::vector<std::string>& failed) {
  DIR* d = ::opendir(specs_dir.c_str());
  if (!d) return;  // None was ever kept.
  std::vector<std::string> names;
  while (auto* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".spec") == 0) names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (auto& n : names) {
    auto path = specs_dir + "/" + n;
    auto id = n.substr(0, n.size() - 5);
    try {
      unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      if (fd.get() < 0) throw_code("not_found", std::strerror(errno));
      capnp::ReaderOptions limits;
      limits.traversalLimitInWords = 4u << 20;  // Written by us, but the sandbox could change it.
      capnp::StreamFdMessageReader reader(fd.get(), limits);
      auto r = reader.getRoot<wire::ProcessSpec>();
      process_spec spec;
      spec.id = r.getId().cStr();
      if (spec.id != id) throw_code("invalid_argument", "the spec names another process");
      for (auto a : r.getArgv()) spec.argv.push_back(a.cStr());
      for (auto e : r.getEnv()) spec.env.push_back(e.cStr());
      spec.cwd = r.getCwd().cStr();
      spec.ring_bytes = r.getRingBytes();
      spec.restart_on_wake = true;
      spec.auto_cleanup = r.getAutoCleanup();
      spec.session = r.getSession().cStr();
      spec.pty = r.getPty();
      spec.cols = r.getCols() ? r.getCols() : 80;
      spec.rows = r.getRows() ? r.getRows() : 24;
      for (auto a : r.getCommand()) spec.command.push_back(a.cStr());
      spec.events = events;
      if (spec.argv.empty() || spec.argv[0].empty()) throw_code("invalid_argument", "empty command");
      auto cwd = spec.cwd;
      auto o = orphanage.newOrphan<wire::RestartedProcess>();
      start(kj::mv(spec), o.get().initInfo());
      o.get().setCwd(cwd);
      o.get().setAutoCleanup(r.getAutoCleanup());
      o.get().setSession(r.getSession());
      started.push_back(kj::mv(o));
    } catch (const kj::Exception& e) {
      ::unlink(path.c_str());  // A spec that cannot start is not tried at every wake.
      failed.push_back(id + ": " + e.getDescription().cStr());
    }
  }
}

std::uint32_t process_table::kill_all(int signal) {
  std::uint32_t n = 0;
  for (auto& [id, p] : procs_) {
    if (!p->running) continue;
    ++n;
    p->ended_by_client = true;
    if (signal != 0) {
      ::kill(-p->pid, signal);
    } else {
      p->killed = true;
      p->kill_tree();
    }
  }
  return n;
}

}  // namespace warren::init
