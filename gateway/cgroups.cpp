#include "gateway/cgroups.hpp"

#include <fcntl.h>
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

error remove_dir(const std::string& dir) {
  if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return {};
  return make_error(errc::internal, "rmdir " + dir + ": " + std::strerror(errno));
}

}  // namespace

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

error cgroup_tree::prepare() {
  if (::mkdir(parent_.c_str(), 0755) < 0 && errno != EEXIST)
    return make_error(errc::internal, "mkdir " + parent_ + ": " + std::strerror(errno));
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

error cgroup_tree::create(std::uint64_t sandbox_id) {
  auto dir = path(sandbox_id);
  if (::mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST)
    return make_error(errc::start_failed, "mkdir " + dir + ": " + std::strerror(errno));
  return {};
}

bool cgroup_tree::kill_all(std::uint64_t sandbox_id) { return write_file(path(sandbox_id) + "/cgroup.kill", "1"); }

bool cgroup_tree::is_empty(std::uint64_t sandbox_id) const {
  auto dir = path(sandbox_id);
  struct stat st;
  if (::stat(dir.c_str(), &st) < 0) return true;
  return !populated(dir);
}

error cgroup_tree::remove(std::uint64_t sandbox_id) { return remove_dir(path(sandbox_id)); }

std::uint64_t cgroup_tree::cpu_usage_us(std::uint64_t sandbox_id) const {
  auto stat = read_file(path(sandbox_id) + "/cpu.stat");
  auto at = stat.find("usage_usec ");
  if (at == std::string::npos) return 0;
  return std::strtoull(stat.c_str() + at + 11, nullptr, 10);
}

void cgroup_tree::remove_parent() { ::rmdir(parent_.c_str()); }

}  // namespace warren::gateway
