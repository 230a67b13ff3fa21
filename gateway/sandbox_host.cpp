#include "gateway/sandbox_host.hpp"

#include "gateway/init_spawn.hpp"

#include <capnp/rpc-twoparty.h>
#include <kj/async-unix.h>
#include <kj/debug.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <cstring>
#include <unordered_map>
#include <vector>

namespace warren::gateway {

namespace {

struct task_error_handler final : kj::TaskSet::ErrorHandler {
  void taskFailed(kj::Exception&& e) override {
    spdlog::warn("event=host_task_failed reason=\"{}\"", e.getDescription().cStr());
  }
};
task_error_handler task_errors;

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  return "ended";
}

// Moves `fd` above the fds the child will dup2 into (3, 4), keeping CLOEXEC, so a dup2
// onto itself (which would keep CLOEXEC) cannot happen.
int high_fd(int fd) {
  int h = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  return h;
}

}  // namespace

struct sandbox_host::link {
  std::uint64_t sandbox_id = 0;
  std::string name;
  pid_t pid = 0;
  kj::Maybe<pid_t> pid_slot;  // Nulled by KJ when reaped.
  kj::Own<kj::AsyncIoStream> stream;
  kj::Own<capnp::TwoPartyClient> client;
  kj::Maybe<wire::Agent::Client> agent;  // Set once the init reported success.
  std::function<void(const std::string&)> exited;
  std::vector<std::function<void()>> stop_waiters;
  bool stopping = false;
  int netns_fd = -1;  // Opened on first use (preview proxy); closed with the link.
  ~link() {
    if (netns_fd >= 0) ::close(netns_fd);
  }
};

struct sandbox_host::state {
  std::unordered_map<std::uint64_t, kj::Own<link>> links;
  std::unordered_map<std::uint64_t, std::uint32_t> id_ranges;  // Sandbox id -> range index.
  std::vector<bool> range_used;
  kj::TaskSet tasks{task_errors};
};

sandbox_host::sandbox_host(kj::AsyncIoContext& io, inbox& box, cgroup_tree& cgroups, host_options options)
    : io_(io), box_(box), cgroups_(cgroups), options_(std::move(options)), st_(std::make_unique<state>()) {
  st_->range_used.assign(options_.uid_ranges, false);
}

bool sandbox_host::lend_id_range(std::uint64_t sandbox_id, std::uint32_t& uid_base) {
  auto n = st_->range_used.size();
  if (n == 0) return false;
  // Start at the sandbox's own index, so that a sandbox usually gets the same range back.
  for (std::size_t i = 0, k = sandbox_id % n; i < n; ++i, k = (k + 1) % n) {
    if (st_->range_used[k]) continue;
    st_->range_used[k] = true;
    st_->id_ranges[sandbox_id] = static_cast<std::uint32_t>(k);
    uid_base = options_.uid_base + static_cast<std::uint32_t>(k) * 65536u;
    return true;
  }
  return false;
}

void sandbox_host::return_id_range(std::uint64_t sandbox_id) {
  auto it = st_->id_ranges.find(sandbox_id);
  if (it == st_->id_ranges.end()) return;
  st_->range_used[it->second] = false;
  st_->id_ranges.erase(it);
}

std::size_t sandbox_host::running() const { return st_->links.size(); }

sandbox_host::~sandbox_host() {}

void sandbox_host::start(const actors::sandbox_spec& spec, std::function<void(const error&)> started,
                         std::function<void(const std::string&)> exited) {
  box_.post([this, spec, started = std::move(started), exited = std::move(exited)]() mutable {
    do_start(std::move(spec), std::move(started), std::move(exited));
  });
}

void sandbox_host::stop(std::uint64_t sandbox_id, std::function<void()> stopped) {
  box_.post([this, sandbox_id, stopped = std::move(stopped)]() mutable { do_stop(sandbox_id, std::move(stopped)); });
}

actors::sandbox_usage sandbox_host::resource_usage(std::uint64_t sandbox_id) {
  actors::sandbox_usage r;
  r.cpu_us = cgroups_.cpu_usage_us(sandbox_id);
  cgroups_.usage(sandbox_id, r.memory_bytes, r.memory_peak_bytes, r.pids);
  std::lock_guard lock(limits_mutex_);
  auto it = limits_.find(sandbox_id);
  if (it != limits_.end()) {
    r.memory_limit_bytes = it->second.memory_bytes;
    r.pids_limit = it->second.pids_max;
  }
  if (options_.disk) {
    r.disk_known = options_.disk->usage(sandbox_id, r.disk_bytes, r.disk_limit_bytes);
  }
  return r;
}

error sandbox_host::snapshot_files(std::uint64_t sandbox_id, const std::string& dir, const std::string& snapshot_dir,
                                   std::uint64_t& pause_us) {
  if (!options_.disk) return actors::snapshots_unavailable();
  pause_us = 0;
  // The snapshot is a btrfs commit, which first writes every dirty page of the pool: flush
  // them before freezing, so that the sandbox waits only for what it writes meanwhile.
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::syncfs(fd);
    ::close(fd);
  }
  // Frozen, so that the files are one moment of the sandbox (no half-written set of files).
  auto begin = std::chrono::steady_clock::now();
  bool running = false;
  if (auto e = cgroups_.freeze(sandbox_id, true, running)) return e;
  auto e = options_.disk->snapshot(dir, snapshot_dir, true);
  if (running) {
    bool existed = false;
    if (auto t = cgroups_.freeze(sandbox_id, false, existed))
      spdlog::error("event=thaw_failed sandbox_id={} reason=\"{}\"", sandbox_id, t.message);
    pause_us = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - begin).count());
  }
  return e;
}

error sandbox_host::clone_files(const std::string& snapshot_dir, const std::string& dir) {
  if (!options_.disk) return actors::snapshots_unavailable();
  return options_.disk->snapshot(snapshot_dir, dir, false);
}

error sandbox_host::remove_snapshot(const std::string& snapshot_dir) {
  if (!options_.disk) return {};
  if (snapshot_dir.find("/.import-") != std::string::npos) {
    // An import's staging directory: what btrfs receive made in it are subvolumes.
    std::error_code ec;
    for (auto& e : std::filesystem::directory_iterator(snapshot_dir, ec))
      if (auto r = options_.disk->remove(e.path().string())) return r;
    if (::rmdir(snapshot_dir.c_str()) < 0 && errno != ENOENT)
      return make_error(errc::internal, "cannot remove " + snapshot_dir + ": " + std::strerror(errno));
    return {};
  }
  return options_.disk->remove(snapshot_dir);
}

error sandbox_host::adopt_snapshot(const std::string& staging, const std::string& snapshot_dir) {
  if (!options_.disk) return actors::snapshots_unavailable();
  std::vector<std::string> made;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(staging, ec)) made.push_back(e.path().string());
  struct stat st {};
  // A subvolume's root directory has inode 256 (BTRFS_FIRST_FREE_OBJECTID).
  if (made.size() != 1 || ::lstat(made[0].c_str(), &st) < 0 || !S_ISDIR(st.st_mode) || st.st_ino != 256)
    return make_error(errc::invalid_argument, "the archive did not hold exactly one snapshot");
  // A read-only subvolume cannot move to another directory: a snapshot of it takes its
  // place (a commit, no copy), then the received one goes.
  if (auto e = options_.disk->snapshot(made[0], snapshot_dir, true)) return e;
  return remove_snapshot(staging);
}

namespace {
// The mark of a staged restore: a file at the root of the staged subvolume (beside upper/,
// never inside the sandbox's view).
constexpr const char* restore_mark = "/.warren-restore";
}  // namespace

error sandbox_host::stage_restore(const std::string& snapshot_dir, const std::string& dir, std::uint64_t restore_count) {
  if (!options_.disk) return actors::snapshots_unavailable();
  auto staged = dir + ".restore";
  if (auto e = options_.disk->remove(staged)) return e;
  if (auto e = options_.disk->snapshot(snapshot_dir, staged, false)) return e;
  auto mark = staged + restore_mark;
  int fd = ::open(mark.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  auto text = std::to_string(restore_count);
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) {
    options_.disk->remove(staged);
    return make_error(errc::internal, "cannot mark the staged restore " + staged + ": " + std::strerror(errno));
  }
  return {};
}

error sandbox_host::settle_restore(const std::string& dir, std::uint64_t restore_count) {
  if (!options_.disk) return {};
  auto staged = dir + ".restore", old = dir + ".old";
  if (::access(staged.c_str(), F_OK) == 0) {
    char buf[32] = {};
    int fd = ::open((staged + restore_mark).c_str(), O_RDONLY | O_CLOEXEC);
    auto n = fd >= 0 ? ::read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0) ::close(fd);
    if (n > 0 && std::strtoull(buf, nullptr, 10) == restore_count) {
      // Journaled: the staged copy becomes the sandbox's directory (two renames, then the
      // old files go).
      if (auto e = options_.disk->remove(old)) return e;
      if (::access(dir.c_str(), F_OK) == 0 && ::rename(dir.c_str(), old.c_str()) < 0)
        return make_error(errc::internal, "cannot move " + dir + " aside: " + std::strerror(errno));
      if (::rename(staged.c_str(), dir.c_str()) < 0)
        return make_error(errc::internal, "cannot put the restored files in place: " + std::string(std::strerror(errno)));
      ::unlink((dir + restore_mark).c_str());
    } else if (auto e = options_.disk->remove(staged)) {
      return e;  // A restore that never reached the journal.
    }
  }
  return options_.disk->remove(old);
}

error sandbox_host::update_limits(std::uint64_t sandbox_id, const actors::sandbox_limits& limits) {
  cgroup_limits own{limits.memory_bytes, limits.pids_max, limits.cpu_millis};
  auto disk = disk_limit(limits.disk_bytes);
  if (options_.disk) {
    std::uint64_t used = 0, old_limit = 0;
    if (options_.disk->usage(sandbox_id, used, old_limit) && disk && used > disk)
      return make_error(errc::invalid_argument, "the sandbox holds " + std::to_string(used) +
                                                    " bytes on disk, more than the new limit of " + std::to_string(disk));
  }
  if (auto e = cgroups_.update(sandbox_id, own)) return e;
  if (options_.disk)
    if (auto e = options_.disk->set_limit(sandbox_id, disk)) return e;
  std::lock_guard lock(limits_mutex_);
  limits_[sandbox_id] = cgroups_.effective(own);
  return {};
}

kj::Maybe<wire::Agent::Client> sandbox_host::agent(std::uint64_t sandbox_id) {
  auto it = st_->links.find(sandbox_id);
  if (it == st_->links.end() || it->second->stopping) return nullptr;
  return it->second->agent;
}

kj::Maybe<sandbox_host::net_target> sandbox_host::network(std::uint64_t sandbox_id) {
  auto it = st_->links.find(sandbox_id);
  if (it == st_->links.end() || it->second->stopping || it->second->agent == nullptr) return nullptr;
  auto& l = *it->second;
  if (l.netns_fd < 0) {
    auto path = "/proc/" + std::to_string(l.pid) + "/ns/net";
    l.netns_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (l.netns_fd < 0) {
      spdlog::warn("event=netns_open_failed sandbox={} reason=\"{}\"", l.name, std::strerror(errno));
      return nullptr;
    }
  }
  return net_target{l.netns_fd, l.pid};
}

void sandbox_host::do_start(actors::sandbox_spec spec, std::function<void(const error&)> started,
                            std::function<void(const std::string&)> exited) {
  auto fail = [&](const std::string& why) { started(make_error(errc::start_failed, "cannot start sandbox " + spec.name + ": " + why)); };
  if (st_->links.count(spec.sandbox_id)) return fail("its init is still running (stop it first)");
  std::uint32_t uid_base = 0;
  if (options_.user_namespace && !lend_id_range(spec.sandbox_id, uid_base))
    return fail("all " + std::to_string(options_.uid_ranges) +
                " user id ranges are in use by running sandboxes (raise --sandbox-uid-ranges)");
  // Until the init runs, any failure gives the id range back.
  bool spawned = false;
  auto give_back = kj::defer([&]() {
    if (!spawned) return_id_range(spec.sandbox_id);
  });
  std::vector<std::string> cgroup_dirs;
  auto limits = cgroups_.effective(cgroup_limits{spec.memory_bytes, spec.pids_max, spec.cpu_millis});
  {
    std::lock_guard lock(limits_mutex_);
    limits_[spec.sandbox_id] = limits;
  }
  auto disk = disk_limit(spec.disk_bytes);
  if (options_.disk) {
    // The quota first: the sandbox's first file is already counted. While the init mounts
    // the overlays it gets some room above the limit (overlayfs makes its work directory
    // then), so that a sandbox whose disk is full still starts, and its user can delete.
    constexpr std::uint64_t start_headroom = 16ull << 20;
    if (auto e = options_.disk->prepare(spec.sandbox_id, spec.dir, disk ? disk + start_headroom : 0))
      return fail(e.message);
  }
  if (auto e = cgroups_.create(spec.sandbox_id, limits, cgroup_dirs)) {
    cgroups_.remove(spec.sandbox_id);
    return fail(e.message);
  }

  int sv[2], status[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return fail(std::string("socketpair: ") + std::strerror(errno));
  if (::pipe2(status, O_CLOEXEC) < 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    return fail(std::string("pipe2: ") + std::strerror(errno));
  }
  int child_sock = high_fd(sv[1]), child_status = high_fd(status[1]);

  init_spawn_request req;
  req.path = options_.init_path;
  req.argv = {"warren-init", "--name", spec.name, "--sandbox-dir", spec.dir, "--base-dir", spec.base_dir};
  for (auto& dir : cgroup_dirs) {
    req.argv.push_back("--cgroup");
    req.argv.push_back(dir);
  }
  if (uid_base != 0) {
    req.argv.push_back("--uid-base");
    req.argv.push_back(std::to_string(uid_base));
  }
  if (!options_.seccomp) {
    req.argv.push_back("--seccomp");
    req.argv.push_back("off");
  }
  req.agent_fd = child_sock;
  req.status_fd = child_status;
  error spawn_error;
  pid_t pid = spawn_init(req, spawn_error);
  ::close(child_sock);
  ::close(child_status);
  if (pid < 0) {
    ::close(sv[0]);
    ::close(status[0]);
    return fail(spawn_error.message);
  }
  spawned = true;  // From here on, the init's exit gives the range back (on_exit).

  auto l = kj::heap<link>();
  l->sandbox_id = spec.sandbox_id;
  l->name = spec.name;
  l->pid = pid;
  l->pid_slot = pid;
  l->exited = std::move(exited);
  auto exit_promise = io_.unixEventPort.onChildExit(l->pid_slot);  // Right after spawn (KJ's rule).
  l->stream = io_.lowLevelProvider->wrapSocketFd(sv[0], kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP |
                                                             kj::LowLevelAsyncIoProvider::ALREADY_CLOEXEC);
  l->client = kj::heap<capnp::TwoPartyClient>(*l->stream);
  auto agent = l->client->bootstrap().castAs<wire::Agent>();
  auto id = spec.sandbox_id;
  st_->links.emplace(id, kj::mv(l));
  spdlog::debug("event=init_spawned sandbox={} pid={} uid_base={}", spec.name, pid, uid_base);

  st_->tasks.add(exit_promise.then([this, id](int st) { on_exit(id, st); }));

  // The init reports setup errors as one line on the status pipe and closes it on success;
  // a ping then proves the agent link works.
  auto status_in = io_.lowLevelProvider->wrapInputFd(status[0], kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP |
                                                                      kj::LowLevelAsyncIoProvider::ALREADY_CLOEXEC);
  auto& status_ref = *status_in;
  st_->tasks.add(status_ref.readAllText(4096)
                 .attach(kj::mv(status_in))
                 .then([this, id, agent](kj::String msg) mutable -> kj::Promise<void> {
                   if (msg.size() > 0) {
                     std::string text(msg.cStr());
                     while (!text.empty() && text.back() == '\n') text.pop_back();
                     return kj::Exception(kj::Exception::Type::FAILED, __FILE__, __LINE__, kj::str(text.c_str()));
                   }
                   return agent.pingRequest().send().ignoreResult();
                 })
                 .then(
                     [this, id, agent, started, disk, spawned = std::chrono::steady_clock::now()]() mutable {
                       auto it = st_->links.find(id);
                       if (it == st_->links.end() || it->second->stopping) {
                         started(make_error(errc::start_failed, "the sandbox's init exited during start-up"));
                         return;
                       }
                       if (options_.disk) {
                         if (auto e = options_.disk->set_limit(id, disk)) {
                           started(make_error(errc::start_failed, e.message));
                           do_stop(id, [] {});
                           return;
                         }
                       }
                       it->second->agent = agent;
                       spdlog::debug("event=init_ready sandbox={} start_us={}", it->second->name,
                                     std::chrono::duration_cast<std::chrono::microseconds>(
                                         std::chrono::steady_clock::now() - spawned).count());
                       auto name = it->second->name;
                       started({});
                       if (on_agent_ready) on_agent_ready(id, name, agent);
                     },
                     [this, id, name = spec.name, started](kj::Exception&& e) {
                       std::string why = e.getDescription().cStr();
                       spdlog::warn("event=init_failed sandbox={} reason=\"{}\"", name, why);
                       started(make_error(errc::start_failed, "cannot start sandbox " + name + ": " + why));
                       do_stop(id, [] {});
                     }));
}

void sandbox_host::do_stop(std::uint64_t sandbox_id, std::function<void()> stopped) {
  auto it = st_->links.find(sandbox_id);
  if (it == st_->links.end()) {
    // Not running; make sure no cgroup is left (e.g. a start that failed early).
    st_->tasks.add(remove_cgroup(sandbox_id, 500).then([stopped = std::move(stopped)]() { stopped(); }));
    return;
  }
  auto& l = *it->second;
  l.stop_waiters.push_back(std::move(stopped));
  if (l.stopping) return;
  l.stopping = true;
  l.agent = nullptr;
  // cgroup.kill reaches every process of the sandbox at once; killing stage 1 alone would
  // also end it (PDEATHSIG of PID 1 tears down the pid namespace), and is the fallback.
  if (!cgroups_.kill_all(sandbox_id)) {
    KJ_IF_MAYBE(pid, l.pid_slot) { ::kill(*pid, SIGKILL); }
  }
}

void sandbox_host::on_exit(std::uint64_t sandbox_id, int status) {
  auto it = st_->links.find(sandbox_id);
  if (it == st_->links.end()) return;
  auto l = kj::mv(it->second);
  st_->links.erase(it);
  {
    std::lock_guard lock(limits_mutex_);
    limits_.erase(sandbox_id);
  }
  auto why = describe_status(status);
  if (!l->stopping) spdlog::warn("event=init_exited sandbox={} reason=\"{}\"", l->name, why);
  // Stage 1 is gone, so PID 1 got SIGKILL; the rest of the pid namespace dies with it. The
  // cgroup becomes removable once the kernel has finished tearing it down.
  if (!l->stopping) cgroups_.kill_all(sandbox_id);
  auto waiters = std::move(l->stop_waiters);
  auto exited = std::move(l->exited);
  st_->tasks.add(remove_cgroup(sandbox_id, 500).then([this, sandbox_id, waiters = std::move(waiters), exited = std::move(exited), why]() {
    // Every process of the sandbox is gone: its ids can go to another sandbox.
    return_id_range(sandbox_id);
    for (auto& w : waiters) w();
    if (exited) exited(why);
  }));
  // The link (client, stream) is destroyed here, after the init is gone.
}

kj::Promise<void> sandbox_host::remove_cgroup(std::uint64_t sandbox_id, int attempts_left) {
  if (cgroups_.is_empty(sandbox_id)) {
    if (!cgroups_.remove(sandbox_id)) return kj::READY_NOW;
  } else {
    cgroups_.kill_all(sandbox_id);
  }
  if (attempts_left == 0) {
    spdlog::error("event=cgroup_left sandbox_id={} path={}", sandbox_id, cgroups_.path(sandbox_id));
    return kj::READY_NOW;
  }
  return io_.provider->getTimer().afterDelay(10 * kj::MILLISECONDS).then([this, sandbox_id, attempts_left]() {
    return remove_cgroup(sandbox_id, attempts_left - 1);
  });
}

kj::Promise<void> sandbox_host::stop_all() {
  if (st_->links.empty()) return kj::READY_NOW;
  auto paf = kj::newPromiseAndFulfiller<void>();
  auto left = std::make_shared<std::size_t>(st_->links.size());
  auto fulfiller = std::make_shared<kj::Own<kj::PromiseFulfiller<void>>>(kj::mv(paf.fulfiller));
  std::vector<std::uint64_t> ids;
  for (auto& [id, l] : st_->links) ids.push_back(id);
  for (auto id : ids)
    do_stop(id, [left, fulfiller]() {
      if (--*left == 0) (*fulfiller)->fulfill();
    });
  return kj::mv(paf.promise);
}

}  // namespace warren::gateway
