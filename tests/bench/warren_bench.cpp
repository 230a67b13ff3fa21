// warren_bench: warren's headline numbers next to their baselines, measured in the same
// run and interleaved (absolute times drift on shared machines; ratios hold). Prints a
// markdown table and writes the rows as JSON. Run it with `tools/dev bench [--quick]`.
//
// A figure that breaks (a failed exec, a daemon that does not start) aborts the run with a
// message: benchmarks never assert timings, but they do not report numbers for broken work.
#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/compat/http.h>
#include <kj/debug.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pty.h>
#include <sched.h>
#include <sys/socket.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actors/sandbox_logic.hpp"
#include "free_port.hpp"
#include "spawn.hpp"
#include "storage/journal.hpp"
#include "wire/events.hpp"
#include "wire/files.capnp.h"
#include "wire/warren.capnp.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

std::vector<pid_t> daemon_pids;  // The daemons under test, stopped on every exit path.

[[noreturn]] void broken(const std::string& what) {
  std::fprintf(stderr, "warren_bench: BROKEN: %s\n", what.c_str());
  for (auto pid : daemon_pids) {
    ::kill(pid, SIGTERM);
    int status;
    ::waitpid(pid, &status, 0);
  }
  std::exit(1);
}

struct row {
  std::string name, unit;
  double p50 = 0, p90 = 0, p99 = 0;
  std::size_t n = 0;
  std::string baseline;     // Name of the baseline row, or "" for a baseline itself.
  double ratio = 0;         // p50 / baseline p50.
  std::string goal;         // The goal, for the reader.
  bool higher_is_better = false;
};

row summarize(std::string name, std::string unit, std::vector<double> v, bool higher_is_better = false) {
  if (v.empty()) broken("no samples for " + name);
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) { return v[std::min(v.size() - 1, static_cast<std::size_t>(q * v.size()))]; };
  row r;
  r.name = std::move(name);
  r.unit = std::move(unit);
  r.n = v.size();
  // For throughput, "p50" is the median run and p90/p99 the slower runs (lower values).
  if (higher_is_better) {
    std::reverse(v.begin(), v.end());
    r.p50 = rank(0.5), r.p90 = rank(0.9), r.p99 = rank(0.99);
  } else {
    r.p50 = rank(0.5), r.p90 = rank(0.9), r.p99 = rank(0.99);
  }
  r.higher_is_better = higher_is_better;
  return r;
}

// A fixed reference row (a goal or a published figure) for figures without a process baseline.
row reference_row(std::string name, std::string unit, double value, bool higher_is_better = false) {
  row r;
  r.name = std::move(name);
  r.unit = std::move(unit);
  r.p50 = r.p90 = r.p99 = value;
  r.n = 1;
  r.higher_is_better = higher_is_better;
  return r;
}

row against(row r, const row& base, std::string goal = "") {
  r.baseline = base.name;
  r.ratio = base.p50 > 0 ? r.p50 / base.p50 : 0;
  r.goal = std::move(goal);
  return r;
}

// --- processes ---------------------------------------------------------------------------

pid_t spawn(const std::vector<std::string>& argv, const std::string& out_path = "/dev/null") {
  pid_t pid = -1;
  int rc = spawn_process(argv, out_path, pid);
  if (rc != 0) broken("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Wall time of running argv to completion; the run must succeed.
double time_process(const std::vector<std::string>& argv) {
  auto t = clock_type::now();
  if (int code = wait_exit(spawn(argv)); code != 0) broken(argv[0] + " exited " + std::to_string(code));
  return ms_since(t);
}

long read_kb(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(key.size()));
  return 0;
}

std::vector<pid_t> pids_with(const std::string& needle) {
  std::vector<pid_t> out;
  for (auto& e : fs::directory_iterator("/proc")) {
    auto name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(needle) != std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

// --- the daemon under test ------------------------------------------------------------------

struct daemon_under_test {
  std::string dir, data, socket, log;
  pid_t pid = -1;

  explicit daemon_under_test(const std::string& warrend, std::vector<std::string> extra = {}) {
    char tmpl[] = "/tmp/warren-bench-XXXXXX";
    dir = ::mkdtemp(tmpl);
    data = dir + "/data";
    socket = dir + "/warren.sock";
    log = dir + "/warrend.log";
    std::vector<std::string> argv = {warrend, "--data-dir", data, "--socket", socket, "--log-level", "warn"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    // Several daemons may run at once: each preview listener on a free port unless given one.
    if (std::find(extra.begin(), extra.end(), "--http-listen") == extra.end())
      argv.insert(argv.end(), {"--http-listen", "127.0.0.1:0"});
    pid = spawn(argv, log);
    daemon_pids.push_back(pid);
    for (int i = 0; i < 500 && !fs::exists(socket); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!fs::exists(socket)) broken("warrend did not start; log: " + log);
  }
  ~daemon_under_test() {
    ::kill(pid, SIGTERM);
    wait_exit(pid);
    std::erase(daemon_pids, pid);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// --- RPC ----------------------------------------------------------------------------------

struct client {
  kj::AsyncIoContext& io;
  kj::Own<kj::AsyncIoStream> stream;
  kj::Own<capnp::TwoPartyClient> rpc;
  warren::wire::Warren::Client root = nullptr;

  client(kj::AsyncIoContext& i, const std::string& socket) : io(i) {
    auto addr = io.provider->getNetwork().parseAddress("unix:" + socket).wait(io.waitScope);
    stream = addr->connect().wait(io.waitScope);
    rpc = kj::heap<capnp::TwoPartyClient>(*stream);
    root = rpc->bootstrap().castAs<warren::wire::Warren>();
  }
};

class null_output final : public warren::wire::ExecOutput::Server {
 protected:
  kj::Promise<void> writeStdout(WriteStdoutContext) override { return kj::READY_NOW; }
  kj::Promise<void> writeStderr(WriteStderrContext) override { return kj::READY_NOW; }
};

kj::Promise<void> exec_true(warren::wire::Sandbox::Client sandbox) {
  auto req = sandbox.execRequest();
  auto argv = req.initRequest().initCommand().initArgv(1);
  argv.set(0, "true");
  req.setOutput(kj::heap<null_output>());
  return req.send().then([](auto res) {
    if (res.getResult().getExitCode() != 0) broken("`true` in a sandbox exited " + std::to_string(res.getResult().getExitCode()));
  });
}

// Get-or-create `name` and run `true` in it, pipelined (one round trip).
kj::Promise<void> create_and_exec(client& c, const std::string& name) {
  auto req = c.root.sandboxRequest();
  req.setName(name);
  return exec_true(req.send().getSandbox());
}

kj::Promise<void> create_only(client& c, const std::string& name) {
  auto req = c.root.sandboxRequest();
  req.setName(name);
  return req.send().ignoreResult();
}

kj::Promise<void> destroy(client& c, const std::string& name) {
  auto req = c.root.destroyRequest();
  req.setName(name);
  return req.send().then([name](auto res) {
    if (!res.getExisted()) broken("destroy of " + name + " found nothing");
  });
}

double time_rpc(client& c, kj::Promise<void> p) {
  auto t = clock_type::now();
  p.wait(c.io.waitScope);
  return ms_since(t);
}

// Runs total operations with `window` in flight; returns each one's latency in ms.
std::vector<double> run_window(client& c, int total, int window, std::function<kj::Promise<void>(int)> op) {
  std::vector<double> lat(static_cast<std::size_t>(total));
  std::function<kj::Promise<void>(int)> lane = [&](int i) -> kj::Promise<void> {
    if (i >= total) return kj::READY_NOW;
    auto t = clock_type::now();
    return op(i).then([&, i, t]() {
      lat[static_cast<std::size_t>(i)] = ms_since(t);
      return lane(i + window);
    });
  };
  kj::Vector<kj::Promise<void>> lanes;
  for (int j = 0; j < std::min(window, total); ++j) lanes.add(lane(j));
  kj::joinPromises(lanes.releaseAsArray()).wait(c.io.waitScope);
  return lat;
}

// --- benchmarks -----------------------------------------------------------------------------

const std::vector<std::string> bare = {"/bin/true"};
const std::vector<std::string> unshare = {"unshare", "--mount", "--pid", "--fork", "/bin/true"};
const std::vector<std::string> bwrap = {"bwrap", "--unshare-all", "--ro-bind", "/usr", "/usr",
                                        "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
                                        "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev",
                                        "/bin/true"};

void bench_latency(client& c, int n, std::vector<row>& rows) {
  std::vector<double> b, u, w, create, warm, bare_warm;
  // Warm-up: page cache, the base image, the daemon's first allocations.
  create_and_exec(c, "warmup").wait(c.io.waitScope);
  for (int i = 0; i < n; ++i) {
    b.push_back(time_process(bare));
    u.push_back(time_process(unshare));
    w.push_back(time_process(bwrap));
    create.push_back(time_rpc(c, create_and_exec(c, "c-" + std::to_string(i))));
  }
  auto req = c.root.sandboxRequest();
  req.setName("warm");
  auto warm_sandbox = req.send().getSandbox();
  exec_true(warm_sandbox).wait(c.io.waitScope);
  for (int i = 0; i < n; ++i) {
    bare_warm.push_back(time_process(bare));
    warm.push_back(time_rpc(c, exec_true(warm_sandbox)));
  }
  auto rb = summarize("baseline: fork+exec /bin/true", "ms", b);
  auto ru = summarize("baseline: unshare --mount --pid --fork true", "ms", u);
  auto rw = summarize("baseline: bwrap --unshare-all ... true", "ms", w);
  auto rc = summarize("create-to-first-exec (RPC, journaled)", "ms", create);
  auto rbw = summarize("baseline: fork+exec /bin/true (warm pass)", "ms", bare_warm);
  rows.push_back(rb);
  rows.push_back(ru);
  rows.push_back(rw);
  rows.push_back(against(rc, rb, "<= 2.5x fork+exec"));
  rows.push_back(against(rc, rw, "< 1x bwrap"));
  rows.push_back(rbw);
  rows.push_back(against(summarize("warm exec round trip (RPC, journaled)", "ms", warm), rbw, "<= 1.5x fork+exec"));
}

// The cost of each optional layer of the jail: four daemons, one per `--jail` mode, measured
// interleaved so that the machine's noise hits all alike.
void bench_jail(const std::string& warrend, int n, std::vector<row>& rows) {
  struct mode {
    const char* flag;
    const char* name;
  };
  const std::vector<mode> modes = {
      {"namespaces-only", "jail: create-to-first-exec, namespaces + overlay + cgroups + capabilities"},
      {"no-userns", "jail: create-to-first-exec, + seccomp"},
      {"no-seccomp", "jail: create-to-first-exec, + user namespace (idmapped layers)"},
      {"full", "jail: create-to-first-exec, full (user namespace + seccomp)"}};
  std::vector<std::unique_ptr<daemon_under_test>> daemons;
  for (auto& m : modes) daemons.push_back(std::make_unique<daemon_under_test>(warrend, std::vector<std::string>{"--jail", m.flag}));
  auto io = kj::setupAsyncIo();
  std::vector<std::unique_ptr<client>> clients;
  for (auto& d : daemons) {
    clients.push_back(std::make_unique<client>(io, d->socket));
    create_and_exec(*clients.back(), "warmup").wait(io.waitScope);
  }
  std::vector<std::vector<double>> samples(modes.size());
  for (int i = 0; i < n; ++i)
    for (std::size_t k = 0; k < modes.size(); ++k)
      samples[k].push_back(time_rpc(*clients[k], create_and_exec(*clients[k], "j-" + std::to_string(i))));
  auto base = summarize(modes[0].name, "ms", samples[0]);
  rows.push_back(base);
  row full;
  for (std::size_t k = 1; k < modes.size(); ++k) {
    auto r = against(summarize(modes[k].name, "ms", samples[k]), base, k + 1 == modes.size() ? "<= +1 ms" : "");
    rows.push_back(r);
    full = r;
  }
  rows.push_back(summarize("jail: what user namespace + seccomp add to a create (p50 difference)", "ms", {full.p50 - base.p50}));
}

class null_bytes final : public warren::wire::ByteSink::Server {
 protected:
  kj::Promise<void> write(WriteContext) override { return kj::READY_NOW; }
  kj::Promise<void> end(EndContext) override { return kj::READY_NOW; }
};

// File throughput through the files API (atomic writes: temp file, fsync, rename) next to
// `cp` of the same sizes on the host's disk, interleaved.
void bench_files(client& c, const std::string& scratch, int n, std::vector<row>& rows) {
  const std::size_t chunk_bytes = 256 << 10;  // One openWrite chunk, as `warren cp` sends them.
  auto req = c.root.sandboxRequest();
  req.setName("files");
  auto files = req.send().getSandbox().filesRequest().send().getFiles();
  for (std::size_t size : {std::size_t(1) << 20, std::size_t(100) << 20}) {
    auto label = size == (std::size_t(1) << 20) ? std::string("1 MB") : std::string("100 MB");
    auto src = scratch + "/src-" + std::to_string(size);
    {
      std::ofstream out(src, std::ios::binary);
      std::string block(1 << 20, 'w');
      for (std::size_t i = 0; i < size >> 20; ++i) out.write(block.data(), static_cast<std::streamsize>(block.size()));
    }
    std::string chunk(chunk_bytes, 'w');
    std::vector<double> cp_ms, write_ms, read_ms;
    int runs = size > (std::size_t(1) << 20) ? std::max(3, n / 10) : n;
    for (int i = 0; i < runs; ++i) {
      // Baseline: cp and a sync of the copy (the API syncs what it writes).
      cp_ms.push_back(time_process({"/bin/sh", "-c", "cp " + src + " " + scratch + "/dst && sync " + scratch + "/dst"}));
      auto path = "/workspace/f-" + std::to_string(size);
      auto t = clock_type::now();
      if (size <= (std::size_t(1) << 20)) {
        auto w = files.writeFileRequest();
        w.setPath(path);
        std::string all(size, 'w');
        w.setData(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(all.data()), all.size()));
        w.send().wait(c.io.waitScope);
      } else {
        auto open = files.openWriteRequest();
        open.setPath(path);
        auto sink = open.send().getSink();
        for (std::size_t done = 0; done < size; done += chunk.size()) {
          auto w = sink.writeRequest();
          w.setData(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(chunk.data()), chunk.size()));
          w.send().wait(c.io.waitScope);
        }
        sink.commitRequest().send().wait(c.io.waitScope);
      }
      write_ms.push_back(ms_since(t));
      t = clock_type::now();
      auto r = files.streamFileRequest();
      r.setPath(path);
      r.setSink(kj::heap<null_bytes>());
      if (r.send().wait(c.io.waitScope).getBytes() != size) broken("streamFile returned a short file");
      read_ms.push_back(ms_since(t));
    }
    auto mbps = [&](std::vector<double> ms) {
      for (auto& v : ms) v = static_cast<double>(size) / 1048576.0 / (v / 1000.0);
      return ms;
    };
    auto base = summarize("baseline: cp + sync of " + label + " on the host's disk", "MB/s", mbps(cp_ms), true);
    rows.push_back(base);
    rows.push_back(against(summarize("files: write " + label + " (atomic, synced)", "MB/s", mbps(write_ms), true), base, ">= 0.7x cp"));
    rows.push_back(against(summarize("files: read " + label + " (streamFile)", "MB/s", mbps(read_ms), true), base, ">= 0.7x cp"));
  }
}

void bench_burst(client& c, std::vector<row>& rows) {
  constexpr int burst = 100;
  std::vector<double> wall_bare, wall_w, lat;
  for (int rep = 0; rep < 3; ++rep) {
    auto t = clock_type::now();
    std::vector<pid_t> pids;
    for (int i = 0; i < burst; ++i) pids.push_back(spawn(bare));
    for (auto p : pids) wait_exit(p);
    wall_bare.push_back(ms_since(t));
    t = clock_type::now();
    auto l = run_window(c, burst, burst, [&](int i) {
      return create_and_exec(c, "burst-" + std::to_string(rep) + "-" + std::to_string(i));
    });
    wall_w.push_back(ms_since(t));
    lat.insert(lat.end(), l.begin(), l.end());
  }
  auto rb = summarize("baseline: 100 concurrent fork+exec /bin/true, wall", "ms", wall_bare);
  rows.push_back(rb);
  rows.push_back(against(summarize("burst: 100 concurrent creates+exec, wall", "ms", wall_w), rb, "<= 1500 ms"));
  rows.push_back(summarize("burst: latency of one create+exec among 100", "ms", lat));
}

void bench_density(client& c, const daemon_under_test& d, int n, std::vector<row>& rows) {
  auto avail_before = read_kb("/proc/meminfo", "MemAvailable:");
  auto rss_before = read_kb("/proc/" + std::to_string(d.pid) + "/status", "VmRSS:");
  auto t = clock_type::now();
  run_window(c, n, 32, [&](int i) { return create_only(c, "idle-" + std::to_string(i)); });
  double create_s = ms_since(t) / 1000;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // Let lazy allocations settle.
  auto rss_after = read_kb("/proc/" + std::to_string(d.pid) + "/status", "VmRSS:");
  auto avail_after = read_kb("/proc/meminfo", "MemAvailable:");
  long pss = 0;
  // Every process of the idle sandboxes (one each: their PID 1) and nothing else.
  auto inits = pids_with("warren-init --name idle-");
  for (auto p : inits) pss += read_kb("/proc/" + std::to_string(p) + "/smaps_rollup", "Pss:");
  if (static_cast<int>(inits.size()) != n) broken("expected " + std::to_string(n) + " idle inits, found " + std::to_string(inits.size()));

  auto goal_mem = reference_row("goal: memory per idle sandbox", "KB", 1024);
  rows.push_back(goal_mem);
  auto one = [&](std::string name, double kb) {
    auto r = summarize(std::move(name), "KB", {kb});
    return against(r, goal_mem, "<= 1 MB");
  };
  rows.push_back(one("density: host memory per idle sandbox (MemAvailable drop / N)", double(avail_before - avail_after) / n));
  rows.push_back(one("density: PSS of the sandbox's processes per idle sandbox", double(pss) / n));
  rows.push_back(one("density: daemon RSS per idle sandbox", double(rss_after - rss_before) / n));
  auto goal_rate = reference_row("reference: 142 sandboxes/s (DESIGN.md, one supervisor)", "sandboxes/s", 142, true);
  rows.push_back(goal_rate);
  rows.push_back(against(summarize("density: creation rate, " + std::to_string(n) + " idle sandboxes, 32 in flight", "sandboxes/s", {n / create_s}, true), goal_rate));
  t = clock_type::now();
  run_window(c, n, 32, [&](int i) { return destroy(c, "idle-" + std::to_string(i)); });
  double destroy_s = ms_since(t) / 1000;
  rows.push_back(summarize("density: teardown rate (destroy, 32 in flight)", "sandboxes/s", {n / destroy_s}, true));
}

kj::Promise<void> hibernate(warren::wire::Sandbox::Client sandbox) {
  return sandbox.hibernateRequest().send().then([](auto res) {
    if (res.getInfo().getState() != warren::wire::SandboxState::HIBERNATED) broken("hibernate did not hibernate");
  });
}

// Hibernate latency, wake-to-first-exec, and what a hibernated sandbox costs the daemon.
void bench_hibernation(client& c, const daemon_under_test& d, int n, int sleepers, std::vector<row>& rows) {
  std::vector<double> sleep_ms, wake_ms, bare_ms;
  for (int i = 0; i < n; ++i) {
    auto req = c.root.sandboxRequest();
    req.setName("nap-" + std::to_string(i));
    auto sandbox = req.send().getSandbox();
    exec_true(sandbox).wait(c.io.waitScope);
    sleep_ms.push_back(time_rpc(c, hibernate(sandbox)));
    bare_ms.push_back(time_process(bare));
    wake_ms.push_back(time_rpc(c, exec_true(sandbox)));
  }
  auto rb = summarize("baseline: fork+exec /bin/true (hibernation pass)", "ms", bare_ms);
  rows.push_back(rb);
  rows.push_back(summarize("hibernate (RPC until processes stopped, journaled)", "ms", sleep_ms));
  rows.push_back(against(summarize("wake-to-first-exec (exec on a hibernated sandbox)", "ms", wake_ms), rb, "p50 <= 15 ms"));

  // Memory: the daemon's RSS growth per sandbox that exists only as a hibernated record.
  auto rss = [&] { return read_kb("/proc/" + std::to_string(d.pid) + "/status", "VmRSS:"); };
  auto before = rss();
  run_window(c, sleepers, 32, [&](int i) {
    auto req = c.root.sandboxRequest();
    req.setName("sleeper-" + std::to_string(i));
    return hibernate(req.send().getSandbox());
  });
  auto live = pids_with("warren-init --name sleeper-");
  if (!live.empty()) broken(std::to_string(live.size()) + " hibernated sandboxes still have processes");
  auto goal = reference_row("goal: daemon memory per hibernated sandbox", "KB", 1);
  rows.push_back(goal);
  rows.push_back(against(summarize("daemon RSS growth per hibernated sandbox (" + std::to_string(sleepers) +
                                       ", no process each; includes the journal's memtable)",
                                   "KB", {double(rss() - before) / sleepers}),
                         goal, "<= 1 KB"));
}

// --- preview proxy -------------------------------------------------------------------------

// 127.0.0.1:port inside a sandbox's network namespace: the "direct" baseline of the proxy.
class netns_address final : public kj::NetworkAddress {
 public:
  netns_address(kj::LowLevelAsyncIoProvider& ll, int netns, std::uint16_t port) : ll_(ll), netns_(netns), port_(port) {}
  kj::Promise<kj::Own<kj::AsyncIoStream>> connect() override {
    int own = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (::setns(netns_, CLONE_NEWNET) < 0) broken("setns into the sandbox");
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (::setns(own, CLONE_NEWNET) < 0) broken("setns back");
    ::close(own);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ll_.wrapConnectingSocketFd(fd, reinterpret_cast<sockaddr*>(&a), sizeof a,
                                      kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP);
  }
  kj::Own<kj::ConnectionReceiver> listen() override { KJ_UNIMPLEMENTED("connect only"); }
  kj::Own<kj::NetworkAddress> clone() override { return kj::heap<netns_address>(ll_, netns_, port_); }
  kj::String toString() override { return kj::str("sandbox port ", port_); }

 private:
  kj::LowLevelAsyncIoProvider& ll_;
  int netns_;
  std::uint16_t port_;
};

// One GET on a keep-alive client; returns the body's size.
std::size_t http_get(client& c, kj::HttpClient& http, const kj::HttpHeaderTable& table, const std::string& host,
                     const std::string& path) {
  kj::HttpHeaders h(table);
  h.set(kj::HttpHeaderId::HOST, host.c_str());
  auto res = http.request(kj::HttpMethod::GET, path.c_str(), h).response.wait(c.io.waitScope);
  if (res.statusCode != 200) broken("GET " + path + " answered " + std::to_string(res.statusCode));
  // Read and drop (readAllBytes would measure its own reallocations).
  static std::vector<kj::byte> buf(256 * 1024);
  std::size_t total = 0;
  for (;;) {
    auto n = res.body->tryRead(buf.data(), 1, buf.size()).wait(c.io.waitScope);
    if (n == 0) return total;
    total += n;
  }
}


// Latency and throughput through a preview URL against the same server reached directly (a
// socket in the sandbox's network namespace), and the first byte from a hibernated sandbox
// against a cold start of the same server on the host.
void bench_preview(client& c, std::uint16_t http_port, const std::string& scratch, int n, std::vector<row>& rows) {
  std::ifstream script_in(std::string(WARREN_FIXTURES_DIR) + "/dev_server.py");
  std::string script((std::istreambuf_iterator<char>(script_in)), std::istreambuf_iterator<char>());
  auto sreq = c.root.sandboxRequest();
  sreq.setName("preview");
  auto sandbox = sreq.send().getSandbox();
  auto files = sandbox.filesRequest().send().getFiles();
  auto w = files.writeFileRequest();
  w.setPath("/workspace/dev_server.py");
  w.setData(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(script.data()), script.size()));
  w.send().wait(c.io.waitScope);
  auto start = sandbox.startProcessRequest();
  auto argv = start.initRequest().initCommand().initArgv(3);
  argv.set(0, "python3");
  argv.set(1, "/workspace/dev_server.py");
  argv.set(2, "8000");
  start.initOptions().setRestartOnWake(true);
  auto process = start.send().getProcess();
  auto ready = process.waitForPortRequest();
  ready.setPort(8000);
  ready.setHttp(true);
  ready.setTimeoutMs(30000);
  ready.send().wait(c.io.waitScope);
  auto ex = sandbox.exposePortRequest();
  ex.setPort(8000);
  std::string url = ex.send().wait(c.io.waitScope).getPort().getUrl().cStr();
  auto host = url.substr(7, url.find('/', 7) - 7);

  auto inits = pids_with("warren-init --name preview ");
  if (inits.empty()) broken("no init of the preview sandbox");
  int netns = ::open(("/proc/" + std::to_string(inits[0]) + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC);
  kj::HttpHeaderTable table;
  netns_address direct_addr(*c.io.lowLevelProvider, netns, 8000);
  auto gateway_addr = c.io.provider->getNetwork().parseAddress("127.0.0.1", http_port).wait(c.io.waitScope);
  auto direct = kj::newHttpClient(c.io.provider->getTimer(), table, direct_addr);
  auto proxied = kj::newHttpClient(c.io.provider->getTimer(), table, *gateway_addr);

  // Interleaved, so that both see the same machine.
  std::vector<double> direct_ms, proxied_ms, direct_mbps, proxied_mbps;
  for (int i = 0; i < 5; ++i) {  // Warm both connections.
    http_get(c, *direct, table, "localhost", "/");
    http_get(c, *proxied, table, host, "/");
  }
  for (int i = 0; i < n * 5; ++i) {
    auto t = clock_type::now();
    http_get(c, *direct, table, "localhost", "/");
    direct_ms.push_back(ms_since(t));
    t = clock_type::now();
    http_get(c, *proxied, table, host, "/");
    proxied_ms.push_back(ms_since(t));
  }
  const std::size_t big = 64 << 20;
  auto path = "/bytes?n=" + std::to_string(big);
  for (int i = 0; i < std::max(3, n / 20); ++i) {
    auto t = clock_type::now();
    if (http_get(c, *direct, table, "localhost", path) != big) broken("short body (direct)");
    direct_mbps.push_back(big / 1048576.0 / (ms_since(t) / 1000));
    t = clock_type::now();
    if (http_get(c, *proxied, table, host, path) != big) broken("short body (preview)");
    proxied_mbps.push_back(big / 1048576.0 / (ms_since(t) / 1000));
  }
  auto base_lat = summarize("baseline: GET / direct to the sandbox's port (keep-alive)", "ms", direct_ms);
  rows.push_back(base_lat);
  auto lat = against(summarize("preview: GET / through the preview URL (keep-alive)", "ms", proxied_ms), base_lat,
                     "<= +0.5 ms p50");
  rows.push_back(lat);
  rows.push_back(reference_row("preview: added latency p50 (preview - direct)", "ms", lat.p50 - base_lat.p50));
  auto base_tp = summarize("baseline: GET 64 MB direct to the sandbox's port", "MB/s", direct_mbps, true);
  rows.push_back(base_tp);
  rows.push_back(against(summarize("preview: GET 64 MB through the preview URL", "MB/s", proxied_mbps, true), base_tp,
                         ">= 0.8x"));
  direct = nullptr;
  proxied = nullptr;
  ::close(netns);

  // First byte from a hibernated sandbox: wake, restart the server, wait for its port, proxy.
  std::vector<double> cold_ms, host_ms;
  auto host_script = scratch + "/dev_server.py";
  std::ofstream(host_script) << script;
  for (int i = 0; i < std::max(3, n / 20); ++i) {
    sandbox.hibernateRequest().send().wait(c.io.waitScope);
    auto fresh = kj::newHttpClient(c.io.provider->getTimer(), table, *gateway_addr);
    auto t = clock_type::now();
    http_get(c, *fresh, table, host, "/");
    cold_ms.push_back(ms_since(t));
    // The same server started cold on the host, until its first answer.
    auto port = free_loopback_port();
    t = clock_type::now();
    auto pid = spawn({"/usr/bin/python3", host_script, std::to_string(port)});
    auto addr = c.io.provider->getNetwork().parseAddress("127.0.0.1", port).wait(c.io.waitScope);
    for (;;) {
      try {
        auto h = kj::newHttpClient(c.io.provider->getTimer(), table, *addr);
        http_get(c, *h, table, "localhost", "/");
        break;
      } catch (const kj::Exception&) {
        c.io.provider->getTimer().afterDelay(2 * kj::MILLISECONDS).wait(c.io.waitScope);
      }
    }
    host_ms.push_back(ms_since(t));
    ::kill(pid, SIGTERM);
    wait_exit(pid);
  }
  auto base_cold = summarize("baseline: the same server started cold on the host, to its first answer", "ms", host_ms);
  rows.push_back(base_cold);
  rows.push_back(against(summarize("preview: first byte from a hibernated sandbox (wake, restart, proxy)", "ms", cold_ms),
                         base_cold));
}

// --- terminals ------------------------------------------------------------------------------

// Keystroke to echo: one key typed into an interactive bash, until its echo comes back.
// Through the daemon's WebSocket terminal (sandbox, pty, agent, RPC, WebSocket) against bash
// on a pty of this process (the same shell, no warren), interleaved.
void bench_terminal(client& c, std::uint16_t http_port, const std::string& token, int n, std::vector<row>& rows) {
  auto sreq = c.root.sandboxRequest();
  sreq.setName("term");
  sreq.send().wait(c.io.waitScope);
  kj::HttpHeaderTable table;
  struct entropy_source final : kj::EntropySource {
    void generate(kj::ArrayPtr<kj::byte> buffer) override {
      for (auto& b : buffer) b = static_cast<kj::byte>(std::rand());
    }
  } entropy;
  kj::HttpClientSettings settings;
  settings.entropySource = entropy;
  auto addr = c.io.provider->getNetwork().parseAddress("127.0.0.1", http_port).wait(c.io.waitScope);
  auto http = kj::newHttpClient(c.io.provider->getTimer(), table, *addr, settings);
  kj::HttpHeaders h(table);
  h.set(kj::HttpHeaderId::HOST, "localhost");
  auto path = "/terminal/term/ws?token=" + token;
  auto res = http->openWebSocket(kj::StringPtr(path.c_str()), h).wait(c.io.waitScope);
  if (res.statusCode != 101) broken("the terminal WebSocket answered " + std::to_string(res.statusCode));
  auto ws = kj::mv(res.webSocketOrBody.get<kj::Own<kj::WebSocket>>());
  auto wait_for = [&](char key) {
    for (;;) {
      auto m = ws->receive(1 << 20).wait(c.io.waitScope);
      if (m.is<kj::Array<kj::byte>>()) {
        auto& b = m.get<kj::Array<kj::byte>>();
        if (std::find(b.begin(), b.end(), static_cast<kj::byte>(key)) != b.end()) return;
      } else if (!m.is<kj::String>()) {
        broken("the terminal WebSocket closed");
      }
    }
  };
  auto send = [&](const std::string& keys) {
    ws->send(kj::arrayPtr(reinterpret_cast<const kj::byte*>(keys.data()), keys.size())).wait(c.io.waitScope);
  };
  send("PS1='$ '; echo read\x79\r");  // "ready" once the shell took its first line.
  wait_for('y');

  // The baseline: bash on a pty of our own.
  int master = -1;
  pid_t child = ::forkpty(&master, nullptr, nullptr, nullptr);
  if (child < 0) broken("forkpty failed");
  if (child == 0) {
    ::setenv("PS1", "$ ", 1);
    ::execl("/bin/bash", "bash", "--norc", "--noprofile", "-i", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto local_wait = [&](char key) {
    char buf[4096];
    for (;;) {
      auto got = ::read(master, buf, sizeof buf);
      if (got <= 0) broken("the local pty closed");
      if (std::memchr(buf, key, static_cast<std::size_t>(got))) return;
    }
  };
  const char* first = "echo read\x79\r";
  auto first_len = static_cast<ssize_t>(std::strlen(first));
  if (::write(master, first, static_cast<std::size_t>(first_len)) != first_len) broken("write to the local pty");
  local_wait('y');

  std::vector<double> direct_ms, ws_ms;
  for (int i = 0; i < n; ++i) {
    char key = static_cast<char>('a' + i % 20);
    auto t = clock_type::now();
    if (::write(master, &key, 1) != 1) broken("write to the local pty");
    local_wait(key);
    direct_ms.push_back(ms_since(t));
    t = clock_type::now();
    send(std::string(1, key));
    wait_for(key);
    ws_ms.push_back(ms_since(t));
    if (i % 40 == 39) {  // Clear the line now and then (Ctrl-U).
      if (::write(master, "\x15", 1) != 1) broken("write to the local pty");
      send("\x15");
    }
  }
  ::kill(child, SIGKILL);
  wait_exit(child);
  ::close(master);
  ws->close(1000, "done").wait(c.io.waitScope);
  auto base = summarize("baseline: keystroke to echo, bash on a local pty", "ms", direct_ms);
  rows.push_back(base);
  rows.push_back(against(summarize("terminal: keystroke to echo through the WebSocket (sandbox pty)", "ms", ws_ms), base,
                         "<= 3 ms p50"));
}

// --- snapshots, forks, backups ---------------------------------------------------------------

// Runs a shell line in a sandbox; it must succeed.
void sandbox_shell(client& c, warren::wire::Sandbox::Client sandbox, const std::string& line) {
  auto req = sandbox.execRequest();
  req.initRequest().initCommand().setShell(line);
  req.getRequest().setCollectOutput(4096);
  auto r = req.send().wait(c.io.waitScope).getResult();
  if (r.getExitCode() != 0)
    broken("`" + line + "` in a sandbox exited " + std::to_string(r.getExitCode()) + ": " +
           std::string(reinterpret_cast<const char*>(r.getStderr().begin()), r.getStderr().size()));
}

// A 178 MB, 12,000-file node_modules-like tree (tests/fixtures/make_tree.py) in a running
// sandbox with a server, against the same tree on the host: snapshot pause, restore to the
// first exec, fork of 4, backup and restore of the directory, next to tar | zstd and cp -a.
void bench_snapshots(client& c, const std::string& scratch, int reps, std::vector<row>& rows) {
  std::ifstream script_in(std::string(WARREN_FIXTURES_DIR) + "/make_tree.py");
  std::string script((std::istreambuf_iterator<char>(script_in)), std::istreambuf_iterator<char>());
  auto sreq = c.root.sandboxRequest();
  sreq.setName("snapsrc");
  sreq.initOptions().setDiskBytes(4ull << 30);
  auto src = sreq.send().getSandbox();
  auto w = src.filesRequest().send().getFiles().writeFileRequest();
  w.setPath("/workspace/make_tree.py");
  w.setData(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(script.data()), script.size()));
  w.send().wait(c.io.waitScope);
  sandbox_shell(c, src, "python3 /workspace/make_tree.py /workspace/app/node_modules > /dev/null");
  auto start = src.startProcessRequest();
  start.initRequest().initCommand().setShell("exec python3 -m http.server 8000 --bind 127.0.0.1");
  start.initOptions().setRestartOnWake(true);
  start.send().wait(c.io.waitScope);
  auto tree = scratch + "/tree";
  if (int code = wait_exit(spawn({"python3", std::string(WARREN_FIXTURES_DIR) + "/make_tree.py", tree})); code != 0)
    broken("make_tree.py on the host exited " + std::to_string(code));

  std::vector<double> tar_ms, untar_ms, cp_ms, pause_ms, snap_ms, first_exec_ms, fork_ms, backup_ms, unbackup_ms;
  // Every figure starts with clean caches of written data (`sync`, untimed): one step's
  // writes must not be flushed on the next one's time.
  auto settle = [] { ::sync(); };
  for (int i = 0; i < reps; ++i) {
    // Baselines on the host, interleaved with warren's figures.
    auto archive = scratch + "/tree.tar.zst", out = scratch + "/untar", copy = scratch + "/copy";
    settle();
    tar_ms.push_back(time_process({"/bin/sh", "-c", "tar -cf - -C " + tree + " . | zstd -q -3 -T0 -f -o " + archive}));
    fs::remove_all(out);
    fs::create_directories(out);
    settle();
    untar_ms.push_back(time_process({"/bin/sh", "-c", "zstd -q -d -c " + archive + " | tar -xf - -C " + out}));
    fs::remove_all(copy);
    settle();
    cp_ms.push_back(time_process({"cp", "-a", tree, copy}));

    // Snapshot of the running sandbox.
    settle();
    auto t = clock_type::now();
    auto snap = src.snapshotRequest().send().wait(c.io.waitScope).getSnapshot();
    snap_ms.push_back(ms_since(t));
    pause_ms.push_back(snap.getPauseUs() / 1000.0);
    auto id = snap.getId();

    // A new sandbox from it, to its first command.
    auto name = "restored-" + std::to_string(i);
    settle();
    t = clock_type::now();
    auto rreq = c.root.sandboxRequest();
    rreq.setName(name);
    rreq.initOptions().setFromSnapshot(id);
    exec_true(rreq.send().getSandbox()).wait(c.io.waitScope);
    first_exec_ms.push_back(ms_since(t));
    destroy(c, name).wait(c.io.waitScope);

    // Fork of 4 (a snapshot of its own, then 4 running sandboxes).
    auto freq = src.forkRequest();
    auto names = freq.initNames(4);
    for (unsigned k = 0; k < 4; ++k) names.set(k, "fork-" + std::to_string(i) + "-" + std::to_string(k));
    settle();
    t = clock_type::now();
    auto forked = freq.send().wait(c.io.waitScope);
    fork_ms.push_back(ms_since(t));
    for (unsigned k = 0; k < 4; ++k) destroy(c, "fork-" + std::to_string(i) + "-" + std::to_string(k)).wait(c.io.waitScope);
    for (auto sid : {id, forked.getSnapshot().getId()}) {
      auto del = c.root.deleteSnapshotRequest();
      del.setId(sid);
      del.send().wait(c.io.waitScope);
    }

    // Backup of the directory, and its restore.
    auto breq = src.backupRequest();
    breq.setDir("/workspace/app/node_modules");
    settle();
    t = clock_type::now();
    std::string backup_id = breq.send().wait(c.io.waitScope).getBackup().getId().cStr();
    backup_ms.push_back(ms_since(t));
    auto rb = src.restoreBackupRequest();
    rb.setId(backup_id);
    rb.setDir("/workspace/restored");
    settle();
    t = clock_type::now();
    rb.send().wait(c.io.waitScope);
    unbackup_ms.push_back(ms_since(t));
    auto db = c.root.deleteBackupRequest();
    db.setId(backup_id);
    db.send().wait(c.io.waitScope);
  }
  auto base_tar = summarize("baseline: tar | zstd -3 of the 178 MB tree (host)", "ms", tar_ms);
  auto base_untar = summarize("baseline: zstd -d | tar -x of it (host)", "ms", untar_ms);
  auto base_cp = summarize("baseline: cp -a of the tree (host)", "ms", cp_ms);
  rows.push_back(base_tar);
  rows.push_back(base_untar);
  rows.push_back(base_cp);
  rows.push_back(against(summarize("snapshot: pause of the running sandbox (frozen)", "ms", pause_ms), base_cp, "<= 50 ms"));
  rows.push_back(against(summarize("snapshot: whole call", "ms", snap_ms), base_cp));
  rows.push_back(against(summarize("snapshot: new sandbox from it to its first exec", "ms", first_exec_ms), base_untar,
                         "<= 20 ms, >= 100x faster"));
  rows.push_back(against(summarize("snapshot: fork of 4 (snapshot + 4 running sandboxes)", "ms", fork_ms), base_cp, "<= 60 ms"));
  rows.push_back(against(summarize("backup: the tree into the blob store (tar + zstd in the sandbox)", "ms", backup_ms), base_tar));
  rows.push_back(against(summarize("backup: restore of it into a new directory", "ms", unbackup_ms), base_untar));
  fs::remove_all(scratch + "/tree");
  fs::remove_all(scratch + "/untar");
  fs::remove_all(scratch + "/copy");
  fs::remove(scratch + "/tree.tar.zst");
}

void bench_journal(int events, int replay_events, std::vector<row>& rows) {
  char tmpl[] = "/tmp/warren-bench-journal-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  warren::error err;
  auto j = warren::storage::journal::open({dir + "/j", true}, err);
  if (!j) broken(err.message);
  auto record = warren::wire::encode_envelope({1, 1, false, warren::wire::exec_finished{1, 0, 0, false, false, 3, 10, 0, ""}});
  auto append_one = [&](std::uint64_t stream, std::uint64_t seq) {
    std::promise<warren::error> p;
    warren::storage::journal_batch b;
    b.appends.push_back({stream, seq, {record}});
    j->append(std::move(b), [&](const warren::error& e) { p.set_value(e); });
    auto e = p.get_future().get();
    if (e) broken("journal append failed: " + e.message);
  };

  std::vector<double> one_by_one, grouped;
  constexpr int streams = 1024;  // Sandboxes writing at once, each with one append in flight.
  std::uint64_t next_stream = 1;
  for (int rep = 0; rep < 3; ++rep) {
    // Baseline: one writer, one synced append after another.
    auto s = next_stream++;
    int serial = std::max(200, events / 20);
    auto t = clock_type::now();
    for (int i = 1; i <= serial; ++i) append_one(s, i);
    one_by_one.push_back(serial / (ms_since(t) / 1000));
    // Group commit: each stream appends its next event from the previous one's callback,
    // the way a sandbox actor appends after its last write was acknowledged.
    auto base = next_stream;
    next_stream += streams;
    int per = std::max(1, events / streams);
    std::atomic<int> left{streams * per};
    std::promise<void> all_done;
    std::function<void(std::uint64_t, std::uint64_t)> next = [&](std::uint64_t stream, std::uint64_t seq) {
      warren::storage::journal_batch b;
      b.appends.push_back({stream, seq, {record}});
      j->append(std::move(b), [&, stream, seq](const warren::error& e) {
        if (e) broken("journal append failed: " + e.message);
        if (--left == 0) all_done.set_value();
        if (static_cast<int>(seq) < per) next(stream, seq + 1);
      });
    };
    t = clock_type::now();
    for (int w = 0; w < streams; ++w) next(base + w, 1);
    all_done.get_future().get();
    grouped.push_back(streams * per / (ms_since(t) / 1000));
  }
  auto rb = summarize("baseline: synced appends one by one (1 writer)", "events/s", one_by_one, true);
  rows.push_back(rb);
  rows.push_back(against(summarize("journal: synced appends, 1024 sandboxes at once (group commit)", "events/s", grouped, true), rb, ">= 100k events/s"));

  // Replay: decode and apply a long stream.
  constexpr std::uint64_t stream = 1u << 30;
  for (int written = 0; written < replay_events;) {
    warren::storage::journal_batch b;
    warren::storage::stream_append a{stream, static_cast<std::uint64_t>(written) + 1, {}};
    for (int k = 0; k < 1000 && written < replay_events; ++k, ++written) a.records.push_back(record);
    b.appends.push_back(std::move(a));
    std::promise<void> p;
    j->append(std::move(b), [&](const warren::error&) { p.set_value(); });
    p.get_future().get();
  }
  std::vector<double> raw, replay;
  j->read(stream);  // Warm the block cache so that neither side pays for the first read.
  for (int rep = 0; rep < 3; ++rep) {
    auto t = clock_type::now();
    auto all = j->read(stream);
    raw.push_back(all.size() / (ms_since(t) / 1000));
    t = clock_type::now();
    all = j->read(stream);
    warren::actors::sandbox_record rec;
    for (auto& [seq, bytes] : all) {
      auto d = warren::wire::decode_envelope(bytes);
      if (!d.value) broken("replay decode failed: " + d.error);
      warren::actors::apply(rec, *d.value);
    }
    replay.push_back(all.size() / (ms_since(t) / 1000));
  }
  auto rr = summarize("baseline: reading the stream without decoding", "events/s", raw, true);
  rows.push_back(rr);
  rows.push_back(against(summarize("journal: replay (read + decode + apply), " + std::to_string(replay_events) + " events", "events/s", replay, true), rr, ">= 1M events/s"));
  j.reset();
  fs::remove_all(dir);
}

std::string fmt(double v) {
  char buf[32];
  if (v >= 1000) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  std::string warrend, out = "bench.json", only;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--warrend" && i + 1 < argc) warrend = argv[++i];
    else if (a == "--out" && i + 1 < argc) out = argv[++i];
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else {
      std::fprintf(stderr, "usage: warren_bench --warrend PATH [--quick] [--out FILE] "
                           "[--only latency|files|burst|density|preview|terminal|hibernation|snapshots|jail|journal]\n");
      return 2;
    }
  }
  if (warrend.empty()) broken("--warrend is required");
  const int n = quick ? 30 : 200;
  const int density = quick ? 500 : 2000;
  const int events = quick ? 20000 : 200000;
  const int replay = quick ? 200000 : 1000000;

  std::vector<row> rows;
  auto started = clock_type::now();
  auto http_port = free_loopback_port();
  // Terminals over WebSocket need the daemon's token.
  const std::string token = "warren-bench-terminal-token";
  char token_tmpl[] = "/tmp/warren-bench-token-XXXXXX";
  int token_fd = ::mkstemp(token_tmpl);
  if (token_fd < 0 || ::write(token_fd, token.data(), token.size()) != static_cast<ssize_t>(token.size())) broken("token file");
  ::close(token_fd);
  std::string token_file = token_tmpl;
  {
    daemon_under_test d(warrend, {"--http-listen", "127.0.0.1:" + std::to_string(http_port), "--token-file", token_file});
    auto io = kj::setupAsyncIo();
    client c(io, d.socket);
    auto want = [&](const char* part) { return only.empty() || only == part; };
    if (want("latency")) {
      std::fprintf(stderr, "warren_bench: latency (n=%d) ...\n", n);
      bench_latency(c, n, rows);
    }
    if (want("files")) {
      std::fprintf(stderr, "warren_bench: files ...\n");
      bench_files(c, d.dir, n, rows);
    }
    if (want("burst")) {
      std::fprintf(stderr, "warren_bench: burst ...\n");
      bench_burst(c, rows);
    }
    if (want("density")) {
      std::fprintf(stderr, "warren_bench: density (N=%d) ...\n", density);
      bench_density(c, d, density, rows);
    }
    if (want("preview")) {
      std::fprintf(stderr, "warren_bench: preview proxy ...\n");
      bench_preview(c, http_port, d.dir, n, rows);
    }
    if (want("terminal")) {
      std::fprintf(stderr, "warren_bench: terminal keystrokes (n=%d) ...\n", n * 5);
      bench_terminal(c, http_port, token, n * 5, rows);
    }
    if (want("snapshots")) {
      std::fprintf(stderr, "warren_bench: snapshots, forks and backups of a 178 MB tree ...\n");
      bench_snapshots(c, d.dir, quick ? 5 : 15, rows);
    }
    if (want("hibernation")) {
      std::fprintf(stderr, "warren_bench: hibernation ...\n");
      bench_hibernation(c, d, quick ? 15 : 60, quick ? 500 : 2000, rows);
    }
  }
  ::unlink(token_file.c_str());
  if (only.empty() || only == "jail") {
    std::fprintf(stderr, "warren_bench: jail layers (n=%d) ...\n", n);
    bench_jail(warrend, n, rows);
  }
  if (only.empty() || only == "journal") {
    std::fprintf(stderr, "warren_bench: journal ...\n");
    bench_journal(events, replay, rows);
  }

  std::printf("\n| figure | unit | p50 | p90 | p99 | n | baseline | ratio | goal |\n");
  std::printf("|---|---|---:|---:|---:|---:|---|---:|---|\n");
  for (auto& r : rows)
    std::printf("| %s | %s | %s | %s | %s | %zu | %s | %s | %s |\n", r.name.c_str(), r.unit.c_str(), fmt(r.p50).c_str(),
                fmt(r.p90).c_str(), fmt(r.p99).c_str(), r.n, r.baseline.empty() ? "-" : r.baseline.c_str(),
                r.baseline.empty() ? "-" : (fmt(r.ratio) + "x").c_str(), r.goal.empty() ? "" : r.goal.c_str());
  std::printf("Total run: %.0f s (%s).\n", ms_since(started) / 1000, quick ? "quick" : "full");

  std::ofstream json(out);
  json << "[\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    auto& r = rows[i];
    json << "  {\"name\": " << json_str(r.name) << ", \"unit\": " << json_str(r.unit) << ", \"p50\": " << r.p50
         << ", \"p90\": " << r.p90 << ", \"p99\": " << r.p99 << ", \"n\": " << r.n
         << ", \"baseline\": " << (r.baseline.empty() ? "null" : json_str(r.baseline))
         << ", \"ratio\": " << (r.baseline.empty() ? "null" : std::to_string(r.ratio))
         << ", \"higher_is_better\": " << (r.higher_is_better ? "true" : "false") << "}"
         << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  json << "]\n";
  std::fprintf(stderr, "warren_bench: wrote %s\n", out.c_str());
  return 0;
}
