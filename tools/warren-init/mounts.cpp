// The sandbox's root filesystem (see DESIGN.md "Base image"):
//   /        overlay: lower = generated skeleton, upper = <sandbox>/upper/root
//   /usr     overlay: lower = host /usr,          upper = <sandbox>/upper/usr
//            Every layer is an idmapped mount (staged under <sandbox>/mnt/) in the sandbox's
//            user namespace: on disk, files keep ids 0..65535; inside they are the same ids;
//            on the host they belong to the sandbox's unprivileged range.
//   /proc    proc of the sandbox's pid namespace, with the kernel knobs read-only
//   /dev     tmpfs with null zero full random urandom tty bound from the host, devpts, shm
//   /tmp /run  tmpfs
// then pivot_root, so that nothing of the host's tree stays reachable.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <fstream>

#include "sys.hpp"

namespace warren::init {
namespace {

// Creates `path` and missing parents; the common case (parent exists) is one syscall.
void mkdir_p(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) == 0 || errno == EEXIST) return;
  if (errno != ENOENT) fail("mkdir", path, errno);
  auto slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) fail("mkdir", path, ENOENT);
  mkdir_p(path.substr(0, slash), mode);
  if (::mkdir(path.c_str(), mode) < 0 && errno != EEXIST) fail("mkdir", path, errno);
}

void do_mount(const char* source, const std::string& target, const char* type, unsigned long flags,
              const std::string& data = "") {
  check(::mount(source, target.c_str(), type, flags, data.empty() ? nullptr : data.c_str()),
        std::string("mount ") + (type ? type : "bind"), target);
}

void touch(const std::string& path, mode_t mode) {
  unique_fd fd(static_cast<int>(check(::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, mode), "create", path)));
}

void write_text(const std::string& path, const std::string& text) {
  unique_fd fd(static_cast<int>(check(::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0644), "create", path)));
  if (!write_all(fd.get(), text.data(), text.size())) fail("write", path, errno);
}

void bind_read_only(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) < 0) return;  // Absent on this kernel: nothing to protect.
  do_mount(path.c_str(), path, nullptr, MS_BIND | MS_REC);
  do_mount(nullptr, path, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC);
}

void mask(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) < 0) return;
  if (S_ISDIR(st.st_mode)) do_mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0");
  else do_mount("/dev/null", path, nullptr, MS_BIND);
}

// Options that make a tmpfs's root directory belong to the sandbox's root.
std::string owner_options(const root_config& c) {
  auto id = std::to_string(c.uid_base);
  return ",uid=" + id + ",gid=" + id;
}

void make_dev(const root_config& c, const std::string& dev) {
  do_mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=64k" + owner_options(c));
  for (auto node : {"null", "zero", "full", "random", "urandom", "tty"}) {
    auto target = dev + "/" + node;
    touch(target, 0666);
    do_mount((std::string("/dev/") + node).c_str(), target, nullptr, MS_BIND);
  }
  mkdir_p(dev + "/pts", 0755);
  do_mount("devpts", dev + "/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=" + std::to_string(c.uid_base + 5));  // tty inside
  check(::symlink("pts/ptmx", (dev + "/ptmx").c_str()), "symlink", dev + "/ptmx");
  mkdir_p(dev + "/shm", 01777);
  do_mount("tmpfs", dev + "/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777" + owner_options(c));
  struct link {
    const char* target;
    const char* name;
  };
  for (auto l : {link{"/proc/self/fd", "fd"}, link{"/proc/self/fd/0", "stdin"},
                 link{"/proc/self/fd/1", "stdout"}, link{"/proc/self/fd/2", "stderr"}})
    check(::symlink(l.target, (dev + "/" + l.name).c_str()), "symlink", dev + "/" + l.name);
}

}  // namespace

void prepare_layer_dirs(const root_config& c) {
  for (auto d : {"/upper/root", "/upper/usr", "/work/root", "/work/usr", "/rootfs", "/mnt/base", "/mnt/usr", "/mnt/self"})
    mkdir_p(c.sandbox_dir + d, 0755);
}

void enter_root(const root_config& c) {
  const auto root = c.sandbox_dir + "/rootfs";
  std::string base = c.base_dir, usr = "/usr", dir = c.sandbox_dir;
  if (c.userns_fd >= 0) {
    // The staging mounts go away with the host's tree at pivot_root; the overlays keep
    // their layers.
    base = c.sandbox_dir + "/mnt/base";
    usr = c.sandbox_dir + "/mnt/usr";
    dir = c.sandbox_dir + "/mnt/self";
    mount_idmapped(c.base_dir, base, c.userns_fd);
    mount_idmapped("/usr", usr, c.userns_fd);
    mount_idmapped(c.sandbox_dir, dir, c.userns_fd);
    // Through the idmapped upper layers, only the sandbox's ids can own files: from here
    // on PID 1 creates them as the sandbox's root.
    act_as_sandbox_root(c.uid_base);
  }
  do_mount("overlay", root, "overlay", 0,
           "lowerdir=" + base + ",upperdir=" + dir + "/upper/root,workdir=" + dir + "/work/root");
  mkdir_p(root + "/usr", 0755);
  do_mount("overlay", root + "/usr", "overlay", 0,
           "lowerdir=" + usr + ",upperdir=" + dir + "/upper/usr,workdir=" + dir + "/work/usr");

  for (auto d : {"/proc", "/dev", "/tmp", "/run", "/workspace", "/root", "/sys"}) mkdir_p(root + d, 0755);
  do_mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC);
  // Kernel knobs reachable through /proc stay read-only (core_pattern is a classic escape),
  // and files that leak host state are masked.
  for (auto p : {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"})
    bind_read_only(root + p);
  for (auto p : {"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/kallsyms", "/proc/acpi",
                 "/proc/scsi", "/proc/latency_stats", "/proc/sched_debug"})
    mask(root + p);
  do_mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777" + owner_options(c));
  do_mount("tmpfs", root + "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755" + owner_options(c));
  make_dev(c, root + "/dev");

  ::chmod((root + "/tmp").c_str(), 01777);
  write_text(root + "/etc/hostname", c.hostname + "\n");
  write_text(root + "/etc/hosts", "127.0.0.1 localhost\n::1 localhost ip6-localhost\n127.0.1.1 " +
                                      c.hostname + "\n");

  check(::chdir(root.c_str()), "chdir", root);
  check(::syscall(SYS_pivot_root, ".", "."), "pivot_root", root);
  // The old root is stacked under the new one at "."; detach it so the host tree is gone.
  check(::umount2(".", MNT_DETACH), "umount2", "old root");
  check(::chdir("/workspace"), "chdir", "/workspace");
}

}  // namespace warren::init
