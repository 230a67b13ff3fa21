// warrend: the warren daemon. Parses flags and the optional config file, checks the host,
// opens the journal, prepares the base image, and hands over to the gateway's event loop.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "actors/core.hpp"
#include "gateway/cgroups.hpp"
#include "gateway/gateway.hpp"
#include "storage/base_image.hpp"
#include "storage/blobs.hpp"
#include "storage/disk_pool.hpp"
#include "storage/journal.hpp"
#include "storage/layout.hpp"
#include "wire/names.hpp"

namespace {

constexpr const char* usage = R"(usage: warrend [options]

Runs the warren daemon: named, isolated, persistent Linux sandboxes served over Cap'n Proto
RPC. Must run as root.

options (each may also be set in the config file as `name = value`):
  --config FILE       read options from FILE first (flags override it)
  --data-dir DIR      where journal, base image and sandbox layers live
                      (default: /var/lib/warren)
  --socket PATH       unix socket of the API, mode 0600 (default: /run/warren/warren.sock)
  --listen HOST:PORT  also serve the API on TCP, behind a bearer token (default: off)
  --token-file FILE   file holding the bearer token for --listen (required with it) and for
                      terminals over WebSocket on the HTTP listener (off without it)
  --web-dir DIR       browser assets of the terminal page (npm's node_modules with
                      @xterm/xterm; default: ../web next to warrend, where tools/dev puts them)
  --http-listen HOST:PORT  HTTP listener of preview URLs (exposed sandbox ports);
                      port 0 picks a free one; `off`: none (default: 127.0.0.1:7480)
  --preview-domain D  preview URLs are http://{port}-{sandbox}-{token}.D:{http port}/;
                      D needs wildcard DNS to this machine unless it is localhost
                      (default: localhost)
  --log-level LEVEL   trace, debug, info, warn or error (default: info)
  --init PATH         the warren-init binary (default: next to warrend)
  --sandbox-memory SIZE  memory limit of each sandbox, e.g. 512M, 4G; 0 = none (default: 4G)
  --sandbox-pids N       process/thread limit of each sandbox; 0 = none (default: 4096)
  --sandbox-cpus N       CPU limit of each sandbox in CPUs, e.g. 0.5, 2; 0 = none (default: 0)
  --sandbox-uid-base N   first host user id lent to sandboxes; each running sandbox
                         gets 65536 ids of its own (default: 1879048192 = 0x70000000)
  --sandbox-uid-ranges N how many sandboxes may run at once, i.e. ranges of 65536 ids
                         after the base (default: 4094, up to 0x7FFE0000)
  --sandbox-disk SIZE    most a sandbox's writable layer may hold, e.g. 20G; 0 = no
                         limit of its own (default: 10G)
  --disk-pool SIZE    size of the disk pool image (<data-dir>/disk.img, sparse) that holds
                      every sandbox's files, with a quota each; fixed when first made;
                      `off`: sandbox files go on the data dir's filesystem without limits
                      (default: 90% of the free space when the pool is first made)
  --jail MODE         full (default); no-userns, no-seccomp or namespaces-only turn layers
                      of the jail off, to measure what each costs (never in production)
  --version           print the version and exit
  --help              print this help and exit
)";

constexpr const char* version = "0.1.0";

struct settings {
  std::map<std::string, std::string> values = {
      {"data-dir", "/var/lib/warren"}, {"socket", "/run/warren/warren.sock"}, {"listen", ""},
      {"token-file", ""},              {"web-dir", ""},              {"log-level", "info"},                {"init", ""},
      {"sandbox-memory", "4G"},        {"sandbox-pids", "4096"},             {"sandbox-cpus", "0"},
      {"sandbox-uid-base", "1879048192"}, {"sandbox-uid-ranges", "4094"},     {"jail", "full"},
      {"sandbox-disk", "10G"},         {"disk-pool", "auto"},
      {"http-listen", "127.0.0.1:7480"}, {"preview-domain", "localhost"},
  };
};

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "warrend: %s\n", msg.c_str());
  std::exit(2);
}

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

void read_config(const std::string& path, settings& s) {
  std::ifstream in(path);
  if (!in) die("cannot read config file " + path + ": " + std::strerror(errno));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find('=');
    if (eq == std::string::npos) die(path + ":" + std::to_string(n) + ": expected `name = value`");
    auto key = trim(line.substr(0, eq));
    auto value = trim(line.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    if (!s.values.count(key)) die(path + ":" + std::to_string(n) + ": unknown option '" + key + "'");
    s.values[key] = value;
  }
}

settings parse_args(int argc, char** argv) {
  settings s;
  std::map<std::string, std::string> flags;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(usage, stdout);
      std::exit(0);
    }
    if (a == "--version") {
      std::printf("warrend %s\n", version);
      std::exit(0);
    }
    if (a.rfind("--", 0) != 0) die("unexpected argument '" + a + "' (see --help)");
    auto eq = a.find('=');
    std::string key = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2), value;
    if (eq != std::string::npos) value = a.substr(eq + 1);
    else if (i + 1 < argc) value = argv[++i];
    else die("option --" + key + " needs a value");
    if (key != "config" && !s.values.count(key)) die("unknown option --" + key + " (see --help)");
    flags[key] = value;
  }
  if (flags.count("config")) read_config(flags["config"], s);
  for (auto& [k, v] : flags)
    if (k != "config") s.values[k] = v;
  return s;
}

std::string self_dir() {
  char buf[4096];
  auto n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<std::size_t>(n));
  return p.substr(0, p.rfind('/'));
}

// What the host must offer; each failure says what is missing.
std::optional<std::string> check_host(const std::string& init_path) {
  if (::geteuid() != 0)
    return std::string("warrend must run as root: it creates namespaces, mounts and cgroups for "
                       "sandboxes (run it with sudo)");
  std::ifstream fs("/proc/filesystems");
  std::string all((std::istreambuf_iterator<char>(fs)), std::istreambuf_iterator<char>());
  if (all.find("\toverlay\n") == std::string::npos)
    return std::string("the kernel has no overlayfs (try `modprobe overlay`); sandboxes need it for "
                       "their root filesystem");
  std::ifstream userns_max("/proc/sys/user/max_user_namespaces");
  long max_userns = 0;
  if (!(userns_max >> max_userns) || max_userns < 1)
    return std::string("the kernel allows no user namespaces (/proc/sys/user/max_user_namespaces is 0 or missing); "
                       "sandboxes run in one so that root inside is not root outside");
  for (auto ns : {"mnt", "pid", "net", "uts", "ipc", "user"}) {
    auto path = std::string("/proc/self/ns/") + ns;
    if (::access(path.c_str(), F_OK) != 0)
      return "the kernel has no " + std::string(ns) + " namespaces (" + path + " is missing)";
  }
  if (!warren::gateway::find_cgroup2_root())
    return std::string("no cgroup2 hierarchy is mounted (expected /sys/fs/cgroup or /sys/fs/cgroup/unified); "
                       "sandboxes need it to track and kill their processes");
  if (::access(init_path.c_str(), X_OK) != 0)
    return "the sandbox init " + init_path + " is missing or not executable: " + std::strerror(errno) +
           " (build it, or pass --init)";
  return std::nullopt;
}

std::string read_token(const std::string& path) {
  std::ifstream in(path);
  if (!in) die("cannot read token file " + path + ": " + std::strerror(errno));
  std::string token;
  std::getline(in, token);
  token = trim(token);
  if (token.size() < 16) die("the token in " + path + " is shorter than 16 characters; use a long random one");
  return token;
}

// "512M", "4G", "1048576" -> bytes.
std::uint64_t parse_size(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  double n = std::strtod(v.c_str(), &end);
  std::string unit(end);
  double scale = unit.empty() ? 1 : unit == "K" || unit == "k" ? 1024.0 : unit == "M" || unit == "m" ? 1048576.0
                                   : unit == "G" || unit == "g" ? 1073741824.0 : -1;
  if (end == v.c_str() || n < 0 || scale < 0) die("--" + flag + " takes a size like 512M or 4G, got '" + v + "'");
  return static_cast<std::uint64_t>(n * scale);
}

std::uint64_t parse_number(const std::string& flag, const std::string& v, double scale) {
  char* end = nullptr;
  double n = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || n < 0) die("--" + flag + " takes a number, got '" + v + "'");
  return static_cast<std::uint64_t>(n * scale);
}

// The gateway sees the disk pool through the runtime's interface.
struct pool_quota final : warren::actors::disk_quota {
  explicit pool_quota(warren::storage::disk_pool& p) : pool(p) {}
  warren::error prepare(std::uint64_t id, const std::string& dir, std::uint64_t limit) override {
    return pool.apply(id, dir, limit);
  }
  warren::error set_limit(std::uint64_t id, std::uint64_t limit) override { return pool.set_limit(id, limit); }
  warren::error snapshot(const std::string& src, const std::string& dst, bool read_only) override {
    return pool.snapshot(src, dst, read_only);
  }
  warren::error remove(const std::string& dir) override { return pool.remove_subvolume(dir); }
  bool usage(std::uint64_t id, std::uint64_t& used, std::uint64_t& limit) override {
    auto u = pool.usage(id);
    if (!u) return false;
    used = u->used_bytes;
    limit = u->limit_bytes;
    return true;
  }
  warren::storage::disk_pool& pool;
};

// The gateway sees the blob store through the runtime's interface.
struct local_blob_store final : warren::actors::blob_store {
  explicit local_blob_store(std::unique_ptr<warren::storage::local_blobs> b) : blobs(std::move(b)) {}
  struct writer_adapter final : writer {
    std::unique_ptr<warren::storage::local_blobs::writer> w;
    warren::error write(const void* data, std::size_t n) override { return w->write(data, n); }
    warren::error commit(std::string& sha, std::uint64_t& bytes) override { return w->commit(sha, bytes); }
  };
  struct reader_adapter final : reader {
    std::unique_ptr<warren::storage::local_blobs::reader> r;
    warren::error read(void* buf, std::size_t max, std::size_t& got) override { return r->read(buf, max, got); }
  };
  std::unique_ptr<writer> create(const std::string& name, warren::error& err) override {
    auto w = blobs->create(name, err);
    if (!w) return nullptr;
    auto a = std::make_unique<writer_adapter>();
    a->w = std::move(w);
    return a;
  }
  std::unique_ptr<reader> open_verified(const std::string& name, const std::string& sha, warren::error& err) override {
    auto r = blobs->open_verified(name, sha, err);
    if (!r) return nullptr;
    auto a = std::make_unique<reader_adapter>();
    a->r = std::move(r);
    return a;
  }
  warren::error remove(const std::string& name) override { return blobs->remove(name); }
  std::vector<std::string> list() override { return blobs->list(); }
  std::unique_ptr<warren::storage::local_blobs> blobs;
};

// Whether processes' memory could go into snapshots (CRIU): what this host has, for the
// log and for the `unsupported` answer. Runs before any thread exists.
std::string probe_criu() {
  const std::string need = "live process snapshots need CRIU 4.0 or newer";
  std::FILE* p = ::popen("criu --version 2>/dev/null", "r");
  std::string out;
  if (p) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
  }
  auto at = out.find("Version: ");
  if (at == std::string::npos) return "CRIU is not installed (" + need + ")";
  auto version = out.substr(at + 9, out.find('\n', at) - at - 9);
  if (std::atoi(version.c_str()) < 4)
    return "CRIU " + version + " is installed; " + need + " (Debian 12's 3.17 fails on this kernel)";
  return "CRIU " + version + " is installed, but warren does not take live process snapshots yet";
}

std::uint32_t fnv1a(const std::string& s) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  auto s = parse_args(argc, argv);
  auto& v = s.values;

  auto logger = spdlog::stderr_color_mt("warrend");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e level=%l %v");
  spdlog::set_default_logger(logger);
  auto level = spdlog::level::from_str(v["log-level"]);
  if (level == spdlog::level::off && v["log-level"] != "off") die("unknown log level '" + v["log-level"] + "'");
  spdlog::set_level(level);

  std::string init_path = v["init"].empty() ? self_dir() + "/warren-init" : v["init"];
  if (auto problem = check_host(init_path)) die(*problem);

  auto memory_bytes = parse_size("sandbox-memory", v["sandbox-memory"]);
  auto pids_max = parse_number("sandbox-pids", v["sandbox-pids"], 1);
  auto cpu_millis = parse_number("sandbox-cpus", v["sandbox-cpus"], 1000);
  auto uid_base = parse_number("sandbox-uid-base", v["sandbox-uid-base"], 1);
  auto uid_ranges = parse_number("sandbox-uid-ranges", v["sandbox-uid-ranges"], 1);
  if (uid_base < 65536 || uid_ranges == 0 || uid_base + uid_ranges * 65536 > 0xFFFFFFFFull)
    die("--sandbox-uid-base and --sandbox-uid-ranges must describe ids between 65536 and 2^32-1 "
        "(base >= 65536, at least one range)");
  auto disk_bytes = parse_size("sandbox-disk", v["sandbox-disk"]);
  bool use_pool = v["disk-pool"] != "off";
  std::uint64_t pool_bytes = 0;
  if (use_pool && v["disk-pool"] != "auto") pool_bytes = parse_size("disk-pool", v["disk-pool"]);
  auto jail = v["jail"];
  if (jail != "full" && jail != "no-userns" && jail != "no-seccomp" && jail != "namespaces-only")
    die("--jail takes full, no-userns, no-seccomp or namespaces-only, got '" + jail + "'");

  std::string token;
  if (!v["listen"].empty() && v["token-file"].empty())
    die("--listen needs --token-file: the TCP API is never open without a token");
  if (!v["token-file"].empty()) token = read_token(v["token-file"]);  // Also for terminals over HTTP.

  // Each running sandbox holds a socket; the soft limit (often 1024) would cap the daemon
  // far below its design density, so take the hard limit.
  struct rlimit files;
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }

  // Signals must be captured before any thread exists (RocksDB and the journal start some),
  // and so must a mount namespace of our own: the disk pool's mount (and anything else the
  // daemon mounts) then vanishes with the daemon, however it ends.
  warren::gateway::prepare_process();
  if (auto e = warren::storage::enter_private_mount_namespace()) die(e.message);

  warren::storage::layout layout;
  if (auto e = warren::storage::prepare_layout(v["data-dir"], layout)) die(e.message);
  if (auto e = warren::storage::ensure_base_image(layout.base_dir())) die(e.message);

  warren::error err;
  auto journal = warren::storage::journal::open({layout.journal_dir(), true}, err);
  if (!journal) die(err.message);

  // After the journal: its lock guarantees that no other daemon uses this data dir.
  std::unique_ptr<warren::storage::disk_pool> pool;
  if (use_pool) {
    auto image = layout.data_dir + "/disk.img";
    std::error_code ec;
    if (!std::filesystem::exists(image) && !std::filesystem::is_empty(layout.sandboxes_dir(), ec)) {
      spdlog::warn("event=disk_limits_off reason=\"{} holds sandboxes made before the disk pool; they stay on "
                   "the data dir's filesystem without disk limits (recreate them, or start with an empty data dir)\"",
                   layout.sandboxes_dir());
    } else {
      if (pool_bytes == 0) pool_bytes = warren::storage::default_pool_size(layout.data_dir);
      pool = warren::storage::disk_pool::open(image, layout.sandboxes_dir(), pool_bytes, err);
      if (!pool) die(err.message + " (or start with --disk-pool off: no disk limits)");
      spdlog::info("event=disk_pool image={} device={} size_bytes={} sandbox_disk_bytes={}", image, pool->device(),
                   pool->size_bytes(), disk_bytes);
    }
  }

  warren::gateway::gateway_options g;
  g.socket_path = v["socket"];
  g.tcp_listen = v["listen"];
  g.http_listen = v["http-listen"] == "off" ? "" : v["http-listen"];
  g.preview_domain = v["preview-domain"];
  if (auto e = warren::wire::validate_preview_domain(g.preview_domain)) die(e.message);
  g.token = token;
  g.init_path = init_path;
  char tag[16];
  std::snprintf(tag, sizeof tag, "%08x", fnv1a(layout.data_dir));
  g.cgroup_root = *warren::gateway::find_cgroup2_root();
  g.cgroup_name = std::string("warren-") + tag;
  g.sandbox_memory_bytes = memory_bytes;
  g.sandbox_pids_max = pids_max;
  g.sandbox_cpu_millis = cpu_millis;
  std::unique_ptr<pool_quota> quota;
  if (pool) quota = std::make_unique<pool_quota>(*pool);
  g.disk = quota.get();
  g.web_dir = v["web-dir"];
  if (g.web_dir.empty()) {
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    g.web_dir = exe.parent_path().parent_path().string() + "/web";
  }
  g.live_snapshot_note = probe_criu();
  spdlog::info("event=live_snapshots supported=false reason=\"{}\"", g.live_snapshot_note);
  warren::error blob_err;
  auto local_blobs = warren::storage::local_blobs::open(layout.blobs_dir(), blob_err);
  if (!local_blobs) die(blob_err.message);
  local_blob_store blobs(std::move(local_blobs));
  g.blobs = &blobs;
  g.sandbox_disk_bytes = disk_bytes;
  g.sandbox_uid_base = static_cast<std::uint32_t>(uid_base);
  g.sandbox_uid_ranges = static_cast<std::uint32_t>(uid_ranges);
  g.user_namespace = jail == "full" || jail == "no-seccomp";
  g.seccomp = jail == "full" || jail == "no-userns";
  g.version = version;
  spdlog::info("event=daemon_starting version={} data_dir={} cgroup={}/{}", version, layout.data_dir, g.cgroup_root,
               g.cgroup_name);

  int code = warren::gateway::run(g, [&](warren::actors::sandbox_runtime& runtime, warren::error& e) {
    return warren::actors::core::start(warren::actors::core_options{}, *journal, layout, runtime, e);
  });
  journal.reset();
  pool.reset();
  return code;
}
