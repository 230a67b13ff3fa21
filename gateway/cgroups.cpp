#include "gateway/cgroups.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace warren::gateway {

namespace {

bool write_file(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
  ::close(fd);
  return ok;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool populated(const std::string& dir) {
  auto events = read_file(dir + "/cgroup.events");
  if (events.empty()) return !read_file(dir + "/cgroup.procs").empty();
  return events.find("populated 1") != std::string::npos;
}

// Removes a cgroup and the ones below it (a sandbox's init makes one per exec), deepest
// first; a cgroup's files go with its directory.
error remove_dir(const std::string& dir) {
  std::error_code ec;
  for (auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.is_directory(ec) && !entry.is_symlink(ec))
      if (auto e = remove_dir(entry.path().string())) return e;
  if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return {};
  return make_error(errc::internal, "rmdir " + dir + ": " + std::strerror(errno));
}

}  // namespace

// Mount points of cgroup v1 hierarchies by controller ("memory" -> /sys/fs/cgroup/memory).
std::vector<std::pair<std::string, std::string>> find_cgroup1_mounts() {
  std::vector<std::pair<std::string, std::string>> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype, source, options;
    tail >> fstype >> source >> options;
    if (fstype != "cgroup") continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, devs, root, mount_point;
    head >> id >> parent >> devs >> root >> mount_point;
    std::istringstream opts(options);
    std::string opt;
    while (std::getline(opts, opt, ','))
      if (opt == "memory" || opt == "pids" || opt == "cpu") out.emplace_back(opt, mount_point);
  }
  return out;
}

std::optional<std::string> find_cgroup2_root() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  std::optional<std::string> found;
  while (std::getline(in, line)) {
    // "... mount_point options - fstype source super_options"
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype;
    tail >> fstype;
    if (fstype != "cgroup2") continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, devs, root, mount_point;
    head >> id >> parent >> devs >> root >> mount_point;
    // Prefer /sys/fs/cgroup (pure v2) over a hybrid's /sys/fs/cgroup/unified.
    if (!found || mount_point == "/sys/fs/cgroup") found = mount_point;
  }
  return found;
}

cgroup_tree::cgroup_tree(std::string v2_root, std::string name, cgroup_limits limits)
    : parent_(v2_root + "/" + name), limits_(limits) {
  auto available = read_file(v2_root + "/cgroup.controllers");
  auto has = [&](const char* c) { return (" " + available + " ").find(std::string(" ") + c) != std::string::npos; };
  v2_limits_ = has("memory") && has("pids");
  if (!v2_limits_)
    for (auto& [controller, mount] : find_cgroup1_mounts()) v1_parents_.emplace_back(controller, mount + "/" + name);
}

const char* cgroup_tree::limits_mode() const { return v2_limits_ ? "cgroup2" : v1_parents_.empty() ? "none" : "cgroup1"; }

namespace {

// Kills what is left in a stale cgroup directory and removes it (v1: kill its tasks).
void remove_stale(const std::string& dir) {
  if (!write_file(dir + "/cgroup.kill", "1")) {
    std::istringstream procs(read_file(dir + "/cgroup.procs"));
    pid_t pid;
    while (procs >> pid) ::kill(pid, SIGKILL);
  }
  for (int i = 0; i < 200 && populated(dir); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ::rmdir(dir.c_str());
}

}  // namespace

error cgroup_tree::prepare() {
  if (v2_limits_) {
    // Delegate the controllers down to the sandboxes' cgroups; a controller the kernel lacks
    // is simply not enabled (its limit then does not apply).
    auto root = parent_.substr(0, parent_.rfind('/'));
    for (auto c : {"+memory", "+pids", "+cpu"}) write_file(root + "/cgroup.subtree_control", c);
  }
  if (::mkdir(parent_.c_str(), 0755) < 0 && errno != EEXIST)
    return make_error(errc::internal, "mkdir " + parent_ + ": " + std::strerror(errno));
  if (v2_limits_)
    for (auto c : {"+memory", "+pids", "+cpu"}) write_file(parent_ + "/cgroup.subtree_control", c);
  for (auto& [controller, dir] : v1_parents_) {
    if (::mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST)
      return make_error(errc::internal, "mkdir " + dir + ": " + std::strerror(errno));
    std::error_code ec;
    for (auto& entry : std::filesystem::directory_iterator(dir, ec))
      if (entry.is_directory() && entry.path().filename().string().rfind("sb-", 0) == 0) remove_stale(entry.path());
  }
  // Leftovers of a daemon that was killed: its sandboxes died with it (PDEATHSIG), but
  // their cgroup directories remain.
  std::error_code ec;
  for (auto& entry : std::filesystem::directory_iterator(parent_, ec)) {
    auto name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind("sb-", 0) != 0) continue;
    auto dir = entry.path().string();
    write_file(dir + "/cgroup.kill", "1");
    for (int i = 0; i < 200 && populated(dir); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (auto e = remove_dir(dir)) return e;
  }
  return {};
}

error cgroup_tree::update(std::uint64_t sandbox_id, cgroup_limits own) {
  auto l = effective(own);
  auto set = [&](const std::string& file, const std::string& value, const char* what) -> error {
    if (write_file(file, value)) return {};
    int e = errno;
    if (e == ENOENT)
      return make_error(errc::busy, std::string("the ") + what + " limit can only be added when the sandbox starts; "
                                                                  "hibernate it (warren sleep) and it applies on wake");
    return make_error(errc::invalid_argument, std::string("the kernel refused the new ") + what + " limit (" +
                                                  std::strerror(e) + (e == EBUSY ? ": it uses more than that now" : "") + ")");
  };
  auto dir = path(sandbox_id);
  auto leaf = "/sb-" + std::to_string(sandbox_id);
  if (v2_limits_) {
    if (auto e = set(dir + "/memory.max", l.memory_bytes ? std::to_string(l.memory_bytes) : "max", "memory")) return e;
    if (auto e = set(dir + "/pids.max", l.pids_max ? std::to_string(l.pids_max) : "max", "process")) return e;
    set(dir + "/cpu.max", l.cpu_millis ? std::to_string(l.cpu_millis * 100) + " 100000" : "max 100000", "CPU");
    return {};
  }
  for (auto& [controller, parent] : v1_parents_) {
    auto d = parent + leaf;
    if (controller == "memory" && (l.memory_bytes || ::access(d.c_str(), F_OK) == 0)) {
      if (auto e = set(d + "/memory.limit_in_bytes", l.memory_bytes ? std::to_string(l.memory_bytes) : "-1", "memory"))
        return e;
    } else if (controller == "pids" && (l.pids_max || ::access(d.c_str(), F_OK) == 0)) {
      if (auto e = set(d + "/pids.max", l.pids_max ? std::to_string(l.pids_max) : "max", "process")) return e;
    } else if (controller == "cpu" && (l.cpu_millis || ::access(d.c_str(), F_OK) == 0)) {
      if (auto e = set(d + "/cpu.cfs_quota_us", l.cpu_millis ? std::to_string(l.cpu_millis * 100) : "-1", "CPU")) return e;
    }
  }
  return {};
}

cgroup_limits cgroup_tree::effective(cgroup_limits own) const {
  if (!own.memory_bytes) own.memory_bytes = limits_.memory_bytes;
  if (!own.pids_max) own.pids_max = limits_.pids_max;
  if (!own.cpu_millis) own.cpu_millis = limits_.cpu_millis;
  return own;
}

error cgroup_tree::create(std::uint64_t sandbox_id, cgroup_limits own, std::vector<std::string>& join) {
  auto leaf = "/sb-" + std::to_string(sandbox_id);
  auto make = [&](const std::string& dir) -> error {
    if (::mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST)
      return make_error(errc::start_failed, "mkdir " + dir + ": " + std::strerror(errno));
    join.push_back(dir);
    return {};
  };
  auto set = [&](const std::string& file, const std::string& value) -> error {
    if (write_file(file, value)) return {};
    return make_error(errc::start_failed, "cannot set " + file + " to " + value + ": " + std::strerror(errno));
  };
  auto dir = path(sandbox_id);
  if (auto e = make(dir)) return e;
  auto l = effective(own);
  if (v2_limits_) {
    if (l.memory_bytes)
      if (auto e = set(dir + "/memory.max", std::to_string(l.memory_bytes))) return e;
    if (l.pids_max)
      if (auto e = set(dir + "/pids.max", std::to_string(l.pids_max))) return e;
    if (l.cpu_millis) set(dir + "/cpu.max", std::to_string(l.cpu_millis * 100) + " 100000");  // Optional controller.
    return {};
  }
  for (auto& [controller, parent] : v1_parents_) {
    auto d = parent + leaf;
    if (controller == "memory" && l.memory_bytes) {
      if (auto e = make(d)) return e;
      if (auto e = set(d + "/memory.limit_in_bytes", std::to_string(l.memory_bytes))) return e;
    } else if (controller == "pids" && l.pids_max) {
      if (auto e = make(d)) return e;
      if (auto e = set(d + "/pids.max", std::to_string(l.pids_max))) return e;
    } else if (controller == "cpu" && l.cpu_millis) {
      if (auto e = make(d)) return e;
      set(d + "/cpu.cfs_period_us", "100000");
      if (auto e = set(d + "/cpu.cfs_quota_us", std::to_string(l.cpu_millis * 100))) return e;
    }
  }
  return {};
}

bool cgroup_tree::kill_all(std::uint64_t sandbox_id) { return write_file(path(sandbox_id) + "/cgroup.kill", "1"); }

error cgroup_tree::freeze(std::uint64_t sandbox_id, bool frozen, bool& existed) {
  auto dir = path(sandbox_id);
  existed = ::access(dir.c_str(), F_OK) == 0;
  if (!existed) return {};
  if (!write_file(dir + "/cgroup.freeze", frozen ? "1" : "0"))
    return make_error(errc::internal, std::string("cannot ") + (frozen ? "freeze" : "thaw") + " " + dir);
  if (!frozen) return {};
  // Freezing is asynchronous: cgroup.events says "frozen 1" once every task stopped.
  for (int i = 0; i < 20000; ++i) {
    auto events = read_file(dir + "/cgroup.events");
    if (events.find("frozen 1") != std::string::npos) return {};
    ::usleep(50);
  }
  write_file(dir + "/cgroup.freeze", "0");
  return make_error(errc::timeout, "the sandbox's processes did not freeze within a second");
}

bool cgroup_tree::is_empty(std::uint64_t sandbox_id) const {
  auto dir = path(sandbox_id);
  struct stat st;
  if (::stat(dir.c_str(), &st) < 0) return true;
  return !populated(dir);
}

error cgroup_tree::remove(std::uint64_t sandbox_id) {
  // The v1 hierarchies can lag behind cgroup2 by a moment (a pids cgroup counts its tasks
  // until they are fully released): report EBUSY so that the caller retries.
  auto leaf = "/sb-" + std::to_string(sandbox_id);
  error first;
  for (auto& [controller, parent] : v1_parents_)
    if (auto e = remove_dir(parent + leaf); e && !first) first = e;
  if (auto e = remove_dir(path(sandbox_id)); e && !first) first = e;
  return first;
}

std::uint64_t cgroup_tree::cpu_usage_us(std::uint64_t sandbox_id) const {
  auto stat = read_file(path(sandbox_id) + "/cpu.stat");
  auto at = stat.find("usage_usec ");
  if (at == std::string::npos) return 0;
  return std::strtoull(stat.c_str() + at + 11, nullptr, 10);
}

void cgroup_tree::usage(std::uint64_t sandbox_id, std::uint64_t& memory, std::uint64_t& memory_peak,
                        std::uint64_t& pids) const {
  auto number = [](const std::string& file) { return std::strtoull(read_file(file).c_str(), nullptr, 10); };
  auto leaf = "/sb-" + std::to_string(sandbox_id);
  memory = memory_peak = pids = 0;
  if (v2_limits_) {
    memory = number(path(sandbox_id) + "/memory.current");
    memory_peak = number(path(sandbox_id) + "/memory.peak");
    pids = number(path(sandbox_id) + "/pids.current");
    return;
  }
  for (auto& [controller, parent] : v1_parents_) {
    if (controller == "memory") {
      memory = number(parent + leaf + "/memory.usage_in_bytes");
      memory_peak = number(parent + leaf + "/memory.max_usage_in_bytes");
    } else if (controller == "pids") {
      pids = number(parent + leaf + "/pids.current");
    }
  }
  if (pids == 0) {  // No pids controller: count the cgroup's threads.
    std::istringstream threads(read_file(path(sandbox_id) + "/cgroup.threads"));
    std::string line;
    while (std::getline(threads, line)) ++pids;
  }
}

std::uint64_t cgroup_tree::oom_kills(std::uint64_t sandbox_id) const {
  auto field = [](const std::string& text, const std::string& key) -> std::uint64_t {
    auto at = text.find(key + " ");
    return at == std::string::npos ? 0 : std::strtoull(text.c_str() + at + key.size() + 1, nullptr, 10);
  };
  if (v2_limits_) return field(read_file(path(sandbox_id) + "/memory.events"), "oom_kill");
  for (auto& [controller, parent] : v1_parents_)
    if (controller == "memory")
      return field(read_file(parent + "/sb-" + std::to_string(sandbox_id) + "/memory.oom_control"), "oom_kill");
  return 0;
}

void cgroup_tree::remove_parent() {
  for (auto& [controller, parent] : v1_parents_) ::rmdir(parent.c_str());
  ::rmdir(parent_.c_str());
}

}  // namespace warren::gateway
