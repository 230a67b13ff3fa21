#include "storage/base_image.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace warren::storage {

namespace fs = std::filesystem;

namespace {

// Files copied from the host's /etc because programs need them and they hold no secret.
// Deliberately absent: shadow, gshadow, ssl/private, ssh, environment, sudoers, anything
// under /etc that configures the host's services.
constexpr const char* copied_etc[] = {
    "ld.so.cache",  "ld.so.conf",   "ld.so.conf.d", "alternatives", "ssl/certs",
    "ssl/openssl.cnf", "ca-certificates.conf", "os-release", "debian_version", "profile",
    "profile.d",    "bash.bashrc",  "shells",       "localtime",    "timezone",
    "mime.types",   "login.defs",   "inputrc",      "protocols",    "services",
    "mke2fs.conf",  "magic",        "xattr.conf",
};

constexpr const char* passwd =
    "root:x:0:0:root:/root:/bin/bash\n"
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";

constexpr const char* group =
    "root:x:0:\n"
    "daemon:x:1:\n"
    "tty:x:5:\n"
    "users:x:100:\n"
    "nogroup:x:65534:\n";

constexpr const char* nsswitch =
    "passwd: files\n"
    "group: files\n"
    "shadow: files\n"
    "hosts: files dns\n"
    "networks: files\n"
    "protocols: files\n"
    "services: files\n";

error write_file(const fs::path& p, const std::string& content, mode_t mode = 0644) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) return make_error(errc::internal, "cannot write " + p.string());
  if (::chmod(p.c_str(), mode) != 0)
    return make_error(errc::internal, "cannot chmod " + p.string() + ": " + std::strerror(errno));
  return {};
}

// Copies a file, directory tree or symlink, keeping symlinks as symlinks.
error copy_entry(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  auto st = fs::symlink_status(from, ec);
  if (ec || !fs::exists(st)) return {};  // Optional on this host.
  fs::create_directories(to.parent_path(), ec);
  if (fs::is_symlink(st)) {
    auto target = fs::read_symlink(from, ec);
    if (!ec) fs::create_symlink(target, to, ec);
  } else {
    fs::copy(from, to,
             fs::copy_options::recursive | fs::copy_options::copy_symlinks |
                 fs::copy_options::overwrite_existing,
             ec);
  }
  if (ec) return make_error(errc::internal, "cannot copy " + from.string() + ": " + ec.message());
  return {};
}

error build(const fs::path& root, const fs::path& host_etc) {
  std::error_code ec;
  struct dir {
    const char* path;
    mode_t mode;
  };
  for (auto d : {dir{"etc", 0755}, dir{"usr", 0755}, dir{"dev", 0755}, dir{"proc", 0555},
                 dir{"sys", 0555}, dir{"tmp", 01777}, dir{"run", 0755}, dir{"var", 0755},
                 dir{"var/tmp", 01777}, dir{"var/log", 0755}, dir{"var/cache", 0755},
                 dir{"var/lib", 0755}, dir{"root", 0700}, dir{"home", 0755},
                 dir{"workspace", 0755}, dir{"mnt", 0755}, dir{"opt", 0755}, dir{"srv", 0755}}) {
    fs::create_directories(root / d.path, ec);
    if (ec || ::chmod((root / d.path).c_str(), d.mode) != 0)
      return make_error(errc::internal, "cannot create " + (root / d.path).string());
  }
  // Merged-/usr layout, as on the Debian host.
  for (auto link : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
    if (!fs::exists(fs::path("/usr") / link)) continue;
    fs::create_symlink(std::string("usr/") + link, root / link, ec);
    if (ec) return make_error(errc::internal, "cannot create symlink " + (root / link).string());
  }
  fs::create_symlink("../run", root / "var/run", ec);
  if (auto e = write_file(root / "etc/passwd", passwd)) return e;
  if (auto e = write_file(root / "etc/group", group)) return e;
  if (auto e = write_file(root / "etc/nsswitch.conf", nsswitch)) return e;
  // No network yet (loopback only): no name servers.
  if (auto e = write_file(root / "etc/resolv.conf", "# warren: this sandbox has no network\n"))
    return e;
  if (auto e = write_file(root / "etc/hosts", "127.0.0.1 localhost\n::1 localhost\n")) return e;
  for (auto name : copied_etc)
    if (auto e = copy_entry(host_etc / name, root / "etc" / name)) return e;
  return {};
}

}  // namespace

error ensure_base_image(const std::string& dir, const std::string& host_etc) {
  std::error_code ec;
  if (fs::exists(fs::path(dir) / "etc/passwd", ec)) return {};
  auto tmp = dir + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return make_error(errc::internal, "cannot create " + tmp + ": " + ec.message());
  if (::chmod(tmp.c_str(), 0755) != 0)
    return make_error(errc::internal, "cannot chmod " + tmp + ": " + std::strerror(errno));
  if (auto e = build(tmp, host_etc)) {
    fs::remove_all(tmp, ec);
    return e;
  }
  fs::remove_all(dir, ec);  // A directory without etc/passwd is an interrupted old build.
  if (::rename(tmp.c_str(), dir.c_str()) != 0)
    return make_error(errc::internal, "cannot move the base image into " + dir + ": " + std::strerror(errno));
  return {};
}

}  // namespace warren::storage
