#include "storage/disk_pool.hpp"

#include "storage/layout.hpp"

#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/loop.h>
#include <sched.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/quota.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#ifndef PRJQUOTA
#define PRJQUOTA 2
#endif

extern char** environ;

namespace warren::storage {
namespace {

namespace fs = std::filesystem;

error sys_error(const std::string& what) { return make_error(errc::internal, what + ": " + std::strerror(errno)); }

// Runs a program to completion; its output (both streams) comes back in `output`.
int run_program(const std::vector<std::string>& argv, std::string& output) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) < 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    output = std::string("cannot run ") + argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  char buf[4096];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0 && output.size() < 16384) output.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Loop devices whose backing file is `image` (a daemon killed a moment ago may still hold
// one while its sandboxes die); mounting the image twice would corrupt it.
bool image_attached(const std::string& image) {
  std::error_code ec;
  for (auto& entry : fs::directory_iterator("/sys/block", ec)) {
    auto name = entry.path().filename().string();
    if (name.rfind("loop", 0) != 0) continue;
    std::ifstream in(entry.path() / "loop" / "backing_file");
    std::string backing;
    if (std::getline(in, backing) && backing == image) return true;
  }
  return false;
}

error make_image(const std::string& image, std::uint64_t size_bytes) {
  if (size_bytes < (512ull << 20))
    return make_error(errc::invalid_argument, "the disk pool must be at least 512M, got " + std::to_string(size_bytes) + " bytes");
  int fd = ::open(image.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return sys_error("cannot create the disk pool image " + image);
  bool sized = ::ftruncate(fd, static_cast<off_t>(size_bytes)) == 0;  // Sparse: costs nothing yet.
  ::close(fd);
  if (!sized) {
    auto e = sys_error("cannot size the disk pool image " + image);
    ::unlink(image.c_str());
    return e;
  }
  // One copy of metadata: the image is one file on one disk, a second copy protects nothing.
  std::string output;
  int rc = run_program({"mkfs.btrfs", "-q", "-f", "-m", "single", "-d", "single", "-L", "warren-pool", image}, output);
  if (rc != 0) {
    ::unlink(image.c_str());
    while (!output.empty() && output.back() == '\n') output.pop_back();
    return make_error(errc::internal, "mkfs.btrfs of the disk pool failed (is btrfs-progs installed?): " + output);
  }
  return {};
}

// Attaches the image to a free loop device (autoclear: it detaches when unmounted).
error attach_loop(const std::string& image, int& loop_fd, std::string& device) {
  int image_fd = ::open(image.c_str(), O_RDWR | O_CLOEXEC);
  if (image_fd < 0) return sys_error("cannot open the disk pool image " + image);
  int ctl = ::open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (ctl < 0) {
    auto e = sys_error("cannot open /dev/loop-control (the loop module is needed for disk limits)");
    ::close(image_fd);
    return e;
  }
  error result = make_error(errc::internal, "no free loop device for the disk pool");
  bool direct_io = true;
  for (int attempt = 0; attempt < 20; ++attempt) {
    int n = ::ioctl(ctl, LOOP_CTL_GET_FREE);
    if (n < 0) {
      result = sys_error("LOOP_CTL_GET_FREE");
      break;
    }
    device = "/dev/loop" + std::to_string(n);
    int fd = ::open(device.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      result = sys_error("cannot open " + device);
      break;
    }
    loop_config config{};
    config.fd = static_cast<std::uint32_t>(image_fd);
    config.block_size = 4096;  // Page-sized I/O to the image (512 costs direct I/O more requests).
    // Direct I/O keeps the image's pages out of the page cache (the filesystem above
    // caches them already).
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR | (direct_io ? LO_FLAGS_DIRECT_IO : 0);
    std::strncpy(reinterpret_cast<char*>(config.info.lo_file_name), image.c_str(), LO_NAME_SIZE - 1);
    if (::ioctl(fd, LOOP_CONFIGURE, &config) == 0) {
      loop_fd = fd;
      result = {};
      break;
    }
    int err = errno;
    ::close(fd);
    if (err == EINVAL && direct_io) {
      direct_io = false;  // The image's filesystem cannot do direct I/O: cached it is.
      continue;
    }
    if (err != EBUSY) {  // EBUSY: someone took that device first; try the next one.
      errno = err;
      result = sys_error("LOOP_CONFIGURE " + device);
      break;
    }
  }
  ::close(ctl);
  ::close(image_fd);
  return result;
}

// A subvolume's id (its tree), from any fd inside it.
std::optional<std::uint64_t> subvolume_id(int fd) {
  btrfs_ioctl_ino_lookup_args args{};
  args.objectid = BTRFS_FIRST_FREE_OBJECTID;
  if (::ioctl(fd, BTRFS_IOC_INO_LOOKUP, &args) < 0) return std::nullopt;
  return args.treeid;
}

bool is_subvolume_root(const std::string& dir) {
  struct stat st {};
  return ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_ino == BTRFS_FIRST_FREE_OBJECTID;
}

error create_subvolume(int parent_fd, const std::string& name) {
  btrfs_ioctl_vol_args args{};
  if (name.size() >= sizeof args.name) return make_error(errc::internal, "subvolume name too long: " + name);
  std::memcpy(args.name, name.c_str(), name.size());
  if (::ioctl(parent_fd, BTRFS_IOC_SUBVOL_CREATE, &args) < 0) return sys_error("cannot create subvolume " + name);
  return {};
}

std::mutex subvolume_mutex;

}  // namespace

error enter_private_mount_namespace() {
  if (::unshare(CLONE_NEWNS) < 0) return sys_error("unshare(CLONE_NEWNS) for the daemon's mounts");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) < 0) return sys_error("mount --make-rslave /");
  return {};
}

std::uint64_t default_pool_size(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) < 0) return 0;
  return static_cast<std::uint64_t>(static_cast<double>(st.f_bavail) * st.f_frsize * 0.9);
}

std::unique_ptr<disk_pool> disk_pool::open(const std::string& image, const std::string& mount_dir,
                                           std::uint64_t size_bytes, error& err) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (image_attached(image)) {
    if (std::chrono::steady_clock::now() > deadline) {
      err = make_error(errc::internal, "the disk pool image " + image +
                                           " is still attached to a loop device (another warrend, or one that "
                                           "was killed and whose sandboxes have not exited yet)");
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  struct stat st {};
  if (::stat(image.c_str(), &st) < 0) {
    if (errno != ENOENT) {
      err = sys_error("cannot stat " + image);
      return nullptr;
    }
    if ((err = make_image(image, size_bytes))) return nullptr;
    ::stat(image.c_str(), &st);
    spdlog::info("event=disk_pool_created image={} size_bytes={}", image, st.st_size);
  }
  std::unique_ptr<disk_pool> pool(new disk_pool());
  pool->mount_dir_ = mount_dir;
  pool->size_bytes_ = static_cast<std::uint64_t>(st.st_size);
  int loop_fd = -1;
  if ((err = attach_loop(image, loop_fd, pool->device_))) return nullptr;
  // Inside the pool nothing is setuid or a device for the host.
  // nodatacow: sandbox files are overwritten in place, without data checksums (like ext4's):
  // 15-30% more synced write throughput here; snapshots still copy on write.
  int rc = ::mount(pool->device_.c_str(), mount_dir.c_str(), "btrfs", MS_NOSUID | MS_NODEV | MS_NOATIME, "nodatacow");
  int mount_errno = errno;
  ::close(loop_fd);  // The mount holds the device now (or, if it failed, autoclear frees it).
  if (rc < 0) {
    errno = mount_errno;
    err = sys_error("cannot mount the disk pool " + image + " at " + mount_dir + " (does the kernel have btrfs?)");
    return nullptr;
  }
  pool->mounted_ = true;
  ::chmod(mount_dir.c_str(), 0700);
  int root = ::open(mount_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  btrfs_ioctl_quota_ctl_args quota{};
  quota.cmd = BTRFS_QUOTA_CTL_ENABLE;  // Already on: a no-op.
  bool quota_on = root >= 0 && ::ioctl(root, BTRFS_IOC_QUOTA_CTL, &quota) == 0;
  int quota_errno = errno;
  btrfs_ioctl_fs_info_args info{};
  bool have_info = root >= 0 && ::ioctl(root, BTRFS_IOC_FS_INFO, &info) == 0;
  if (root >= 0) ::close(root);
  if (!quota_on) {
    errno = quota_errno;
    err = sys_error("cannot enable quota groups on the disk pool");
    return nullptr;
  }
  if (have_info) {
    char uuid[37];
    const auto* u = info.fsid;
    std::snprintf(uuid, sizeof uuid, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                  u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    pool->sysfs_qgroups_ = std::string("/sys/fs/btrfs/") + uuid + "/qgroups";
  }
  return pool;
}

disk_pool::~disk_pool() {
  if (mounted_ && ::umount2(mount_dir_.c_str(), MNT_DETACH) < 0)
    spdlog::warn("event=disk_pool_umount_failed dir={} errno={}", mount_dir_, errno);
}

error disk_pool::snapshot(const std::string& src, const std::string& dst, bool read_only) {
  auto slash = dst.rfind('/');
  if (slash == std::string::npos || slash == 0) return make_error(errc::internal, "not an absolute path: " + dst);
  auto parent_dir = dst.substr(0, slash), name = dst.substr(slash + 1);
  if (::mkdir(parent_dir.c_str(), 0700) < 0 && errno != EEXIST) return sys_error("cannot create " + parent_dir);
  if (!is_subvolume_root(src)) return make_error(errc::internal, src + " is not a subvolume of the disk pool");
  int source = ::open(src.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (source < 0) return sys_error("cannot open " + src);
  int parent = ::open(parent_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (parent < 0) {
    ::close(source);
    return sys_error("cannot open " + parent_dir);
  }
  btrfs_ioctl_vol_args_v2 args{};
  args.fd = source;
  if (read_only) args.flags = BTRFS_SUBVOL_RDONLY;
  error e;
  if (name.size() >= sizeof args.name) e = make_error(errc::internal, "subvolume name too long: " + name);
  std::memcpy(args.name, name.c_str(), std::min(name.size(), sizeof args.name - 1));
  if (!e && ::ioctl(parent, BTRFS_IOC_SNAP_CREATE_V2, &args) < 0) e = sys_error("cannot snapshot " + src + " as " + dst);
  ::close(parent);
  ::close(source);
  return e;
}

error disk_pool::remove_subvolume(const std::string& dir) {
  auto slash = dir.rfind('/');
  if (slash == std::string::npos || slash == 0) return make_error(errc::internal, "not an absolute path: " + dir);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) < 0) return errno == ENOENT ? error{} : sys_error("cannot stat " + dir);
  if (!is_subvolume_root(dir)) return remove_tree(dir);
  int parent = ::open(dir.substr(0, slash).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (parent < 0) return sys_error("cannot open " + dir.substr(0, slash));
  btrfs_ioctl_vol_args args{};
  auto name = dir.substr(slash + 1);
  std::memcpy(args.name, name.c_str(), std::min(name.size(), sizeof args.name - 1));
  error e;
  if (::ioctl(parent, BTRFS_IOC_SNAP_DESTROY, &args) < 0) e = sys_error("cannot delete subvolume " + dir);
  ::close(parent);
  return e;
}

error disk_pool::apply(std::uint64_t sandbox_id, const std::string& dir, std::uint64_t limit_bytes) {
  std::lock_guard lock(subvolume_mutex);
  if (!is_subvolume_root(dir)) {
    auto slash = dir.rfind('/');
    int parent = ::open(dir.substr(0, slash).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (parent < 0) return sys_error("cannot open " + dir.substr(0, slash));
    auto name = dir.substr(slash + 1);
    struct stat st {};
    bool plain_dir = ::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    error e;
    if (!plain_dir) {
      e = create_subvolume(parent, name);
    } else {
      // A directory made before the pool had it: its entries move into a new subvolume
      // (renames within one filesystem: no copy).
      auto fresh = name + ".subvolume";
      e = create_subvolume(parent, fresh);
      std::error_code ec;
      for (auto& entry : fs::directory_iterator(dir, ec)) {
        if (e) break;
        if (::renameat(parent, (name + "/" + entry.path().filename().string()).c_str(), parent,
                       (fresh + "/" + entry.path().filename().string()).c_str()) < 0)
          e = sys_error("cannot move " + entry.path().string() + " into its subvolume");
      }
      if (!e && ::unlinkat(parent, name.c_str(), AT_REMOVEDIR) < 0) e = sys_error("cannot remove " + dir);
      if (!e && ::renameat(parent, fresh.c_str(), parent, name.c_str()) < 0) e = sys_error("cannot rename to " + dir);
    }
    ::close(parent);
    if (e) return e;
  }
  (void)sandbox_id;
  return set_limit_of(dir, limit_bytes);
}

error disk_pool::set_limit(std::uint64_t sandbox_id, std::uint64_t limit_bytes) {
  return set_limit_of(mount_dir_ + "/" + std::to_string(sandbox_id), limit_bytes);
}

error disk_pool::set_limit_of(const std::string& dir, std::uint64_t limit_bytes) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return sys_error("cannot open " + dir);
  btrfs_ioctl_qgroup_limit_args args{};
  args.qgroupid = 0;  // The subvolume's own quota group.
  args.lim.flags = BTRFS_QGROUP_LIMIT_MAX_RFER;
  args.lim.max_rfer = limit_bytes == 0 ? ~0ull : limit_bytes;  // All ones: no limit.
  int rc = ::ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &args);
  int err = errno;
  ::close(fd);
  if (rc < 0) {
    errno = err;
    return sys_error("cannot set the disk limit of " + dir);
  }
  return {};
}

std::optional<disk_usage> disk_pool::usage(std::uint64_t sandbox_id) const {
  auto dir = mount_dir_ + "/" + std::to_string(sandbox_id);
  if (sysfs_qgroups_.empty() || !is_subvolume_root(dir)) return std::nullopt;
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  auto id = subvolume_id(fd);
  // Quota groups are charged when a transaction commits: commit now, so that what was
  // just written shows (cheap when nothing is dirty).
  ::syncfs(fd);
  ::close(fd);
  if (!id) return std::nullopt;
  auto group = sysfs_qgroups_ + "/0_" + std::to_string(*id) + "/";
  auto read_number = [&](const char* file) -> std::optional<std::uint64_t> {
    std::ifstream in(group + file);
    std::string v;
    if (!(in >> v)) return std::nullopt;
    if (v == "none") return 0;
    return std::strtoull(v.c_str(), nullptr, 10);
  };
  auto used = read_number("referenced");
  if (!used) return std::nullopt;
  return disk_usage{*used, read_number("max_referenced").value_or(0)};
}

}  // namespace warren::storage
