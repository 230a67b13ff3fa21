// The Files interface (wire/files.capnp), served by the agent from inside the sandbox.
//
// Confinement does not rest on checking paths: the agent runs after pivot_root, in the
// sandbox's mount and user namespaces, so no path it resolves can name a host file, and it
// acts with the rights of the sandbox's root only. On top of that every lookup goes through
// openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) from the root: `..` stops at `/`, and
// /proc magic links (/proc/1/fd/3 is the agent's own link to the daemon) are refused, even
// when a sandbox process swaps a symlink between two calls. Operations on a final component
// (remove, rename, mkdir, stat) work on the directory fd of its parent and never follow it.
#include "files.hpp"

#include <kj/debug.h>

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sys.hpp"

namespace warren::init {
namespace {

constexpr std::size_t one_shot_limit = 16u << 20;  // writeFile / readFile.
constexpr std::size_t chunk_bytes = 256 * 1024;  // streamFile chunks (64 KiB: 0.64-0.8x cp; see tests/bench).
constexpr std::size_t sniff_bytes = 8192;
constexpr std::uint32_t list_default_limit = 10000;
constexpr std::uint32_t list_max_limit = 100000;  // ~10 MB of results: well inside one message.

[[noreturn]] void throw_code(const char* code, const std::string& message) {
  kj::throwFatalException(kj::Exception(kj::Exception::Type::FAILED, __FILE__, __LINE__,
                                        kj::str(code, ": ", message.c_str())));
}

// Maps errno of an operation on `path` to the API's error codes.
[[noreturn]] void throw_errno(int err, const std::string& what, const std::string& path) {
  auto msg = what + " " + path + ": " + std::strerror(err);
  switch (err) {
    case ENOENT: throw_code("not_found", what + " " + path + ": no such file or directory");
    case EEXIST: throw_code("already_exists", what + " " + path + ": it already exists");
    case ENOTDIR: throw_code("not_a_directory", msg);
    case EISDIR: throw_code("is_a_directory", what + " " + path + ": it is a directory");
    case EACCES:
    case EPERM:
    case EROFS: throw_code("permission_denied", msg);
    case ENOTEMPTY: throw_code("not_empty", what + " " + path + ": the directory is not empty (ask for recursive)");
    case EDQUOT: throw_code("no_space", what + " " + path + ": the sandbox's disk limit is reached");
    case ENOSPC: throw_code("no_space", what + " " + path + ": no space left");
    case ELOOP:
      throw_code("invalid_argument", what + " " + path +
                                         ": a symlink on the way loops, or leads through a /proc link (refused)");
    case EXDEV:
    case ENAMETOOLONG:
    case EINVAL: throw_code("invalid_argument", msg);
    default: throw_code("internal", msg);
  }
}

// --- paths ----------------------------------------------------------------------------------

bool valid_utf8(const char* p, std::size_t n, bool allow_truncated_tail) {
  std::size_t i = 0;
  while (i < n) {
    auto c = static_cast<unsigned char>(p[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0) return false;
    if (i + len > n) return allow_truncated_tail;
    for (std::size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(p[i + k]) >> 6) != 0x2) return false;
    i += len;
  }
  return true;
}

// A client's path, checked and normalized: absolute, no "." or ".." left (".." stops at
// the root, as the kernel's RESOLVE_IN_ROOT does), relative paths from /workspace.
struct sandbox_path {
  std::vector<std::string> parts;  // Empty: the root itself.

  std::string str() const {
    if (parts.empty()) return "/";
    std::string s;
    for (auto& p : parts) s += "/" + p;
    return s;
  }
  std::string parent_str() const {
    sandbox_path p{{parts.begin(), parts.end() - 1}};
    return p.str();
  }
  const std::string& name() const { return parts.back(); }
};

sandbox_path parse_path(capnp::Text::Reader text) {
  std::string raw(text.cStr(), text.size());
  if (raw.empty()) throw_code("invalid_argument", "the path is empty");
  if (raw.size() > 4096) throw_code("invalid_argument", "the path is longer than 4096 bytes");
  if (raw.find('\0') != std::string::npos) throw_code("invalid_argument", "the path contains a NUL byte");
  if (!valid_utf8(raw.data(), raw.size(), false)) throw_code("invalid_argument", "the path is not valid UTF-8");
  if (raw[0] != '/') raw = "/workspace/" + raw;
  sandbox_path out;
  std::size_t at = 0;
  while (at <= raw.size()) {
    auto slash = raw.find('/', at);
    if (slash == std::string::npos) slash = raw.size();
    auto part = raw.substr(at, slash - at);
    at = slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!out.parts.empty()) out.parts.pop_back();
      continue;
    }
    if (part.size() > 255) throw_code("invalid_argument", "a path component is longer than 255 bytes: " + part.substr(0, 40) + "...");
    out.parts.push_back(std::move(part));
  }
  return out;
}

int open_in_root(int root, const std::string& path, std::uint64_t flags, std::uint64_t mode = 0) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.mode = mode;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  // Relative to the root fd: "/a/b" and "a/b" mean the same with RESOLVE_IN_ROOT.
  auto rel = path == "/" ? std::string(".") : path.substr(1);
  return static_cast<int>(::syscall(SYS_openat2, root, rel.c_str(), &how, sizeof how));
}

// --- file information -----------------------------------------------------------------------

const std::map<std::string, const char*>& mime_by_extension() {
  static const std::map<std::string, const char*> m = {
      {"txt", "text/plain"}, {"log", "text/plain"}, {"md", "text/markdown"}, {"html", "text/html"},
      {"htm", "text/html"}, {"css", "text/css"}, {"js", "text/javascript"}, {"mjs", "text/javascript"},
      {"cjs", "text/javascript"}, {"jsx", "text/javascript"}, {"ts", "text/typescript"}, {"tsx", "text/typescript"},
      {"json", "application/json"}, {"xml", "application/xml"}, {"yaml", "application/yaml"}, {"yml", "application/yaml"},
      {"toml", "application/toml"}, {"csv", "text/csv"}, {"py", "text/x-python"}, {"rb", "text/x-ruby"},
      {"go", "text/x-go"}, {"rs", "text/x-rust"}, {"c", "text/x-c"}, {"h", "text/x-c"}, {"cc", "text/x-c++"},
      {"cpp", "text/x-c++"}, {"hpp", "text/x-c++"}, {"java", "text/x-java"}, {"sh", "application/x-sh"},
      {"svg", "image/svg+xml"}, {"png", "image/png"}, {"jpg", "image/jpeg"}, {"jpeg", "image/jpeg"},
      {"gif", "image/gif"}, {"webp", "image/webp"}, {"ico", "image/vnd.microsoft.icon"}, {"pdf", "application/pdf"},
      {"zip", "application/zip"}, {"gz", "application/gzip"}, {"tgz", "application/gzip"}, {"tar", "application/x-tar"},
      {"zst", "application/zstd"}, {"wasm", "application/wasm"}, {"mp3", "audio/mpeg"}, {"wav", "audio/wav"},
      {"mp4", "video/mp4"}, {"webm", "video/webm"}, {"woff", "font/woff"}, {"woff2", "font/woff2"},
      {"ttf", "font/ttf"}, {"ipynb", "application/x-ipynb+json"},
  };
  return m;
}

bool looks_binary(const std::string& head) {
  return head.find('\0') != std::string::npos || !valid_utf8(head.data(), head.size(), true);
}

std::string sniff_mime(const std::string& name, const std::string& head) {
  auto dot = name.rfind('.');
  if (dot != std::string::npos && dot + 1 < name.size()) {
    auto ext = name.substr(dot + 1);
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    auto it = mime_by_extension().find(ext);
    if (it != mime_by_extension().end()) return it->second;
  }
  auto starts = [&](const char* magic, std::size_t n) { return head.size() >= n && std::memcmp(head.data(), magic, n) == 0; };
  if (starts("\x89PNG", 4)) return "image/png";
  if (starts("\xFF\xD8\xFF", 3)) return "image/jpeg";
  if (starts("GIF8", 4)) return "image/gif";
  if (starts("%PDF", 4)) return "application/pdf";
  if (starts("PK\x03\x04", 4)) return "application/zip";
  if (starts("\x1F\x8B", 2)) return "application/gzip";
  if (starts("\x7F" "ELF", 4)) return "application/x-executable";
  if (starts("#!", 2)) return "text/x-script";
  return looks_binary(head) ? "application/octet-stream" : "text/plain";
}

std::string read_head(int fd) {
  std::string head(sniff_bytes, '\0');
  auto n = ::pread(fd, head.data(), head.size(), 0);
  head.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return head;
}

void fill_info(wire::FileInfo::Builder b, const std::string& path, const struct stat& st, const std::string& link_target,
               int content_fd) {
  b.setPath(path);
  b.setType(S_ISREG(st.st_mode) ? wire::FileType::FILE
            : S_ISDIR(st.st_mode) ? wire::FileType::DIRECTORY
            : S_ISLNK(st.st_mode) ? wire::FileType::SYMLINK
                                  : wire::FileType::OTHER);
  b.setSize(static_cast<std::uint64_t>(st.st_size));
  b.setMode(st.st_mode & 07777);
  b.setMtimeMs(static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000);
  if (S_ISLNK(st.st_mode)) b.setSymlinkTarget(link_target);
  if (S_ISREG(st.st_mode) && content_fd >= 0) {
    auto head = read_head(content_fd);
    auto slash = path.rfind('/');
    b.setMimeType(sniff_mime(path.substr(slash + 1), head));
    b.setIsBinary(looks_binary(head));
  }
}

std::string read_link_at(int dir, const std::string& name) {
  std::string target(4096, '\0');
  auto n = ::readlinkat(dir, name.c_str(), target.data(), target.size());
  target.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return target;
}

// The path an fd refers to, as the sandbox sees it (the agent's root is the sandbox's).
std::string path_of(int fd) {
  std::string target(4096, '\0');
  auto link = "/proc/self/fd/" + std::to_string(fd);
  auto n = ::readlink(link.c_str(), target.data(), target.size());
  target.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return target;
}

// --- the server -----------------------------------------------------------------------------

class file_sink final : public wire::FileSink::Server {
 public:
  file_sink(int dir, std::string tmp, std::string target, std::string shown, int fd, mode_t mode, bool no_overwrite)
      : dir_(dir), tmp_(std::move(tmp)), target_(std::move(target)), shown_(std::move(shown)), fd_(fd), mode_(mode),
        no_overwrite_(no_overwrite) {}
  ~file_sink() {
    if (!committed_) ::unlinkat(dir_.get(), tmp_.c_str(), 0);  // Abandoned: nothing stays.
  }

  void append(const kj::ArrayPtr<const kj::byte> data) {
    if (fd_.get() < 0) throw_code("invalid_argument", "the file was already committed");
    if (!write_all(fd_.get(), reinterpret_cast<const char*>(data.begin()), data.size()))
      throw_errno(errno, "write", shown_);
  }

  void finish(wire::FileInfo::Builder info) {
    if (fd_.get() < 0) throw_code("invalid_argument", "the file was already committed");
    if (::fchmod(fd_.get(), mode_) < 0) throw_errno(errno, "chmod", shown_);
    if (::fsync(fd_.get()) < 0) throw_errno(errno, "sync", shown_);
    if (no_overwrite_) {
      if (::renameat2(dir_.get(), tmp_.c_str(), dir_.get(), target_.c_str(), RENAME_NOREPLACE) < 0)
        throw_errno(errno, "write", shown_);
    } else if (::renameat(dir_.get(), tmp_.c_str(), dir_.get(), target_.c_str()) < 0) {
      throw_errno(errno, "write", shown_);
    }
    committed_ = true;
    ::fsync(dir_.get());  // The rename itself is durable before the reply.
    struct stat st {};
    ::fstat(fd_.get(), &st);
    fill_info(info, shown_, st, "", fd_.get());
    fd_.reset();
  }

 protected:
  kj::Promise<void> write(WriteContext context) override {
    append(context.getParams().getData());
    return kj::READY_NOW;
  }
  kj::Promise<void> commit(CommitContext context) override {
    finish(context.getResults().initInfo());
    return kj::READY_NOW;
  }

 private:
  unique_fd dir_;
  std::string tmp_, target_, shown_;
  unique_fd fd_;
  mode_t mode_;
  bool no_overwrite_;
  bool committed_ = false;
};

class files_impl final : public wire::Files::Server {
 public:
  files_impl() : root_(static_cast<int>(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC))) {}

 protected:
  kj::Promise<void> writeFile(WriteFileContext context) override {
    auto p = context.getParams();
    auto data = p.getData();
    if (data.size() > one_shot_limit)
      throw_code("too_large", "writeFile takes at most 16 MiB; stream larger files with openWrite");
    auto sink = start_write(parse_path(p.getPath()), p.getOptions());
    sink->append(data);
    sink->finish(context.getResults().initInfo());
    return kj::READY_NOW;
  }

  kj::Promise<void> openWrite(OpenWriteContext context) override {
    auto p = context.getParams();
    context.getResults().setSink(start_write(parse_path(p.getPath()), p.getOptions()));
    return kj::READY_NOW;
  }

  kj::Promise<void> readFile(ReadFileContext context) override {
    auto p = context.getParams();
    auto [path, fd, st, offset, want] = open_range(p.getPath(), p.getOffset(), p.getLength());
    if (want > one_shot_limit)
      throw_code("too_large", path.str() + " has " + std::to_string(want) +
                                  " bytes to read; readFile returns at most 16 MiB: use streamFile, or offset and length");
    auto res = context.getResults();
    auto out = res.initData(want);
    std::size_t got = 0;
    while (got < want) {
      auto n = ::pread(fd.get(), out.begin() + got, want - got, static_cast<off_t>(offset + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw_errno(errno, "read", path.str());
      if (n == 0) break;  // Shrank meanwhile.
      got += static_cast<std::size_t>(n);
    }
    if (got < want) res.setData(kj::arrayPtr(out.begin(), got));
    fill_info(res.initInfo(), path.str(), st, "", fd.get());
    return kj::READY_NOW;
  }

  kj::Promise<void> streamFile(StreamFileContext context) override {
    auto p = context.getParams();
    auto [path, fd, st, offset, want] = open_range(p.getPath(), p.getOffset(), p.getLength());
    fill_info(context.getResults().initInfo(), path.str(), st, "", fd.get());
    auto job = kj::heap<stream_job>(stream_job{std::move(fd), p.getSink(), offset, want, 0, path.str()});
    auto& ref = *job;
    return pump(ref).then([&ref]() { return ref.sink.endRequest().send().ignoreResult(); })
        .then([context, &ref]() mutable { context.getResults().setBytes(ref.sent); })
        .attach(kj::mv(job));
  }

  kj::Promise<void> mkdir(MkdirContext context) override {
    auto p = context.getParams();
    auto path = parse_path(p.getPath());
    if (path.parts.empty()) throw_code("already_exists", "mkdir /: it already exists");
    mode_t mode = p.getMode() ? (p.getMode() & 07777) : 0755;
    if (p.getRecursive()) {
      unique_fd dir = make_parents(path, path.parts.size());
      (void)dir;
    } else {
      auto parent = open_parent(path);
      if (::mkdirat(parent.get(), path.name().c_str(), mode) < 0) throw_errno(errno, "mkdir", path.str());
    }
    auto parent = open_parent(path);
    if (p.getMode()) ::fchmodat(parent.get(), path.name().c_str(), mode, 0);
    stat_into(parent.get(), path, context.getResults().initInfo());
    return kj::READY_NOW;
  }

  kj::Promise<void> remove(RemoveContext context) override {
    auto p = context.getParams();
    auto path = parse_path(p.getPath());
    auto shown = path.str();
    if (shown == "/" || shown == "/workspace") throw_code("permission_denied", "remove " + shown + ": it cannot be removed");
    auto parent = open_parent(path);
    if (::unlinkat(parent.get(), path.name().c_str(), 0) == 0) return kj::READY_NOW;
    if (errno != EISDIR && errno != EPERM) throw_errno(errno, "remove", shown);
    if (p.getRecursive()) remove_tree_at(parent.get(), path.name(), shown);
    else if (::unlinkat(parent.get(), path.name().c_str(), AT_REMOVEDIR) < 0) throw_errno(errno, "remove", shown);
    return kj::READY_NOW;
  }

  kj::Promise<void> rename(RenameContext context) override {
    auto p = context.getParams();
    auto from = parse_path(p.getFrom()), to = parse_path(p.getTo());
    if (from.parts.empty() || to.parts.empty()) throw_code("invalid_argument", "rename: / cannot be moved or replaced");
    if (from.str() == "/workspace") throw_code("permission_denied", "rename /workspace: it cannot be moved");
    auto from_dir = open_parent(from), to_dir = open_parent(to);
    unsigned flags = p.getOverwrite() ? 0 : RENAME_NOREPLACE;
    if (::renameat2(from_dir.get(), from.name().c_str(), to_dir.get(), to.name().c_str(), flags) < 0) {
      if (errno != EXDEV) throw_errno(errno, "rename", from.str() + " to " + to.str());
      // Another filesystem of the sandbox (/tmp is a tmpfs): copy, then remove the source.
      if (!p.getOverwrite() && ::faccessat(to_dir.get(), to.name().c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0)
        throw_errno(EEXIST, "rename to", to.str());
      if (p.getOverwrite()) remove_tree_at(to_dir.get(), to.name(), to.str(), true);
      try {
        copy_tree_at(from_dir.get(), from.name(), to_dir.get(), to.name(), from.str());
      } catch (...) {
        remove_tree_at(to_dir.get(), to.name(), to.str(), true);  // No half copy stays behind.
        throw;
      }
      remove_tree_at(from_dir.get(), from.name(), from.str(), true);
    }
    stat_into(to_dir.get(), to, context.getResults().initInfo());
    return kj::READY_NOW;
  }

  kj::Promise<void> list(ListContext context) override {
    auto p = context.getParams();
    auto path = parse_path(p.getPath());
    unique_fd dir(open_in_root(root_.get(), path.str(), O_RDONLY | O_DIRECTORY));
    if (dir.get() < 0) throw_errno(errno, "list", path.str());
    std::uint32_t limit = p.getLimit() ? std::min(p.getLimit(), list_max_limit) : list_default_limit;
    std::vector<entry> found;
    bool truncated = false;
    walk(dir.get(), path.str() == "/" ? "" : path.str(), p.getRecursive(), p.getHidden(), limit, found, truncated);
    std::sort(found.begin(), found.end(), [](const entry& a, const entry& b) { return a.path < b.path; });
    auto res = context.getResults();
    auto list = res.initEntries(static_cast<unsigned>(found.size()));
    for (unsigned i = 0; i < found.size(); ++i) fill_info(list[i], found[i].path, found[i].st, found[i].target, -1);
    res.setTruncated(truncated);
    return kj::READY_NOW;
  }

  kj::Promise<void> stat(StatContext context) override {
    auto path = parse_path(context.getParams().getPath());
    if (path.parts.empty()) {
      struct stat st {};
      ::fstat(root_.get(), &st);
      fill_info(context.getResults().initInfo(), "/", st, "", -1);
      return kj::READY_NOW;
    }
    auto parent = open_parent(path);
    stat_into(parent.get(), path, context.getResults().initInfo());
    return kj::READY_NOW;
  }

  kj::Promise<void> exists(ExistsContext context) override {
    auto path = parse_path(context.getParams().getPath());
    if (path.parts.empty()) {
      context.getResults().setExists(true);
      return kj::READY_NOW;
    }
    unique_fd parent(open_in_root(root_.get(), path.parent_str(), O_PATH | O_DIRECTORY));
    if (parent.get() < 0) {
      if (errno == ENOENT || errno == ENOTDIR) return kj::READY_NOW;  // exists = false.
      throw_errno(errno, "exists", path.str());
    }
    struct stat st {};
    if (::fstatat(parent.get(), path.name().c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) context.getResults().setExists(true);
    else if (errno != ENOENT && errno != ENOTDIR) throw_errno(errno, "exists", path.str());
    return kj::READY_NOW;
  }

 private:
  struct stream_job {
    unique_fd fd;
    wire::ByteSink::Client sink;
    std::uint64_t offset, left, sent;
    std::string path;
  };

  struct entry {
    std::string path;
    struct stat st;
    std::string target;
  };

  // A regular file opened for reading, and the byte range [offset, offset + want) of it that
  // a read of `length` bytes (0: to the end) from `offset` covers.
  struct read_range {
    sandbox_path path;
    unique_fd fd;
    struct stat st;
    std::uint64_t offset, want;
  };
  read_range open_range(capnp::Text::Reader text, std::uint64_t offset, std::uint64_t length) {
    auto path = parse_path(text);
    auto fd = open_regular(path);
    struct stat st {};
    ::fstat(fd.get(), &st);
    auto size = static_cast<std::uint64_t>(st.st_size);
    if (offset > size) throw_code("invalid_argument", "offset " + std::to_string(offset) + " is past the end (" + std::to_string(size) + " bytes)");
    auto left = size - offset;
    return {std::move(path), std::move(fd), st, offset, length == 0 ? left : std::min(length, left)};
  }

  kj::Promise<void> pump(stream_job& job) {
    if (job.left == 0) return kj::READY_NOW;
    auto req = job.sink.writeRequest();
    auto n = static_cast<std::size_t>(std::min<std::uint64_t>(job.left, chunk_bytes));
    auto buf = req.initData(static_cast<unsigned>(n));
    ssize_t got;
    do got = ::pread(job.fd.get(), buf.begin(), n, static_cast<off_t>(job.offset));
    while (got < 0 && errno == EINTR);
    if (got < 0) throw_errno(errno, "read", job.path);
    if (got == 0) {  // The file shrank while we streamed it.
      job.left = 0;
      return kj::READY_NOW;
    }
    if (static_cast<std::size_t>(got) < n) req.setData(kj::arrayPtr(buf.begin(), static_cast<std::size_t>(got)));
    job.offset += static_cast<std::uint64_t>(got);
    job.left -= static_cast<std::uint64_t>(got);
    job.sent += static_cast<std::uint64_t>(got);
    return req.send().then([this, &job]() { return pump(job); });
  }

  unique_fd open_regular(const sandbox_path& path) {
    unique_fd fd(open_in_root(root_.get(), path.str(), O_RDONLY | O_NONBLOCK));
    if (fd.get() < 0) throw_errno(errno, "read", path.str());
    struct stat st {};
    if (::fstat(fd.get(), &st) < 0) throw_errno(errno, "read", path.str());
    if (S_ISDIR(st.st_mode)) throw_errno(EISDIR, "read", path.str());
    if (!S_ISREG(st.st_mode)) throw_code("invalid_argument", "read " + path.str() + ": not a regular file (a device, FIFO or socket)");
    return fd;
  }

  unique_fd open_parent(const sandbox_path& path) {
    unique_fd dir(open_in_root(root_.get(), path.parent_str(), O_PATH | O_DIRECTORY));
    if (dir.get() < 0) throw_errno(errno, "open the parent of", path.str());
    return dir;
  }

  // Creates the first `count` components as needed; returns the last one's fd.
  unique_fd make_parents(const sandbox_path& path, std::size_t count) {
    unique_fd dir(::dup(root_.get()));
    sandbox_path so_far;
    for (std::size_t i = 0; i < count; ++i) {
      so_far.parts.push_back(path.parts[i]);
      if (::mkdirat(dir.get(), path.parts[i].c_str(), 0755) < 0 && errno != EEXIST)
        throw_errno(errno, "mkdir", so_far.str());
      // Re-resolved from the root each step: a symlink planted meanwhile stays inside.
      unique_fd next(open_in_root(root_.get(), so_far.str(), O_PATH | O_DIRECTORY));
      if (next.get() < 0) throw_errno(errno, "mkdir", so_far.str());
      dir = std::move(next);
    }
    return dir;
  }

  void stat_into(int parent, const sandbox_path& path, wire::FileInfo::Builder info) {
    struct stat st {};
    if (::fstatat(parent, path.name().c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) throw_errno(errno, "stat", path.str());
    std::string target = S_ISLNK(st.st_mode) ? read_link_at(parent, path.name()) : "";
    unique_fd content;
    if (S_ISREG(st.st_mode)) content.reset(::openat(parent, path.name().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    fill_info(info, path.str(), st, target, content.get());
  }

  kj::Own<file_sink> start_write(const sandbox_path& requested, wire::WriteOptions::Reader options) {
    if (requested.parts.empty()) throw_errno(EISDIR, "write", "/");
    auto path = requested;
    unique_fd parent(open_in_root(root_.get(), path.parent_str(), O_PATH | O_DIRECTORY));
    if (parent.get() < 0) {
      if (errno != ENOENT || !options.getMakeParents()) throw_errno(errno, "write", path.str());
      parent = make_parents(path, path.parts.size() - 1);
    }
    struct stat st {};
    mode_t mode = options.getMode() ? (options.getMode() & 07777) : 0644;
    if (::fstatat(parent.get(), path.name().c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (options.getNoOverwrite()) throw_errno(EEXIST, "write", path.str());
      if (S_ISLNK(st.st_mode)) {
        // Writing through a symlink writes its target (resolved inside the root).
        unique_fd target(open_in_root(root_.get(), path.str(), O_PATH));
        if (target.get() < 0) throw_errno(errno, "write (through the symlink)", path.str());
        auto resolved = path_of(target.get());
        path = parse_path(capnp::Text::Reader(resolved.c_str(), resolved.size()));
        parent.reset(open_in_root(root_.get(), path.parent_str(), O_PATH | O_DIRECTORY));
        if (parent.get() < 0) throw_errno(errno, "write", path.str());
        if (::fstatat(parent.get(), path.name().c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) st.st_mode = 0;
      }
      if (S_ISDIR(st.st_mode)) throw_errno(EISDIR, "write", path.str());
      if (st.st_mode && !S_ISREG(st.st_mode)) throw_code("invalid_argument", "write " + path.str() + ": not a regular file");
      if (!options.getMode() && S_ISREG(st.st_mode)) mode = st.st_mode & 07777;
    }
    static std::mt19937_64 random{std::random_device{}()};
    char suffix[24];
    std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(random()));
    auto tmp = "." + path.name().substr(0, 200) + ".warren-" + suffix;
    // O_PATH fds cannot create; a real directory fd of the same directory can.
    unique_fd dir(::openat(parent.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.get() < 0) throw_errno(errno, "write", path.str());
    int fd = ::openat(dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) throw_errno(errno, "write", path.str());
    return kj::heap<file_sink>(dir.release(), tmp, path.name(), path.str(), fd, mode, options.getNoOverwrite());
  }

  // The names in directory `dir` (not "." and ".."); errors name `what` and `shown`.
  static std::vector<std::string> names_in(int dir, const char* what, const std::string& shown) {
    int own = ::dup(dir);
    DIR* d = own < 0 ? nullptr : ::fdopendir(own);
    if (!d) {
      int err = errno;
      if (own >= 0) ::close(own);
      throw_errno(err, what, shown);
    }
    std::vector<std::string> names;
    while (auto* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) names.emplace_back(e->d_name);
    ::closedir(d);
    return names;
  }

  void walk(int dir, const std::string& prefix, bool recursive, bool hidden, std::uint32_t limit,
            std::vector<entry>& out, bool& truncated) {
    std::vector<std::string> subdirs;
    for (auto& name : names_in(dir, "list", prefix.empty() ? "/" : prefix)) {
      if (!hidden && name[0] == '.') continue;
      if (out.size() >= limit) {
        truncated = true;
        break;
      }
      entry item;
      item.path = prefix + "/" + name;
      if (::fstatat(dir, name.c_str(), &item.st, AT_SYMLINK_NOFOLLOW) < 0) continue;  // Gone meanwhile.
      if (S_ISLNK(item.st.st_mode)) item.target = read_link_at(dir, name);
      if (recursive && S_ISDIR(item.st.st_mode)) subdirs.push_back(name);
      out.push_back(std::move(item));
    }
    for (auto& name : subdirs) {
      if (truncated) return;
      unique_fd sub(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub.get() >= 0) walk(sub.get(), prefix + "/" + name, true, hidden, limit, out, truncated);
    }
  }

  // Removes `name` in `dir` and everything under it, never following a symlink.
  void remove_tree_at(int dir, const std::string& name, const std::string& shown, bool missing_ok = false) {
    if (::unlinkat(dir, name.c_str(), 0) == 0) return;
    if (errno == ENOENT && missing_ok) return;
    if (errno != EISDIR && errno != EPERM) throw_errno(errno, "remove", shown);
    {
      unique_fd sub(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub.get() < 0) throw_errno(errno, "remove", shown);
      for (auto& n : names_in(sub.get(), "remove", shown)) remove_tree_at(sub.get(), n, shown + "/" + n, true);
    }
    if (::unlinkat(dir, name.c_str(), AT_REMOVEDIR) < 0) throw_errno(errno, "remove", shown);
  }

  // Copies `name` in `from` (file, symlink or directory tree) to `to_name` in `to`.
  void copy_tree_at(int from, const std::string& name, int to, const std::string& to_name, const std::string& shown) {
    struct stat st {};
    if (::fstatat(from, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) throw_errno(errno, "move", shown);
    if (S_ISLNK(st.st_mode)) {
      if (::symlinkat(read_link_at(from, name).c_str(), to, to_name.c_str()) < 0) throw_errno(errno, "move", shown);
    } else if (S_ISDIR(st.st_mode)) {
      if (::mkdirat(to, to_name.c_str(), st.st_mode & 07777) < 0) throw_errno(errno, "move", shown);
      unique_fd src(::openat(from, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      unique_fd dst(::openat(to, to_name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (src.get() < 0 || dst.get() < 0) throw_errno(errno, "move", shown);
      for (auto& n : names_in(src.get(), "move", shown)) copy_tree_at(src.get(), n, dst.get(), n, shown + "/" + n);
    } else if (S_ISREG(st.st_mode)) {
      unique_fd in(::openat(from, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      unique_fd out(::openat(to, to_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, st.st_mode & 07777));
      if (in.get() < 0 || out.get() < 0) throw_errno(errno, "move", shown);
      std::vector<char> buf(chunk_bytes);  // On the heap: this recursion may go deep.
      ssize_t n;
      while ((n = ::read(in.get(), buf.data(), buf.size())) > 0)
        if (!write_all(out.get(), buf.data(), static_cast<std::size_t>(n))) throw_errno(errno, "move", shown);
      if (n < 0) throw_errno(errno, "move", shown);
    } else {
      throw_code("invalid_argument", "move " + shown + ": devices, FIFOs and sockets cannot be moved across filesystems");
    }
  }

  unique_fd root_;
};

}  // namespace

wire::Files::Client make_files() { return kj::heap<files_impl>(); }

}  // namespace warren::init
