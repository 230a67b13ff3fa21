// warren cp / cat / ls-files: files of a sandbox over Sandbox.files() (wire/files.capnp).
// Everything is streamed in chunks; nothing holds a whole file in memory.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>

#include "tools/warren/cli.hpp"
#include "wire/files.capnp.h"
#include "wire/json.hpp"
#include "wire/names.hpp"

namespace warren::cli {
namespace {

namespace fs = std::filesystem;
constexpr std::size_t chunk_bytes = 256 * 1024;  // Per streamed chunk. (1 MiB chunks fall off a cliff: 50 MB/s vs 320 MB/s here.)

struct remote_path {
  std::string name, path;
};

// "NAME:PATH" when NAME is a valid sandbox name; anything else is a local path.
std::optional<remote_path> parse_remote(const std::string& arg) {
  auto colon = arg.find(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  auto name = arg.substr(0, colon);
  if (wire::validate_sandbox_name(name)) return std::nullopt;
  auto path = arg.substr(colon + 1);
  return remote_path{name, path.empty() ? "/workspace" : path};
}

// Copying into a sandbox creates it if needed (as exec does); reading needs an existing one.
wire::Files::Client files_of(connection& c, const std::string& name, bool create = false) {
  if (!create) return existing(c, name).filesRequest().send().getFiles();
  auto req = c.root.sandboxRequest();
  req.setName(name);
  return req.send().getSandbox().filesRequest().send().getFiles();
}

std::string base_name(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string join(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

// Receives a streamed file into a local fd.
class fd_sink final : public wire::ByteSink::Server {
 public:
  fd_sink(int fd, std::string what) : fd_(fd), what_(std::move(what)) {}

 protected:
  kj::Promise<void> write(WriteContext context) override {
    auto d = context.getParams().getData();
    auto* p = d.begin();
    auto left = d.size();
    while (left > 0) {
      auto n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) die("cannot write " + what_ + ": " + std::strerror(errno));
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    return kj::READY_NOW;
  }
  kj::Promise<void> end(EndContext) override { return kj::READY_NOW; }

 private:
  int fd_;
  std::string what_;
};

std::optional<capnp::Response<wire::Files::StatResults>> remote_stat(connection& c, wire::Files::Client& files,
                                                                    const std::string& path) {
  auto req = files.statRequest();
  req.setPath(path);
  try {
    return req.send().wait(c.io.waitScope);
  } catch (const kj::Exception& e) {
    if (describe(e).find("no such file") != std::string::npos) return std::nullopt;
    throw;
  }
}

// Uploads one local file (or stdin for "-") to `path`.
void upload_file(connection& c, wire::Files::Client& files, const std::string& local, const std::string& path,
                 std::uint32_t mode) {
  int fd = local == "-" ? 0 : ::open(local.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) die("cannot read " + local + ": " + std::strerror(errno));
  auto open = files.openWriteRequest();
  open.setPath(path);
  auto options = open.initOptions();
  options.setMakeParents(true);
  options.setMode(mode);
  auto sink = open.send().getSink();
  std::vector<kj::byte> buf(chunk_bytes);
  while (true) {
    auto n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die("cannot read " + local + ": " + std::strerror(errno));
    if (n == 0) break;
    auto w = sink.writeRequest();
    w.setData(kj::arrayPtr(buf.data(), static_cast<std::size_t>(n)));
    w.send().wait(c.io.waitScope);  // Resolves as soon as flow control lets the next chunk go.
  }
  if (fd != 0) ::close(fd);
  sink.commitRequest().send().wait(c.io.waitScope);
}

// Downloads one remote file into a local path (written beside it, then renamed) or stdout.
void download_file(connection& c, wire::Files::Client& files, const std::string& path, const std::string& local,
                   std::uint32_t mode) {
  std::string tmp = local == "-" ? "" : local + ".warren-partial";
  int fd = local == "-" ? 1 : ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode ? mode : 0644);
  if (fd < 0) die("cannot write " + local + ": " + std::strerror(errno));
  auto req = files.streamFileRequest();
  req.setPath(path);
  req.setSink(kj::heap<fd_sink>(fd, local == "-" ? "stdout" : local));
  try {
    req.send().wait(c.io.waitScope);
  } catch (...) {
    if (fd != 1) {
      ::close(fd);
      ::unlink(tmp.c_str());
    }
    throw;
  }
  if (fd != 1) {
    ::close(fd);
    if (::rename(tmp.c_str(), local.c_str()) < 0) die("cannot rename " + tmp + " to " + local + ": " + std::strerror(errno));
  }
}

int copy_in(connection& c, const std::string& local, const remote_path& to) {
  auto files = files_of(c, to.name, true);
  auto target = to.path;
  auto existing_target = remote_stat(c, files, target);
  bool into_dir = existing_target && existing_target->getInfo().getType() == wire::FileType::DIRECTORY;
  if (local == "-") {
    if (into_dir) die(to.name + ":" + target + " is a directory; name the file to write");
    upload_file(c, files, "-", target, 0);
    return 0;
  }
  struct stat st {};
  if (::stat(local.c_str(), &st) < 0) die("cannot read " + local + ": " + std::strerror(errno));
  if (into_dir) target = join(existing_target->getInfo().getPath().cStr(), base_name(local));
  if (S_ISREG(st.st_mode)) {
    upload_file(c, files, local, target, st.st_mode & 07777);
    return 0;
  }
  if (!S_ISDIR(st.st_mode)) die(local + " is neither a file nor a directory");
  auto mk = [&](const std::string& path, std::uint32_t mode) {
    auto req = files.mkdirRequest();
    req.setPath(path);
    req.setRecursive(true);
    req.setMode(mode);
    req.send().wait(c.io.waitScope);
  };
  mk(target, st.st_mode & 07777);
  int skipped = 0;
  for (auto it = fs::recursive_directory_iterator(local); it != fs::recursive_directory_iterator(); ++it) {
    auto rel = fs::relative(it->path(), local).string();
    auto dest = join(target, rel);
    auto status = it->symlink_status();
    if (fs::is_symlink(status)) {
      ++skipped;  // The files API makes files and directories only.
    } else if (fs::is_directory(status)) {
      mk(dest, static_cast<std::uint32_t>(status.permissions()));
    } else if (fs::is_regular_file(status)) {
      upload_file(c, files, it->path().string(), dest, static_cast<std::uint32_t>(status.permissions()));
    } else {
      ++skipped;
    }
  }
  if (skipped) std::fprintf(stderr, "warren: skipped %d symlink(s) or special file(s)\n", skipped);
  return 0;
}

int copy_out(connection& c, const remote_path& from, const std::string& local) {
  auto files = files_of(c, from.name);
  auto st = remote_stat(c, files, from.path);
  if (!st) die(from.name + ":" + from.path + ": no such file or directory");
  auto info = st->getInfo();
  std::string target = local;
  struct stat lst {};
  bool local_dir = local != "-" && ::stat(local.c_str(), &lst) == 0 && S_ISDIR(lst.st_mode);
  if (local_dir) target = join(local, base_name(info.getPath().cStr()));
  if (info.getType() == wire::FileType::FILE) {
    download_file(c, files, info.getPath().cStr(), target, info.getMode());
    return 0;
  }
  if (info.getType() != wire::FileType::DIRECTORY) die(from.name + ":" + from.path + " is neither a file nor a directory");
  if (local == "-") die("cannot write a directory to stdout");
  auto root = std::string(info.getPath().cStr());
  fs::create_directories(target);
  auto req = files.listRequest();
  req.setPath(root);
  req.setRecursive(true);
  req.setHidden(true);
  req.setLimit(100000);
  auto list = req.send().wait(c.io.waitScope);
  if (list.getTruncated()) die(from.name + ":" + root + " holds more than 100000 entries; copy it in parts");
  for (auto e : list.getEntries()) {
    std::string path = e.getPath().cStr();
    auto dest = join(target, path.substr(root == "/" ? 1 : root.size() + 1));
    switch (e.getType()) {
      case wire::FileType::DIRECTORY:
        fs::create_directories(dest);
        break;
      case wire::FileType::FILE:
        download_file(c, files, path, dest, e.getMode());
        break;
      case wire::FileType::SYMLINK: {
        std::error_code ec;
        fs::create_symlink(e.getSymlinkTarget().cStr(), dest, ec);
        break;
      }
      default:
        break;
    }
  }
  return 0;
}

}  // namespace

int cmd_cp(connection& c, const options& o) {
  if (o.rest.size() != 3) die("cp needs a source and a destination, one of them NAME:PATH", exit_usage);
  auto from = parse_remote(o.rest[1]), to = parse_remote(o.rest[2]);
  if (from && to) die("cp copies between this machine and a sandbox; both sides name a sandbox", exit_usage);
  if (!from && !to) die("cp needs NAME:PATH on one side (e.g. warren cp app.py demo:/workspace/)", exit_usage);
  return to ? copy_in(c, o.rest[1], *to) : copy_out(c, *from, o.rest[2]);
}

int cmd_cat(connection& c, const options& o) {
  if (o.rest.size() != 2) die("cat needs one NAME:PATH", exit_usage);
  auto from = parse_remote(o.rest[1]);
  if (!from) die("cat needs NAME:PATH, e.g. warren cat demo:/etc/hostname", exit_usage);
  auto files = files_of(c, from->name);
  download_file(c, files, from->path, "-", 0);
  return 0;
}

int cmd_ls_files(connection& c, const options& o) {
  bool recursive = false, all = false;
  std::optional<remote_path> dir;
  for (std::size_t i = 1; i < o.rest.size(); ++i) {
    if (o.rest[i] == "--recursive" || o.rest[i] == "-R") recursive = true;
    else if (o.rest[i] == "--all" || o.rest[i] == "-a") all = true;
    else if (!dir) dir = parse_remote(o.rest[i]);
    else die("ls-files takes one NAME:PATH", exit_usage);
  }
  if (!dir) die("ls-files needs NAME:PATH, e.g. warren ls-files demo:/workspace", exit_usage);
  auto files = files_of(c, dir->name);
  auto req = files.listRequest();
  req.setPath(dir->path);
  req.setRecursive(recursive);
  req.setHidden(all);
  auto res = req.send().wait(c.io.waitScope);
  static const char* types[] = {"file", "dir", "link", "other"};
  if (o.json) std::printf("[");
  bool first = true;
  for (auto e : res.getEntries()) {
    auto type = types[static_cast<int>(e.getType())];
    if (o.json) {
      std::printf("%s{\"path\":%s,\"type\":\"%s\",\"size\":%llu,\"mode\":%u,\"mtimeMs\":%lld", first ? "" : ",",
                  wire::json_quote(e.getPath().cStr()).c_str(), type, static_cast<unsigned long long>(e.getSize()),
                  e.getMode(), static_cast<long long>(e.getMtimeMs()));
      if (e.getType() == wire::FileType::SYMLINK)
        std::printf(",\"symlinkTarget\":%s", wire::json_quote(e.getSymlinkTarget().cStr()).c_str());
      std::printf("}");
      first = false;
      continue;
    }
    std::time_t t = static_cast<std::time_t>(e.getMtimeMs() / 1000);
    std::tm tm;
    ::localtime_r(&t, &tm);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
    std::printf("%-5s %04o %10llu %s %s", type, e.getMode(), static_cast<unsigned long long>(e.getSize()), when,
                e.getPath().cStr());
    if (e.getType() == wire::FileType::SYMLINK) std::printf(" -> %s", e.getSymlinkTarget().cStr());
    std::printf("\n");
  }
  if (o.json) std::printf("]\n");
  if (res.getTruncated()) std::fprintf(stderr, "warren: the listing was cut at %u entries\n", res.getEntries().size());
  return 0;
}

}  // namespace warren::cli
