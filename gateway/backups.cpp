// Backups of a sandbox's directories (Sandbox.backup / restoreBackup): tar + zstd made and
// unpacked *inside* the sandbox by its own tools, through the agent's exec, so the host
// never interprets the sandbox's files; the archive streams through the daemon into the
// blob store, hashed on the way in and checked before it is read back.
#include <kj/async-unix.h>
#include <kj/debug.h>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>

#include "gateway/rpc_server.hpp"
#include "wire/files.capnp.h"

extern char** environ;

namespace warren::gateway {
namespace {

constexpr std::uint64_t default_ttl_ms = 7ull * 24 * 3600 * 1000;
constexpr std::uint64_t max_ttl_ms = 365ull * 24 * 3600 * 1000;
constexpr std::uint64_t max_archive_bytes = 8ull << 30;
constexpr std::size_t max_excludes = 256;
constexpr std::size_t chunk_bytes = 256 * 1024;

std::string blob_name(const std::string& id) { return "backup-" + id + ".tar.zst"; }

std::uint64_t now_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

std::string random_id() {
  unsigned char b[16];
  if (::getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) throw to_kj(make_error(errc::internal, "getrandom"));
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (auto c : b) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

bool valid_backup_id(const std::string& id) {
  if (id.size() != 32) return false;
  for (char c : id)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

error validate_dir(const std::string& dir) {
  if (dir.empty() || dir[0] != '/' || dir == "/" || dir.size() > 4096 || dir.find('\0') != std::string::npos)
    return make_error(errc::invalid_argument, "the directory must be an absolute path other than / (got '" +
                                                  dir.substr(0, 200) + "')");
  return {};
}

// Where the archive goes: the blob store, with a size bound; stderr is kept (a little) for
// the error message.
class archive_sink final : public wire::OutputSink::Server {
 public:
  explicit archive_sink(std::unique_ptr<actors::blob_store::writer> w) : writer_(std::move(w)) {}

  kj::Promise<void> write(WriteContext context) override {
    auto p = context.getParams();
    auto data = p.getData();
    if (p.getFd() == 2) {
      stderr_.append(reinterpret_cast<const char*>(data.begin()), std::min<std::size_t>(data.size(), 2048 - std::min<std::size_t>(stderr_.size(), 2048)));
      return kj::READY_NOW;
    }
    if (failed) return kj::READY_NOW;
    bytes_ += data.size();
    if (bytes_ > max_archive_bytes) {
      failed = make_error(errc::too_large, "the archive would exceed 8 GiB: exclude more (excludes, respectGitignore)");
    } else if (auto e = writer_->write(data.begin(), data.size())) {
      failed = e;
    }
    if (failed) throw to_kj(failed);  // The agent stops sending (and the command is killed).
    return kj::READY_NOW;
  }
  kj::Promise<void> started(StartedContext) override { return kj::READY_NOW; }

  error failed;
  std::string stderr_;
  std::unique_ptr<actors::blob_store::writer> writer_;

 private:
  std::uint64_t bytes_ = 0;
};

// Feeds the archive to the unpacking command's stdin, once it runs.
class feed_sink final : public wire::OutputSink::Server {
 public:
  explicit feed_sink(std::unique_ptr<actors::blob_store::reader> r) : reader_(std::move(r)) {}

  kj::Promise<void> write(WriteContext context) override {
    auto p = context.getParams();
    if (p.getFd() == 2) {
      auto d = p.getData();
      stderr_.append(reinterpret_cast<const char*>(d.begin()), std::min<std::size_t>(d.size(), 2048 - std::min<std::size_t>(stderr_.size(), 2048)));
    }
    return kj::READY_NOW;
  }
  kj::Promise<void> started(StartedContext context) override {
    feeding_ = pump(context.getParams().getStdin()).eagerlyEvaluate([this](kj::Exception&& e) {
      feed_error_ = e.getDescription().cStr();
    });
    return kj::READY_NOW;
  }

  std::string stderr_, feed_error_;

 private:
  kj::Promise<void> pump(wire::ByteSink::Client sink) {
    auto buf = kj::heapArray<kj::byte>(chunk_bytes);
    std::size_t got = 0;
    if (auto e = reader_->read(buf.begin(), buf.size(), got)) return to_kj(e);
    if (got == 0) return sink.endRequest().send().ignoreResult();
    auto req = sink.writeRequest(capnp::MessageSize{got / 8 + 8, 0});
    req.setData(kj::arrayPtr(buf.begin(), got));
    return req.send().then([this, sink]() mutable { return pump(sink); });
  }

  std::unique_ptr<actors::blob_store::reader> reader_;
  kj::Promise<void> feeding_ = kj::READY_NOW;
};

void set_exec(wire::Agent::ExecParams::Builder call, const std::vector<std::string>& argv) {
  auto a = call.initArgv(static_cast<unsigned>(argv.size()));
  for (unsigned i = 0; i < argv.size(); ++i) a.set(i, argv[i]);
  auto env = call.initEnv(1);
  env.set(0, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  call.setCwd("/");
}

std::string short_error(const std::string& stderr_text) {
  auto s = stderr_text.substr(0, 400);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// tar's exit status 1: some files changed while they were read (archived as read).
constexpr const char* backup_script = R"SH(set -o pipefail
d=$1; shift
cd -- "$d" 2>/dev/null || { echo "no such directory: $d" >&2; exit 3; }
tar --create --file=- --numeric-owner --sparse "$@" . | zstd -q -3 -T0 -c
)SH";

// Unpacks beside the target and swaps it in only when complete.
constexpr const char* restore_script = R"SH(set -o pipefail
d=$1
parent=$(dirname -- "$d")
mkdir -p -- "$parent" || exit 3
tmp=$(mktemp -d -- "$parent/.warren-restore.XXXXXX") || exit 3
if zstd -q -d -c | tar --extract --file=- --numeric-owner --same-permissions -C "$tmp"; then
  rm -rf -- "$d" && mv -T -- "$tmp" "$d"
else
  rc=$?
  rm -rf -- "$tmp"
  exit $rc
fi
)SH";

}  // namespace

kj::Promise<actors::backup_info> make_backup(rpc_context& ctx, std::string name, std::uint64_t id, backup_request req) {
  if (!ctx.blobs) return to_kj(make_error(errc::unavailable, "this daemon has no blob store for backups"));
  if (auto e = validate_dir(req.dir)) return to_kj(e);
  if (req.excludes.size() > max_excludes)
    return to_kj(make_error(errc::invalid_argument, "at most " + std::to_string(max_excludes) + " excludes"));
  for (auto& x : req.excludes)
    if (x.empty() || x.size() > 1024 || x.find('\0') != std::string::npos)
      return to_kj(make_error(errc::invalid_argument, "an exclude pattern is empty, longer than 1024 bytes or holds NUL"));
  auto ttl = req.ttl_ms ? req.ttl_ms : default_ttl_ms;
  if (ttl < 1000 || ttl > max_ttl_ms) return to_kj(make_error(errc::invalid_argument, "ttlMs must be 1 s to 365 days"));

  auto backup_id = random_id();
  error err;
  auto writer = ctx.blobs->create(blob_name(backup_id), err);
  if (!writer) return to_kj(err);
  std::vector<std::string> argv = {"/bin/bash", "--noprofile", "--norc", "-c", backup_script, "warren-backup", req.dir};
  if (req.respect_gitignore) argv.push_back("--exclude-vcs-ignores");
  for (auto& x : req.excludes) argv.push_back("--exclude=" + x);
  auto sink = kj::heap<archive_sink>(std::move(writer));
  auto* s = sink.get();
  // Shared: with_held_agent takes a copyable function, and capabilities are move-only.
  auto sink_client = std::make_shared<wire::OutputSink::Client>(kj::mv(sink));
  auto started = std::chrono::steady_clock::now();
  auto result = kj::heap<std::pair<int, int>>(0, 0);
  auto* res = result.get();
  return with_held_agent(ctx, name, id,
                         [argv, sink_client, res](wire::Agent::Client& agent) mutable {
                           auto call = agent.execRequest();
                           set_exec(call, argv);
                           call.setSink(*sink_client);
                           return call.send().then([res](auto r) {
                             res->first = r.getStatus().getExitCode();
                             res->second = r.getStatus().getSignal();
                           });
                         })
      .then(
          [&ctx, s, res, sink_client, req, name, id, backup_id, ttl, started]() mutable -> kj::Promise<actors::backup_info> {
            if (s->failed) return to_kj(s->failed);
            if (res->first == 3) return to_kj(make_error(errc::not_found, short_error(s->stderr_)));
            if (res->first != 0 && res->first != 1)
              return to_kj(make_error(errc::internal, "archiving " + req.dir + " failed (exit " + std::to_string(res->first) +
                                                          (res->second ? ", signal " + std::to_string(res->second) : "") +
                                                          "): " + short_error(s->stderr_)));
            actors::backup_info b;
            b.id = backup_id;
            b.sandbox = name;
            b.sandbox_id = id;
            b.dir = req.dir;
            if (auto e = s->writer_->commit(b.sha256, b.bytes)) return to_kj(e);
            b.expires_at_ms = now_ms() + ttl;
            auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
            spdlog::info("event=backup_made sandbox={} backup={} bytes={} ms={}", name, backup_id, b.bytes, ms);
            // Journaled after the archive is durable: a crash in between leaves an orphan
            // archive, which the next start removes.
            return ctx.calls.call<actors::backup_info>([&ctx, b](auto cb) { ctx.core.record_backup(b, std::move(cb)); });
          })
      .attach(kj::mv(result));
}

kj::Promise<void> restore_backup(rpc_context& ctx, std::string name, std::uint64_t id, std::string backup_id,
                                 std::string dir) {
  if (!ctx.blobs) return to_kj(make_error(errc::unavailable, "this daemon has no blob store for backups"));
  if (!valid_backup_id(backup_id)) return to_kj(make_error(errc::invalid_argument, "backup ids are 32 hex characters"));
  if (!dir.empty())
    if (auto e = validate_dir(dir)) return to_kj(e);
  return ctx.calls.call<std::vector<actors::backup_info>>([&ctx](auto cb) { ctx.core.backups(std::move(cb)); })
      .then([&ctx, name, id, backup_id, dir](std::vector<actors::backup_info> all) mutable -> kj::Promise<void> {
        const actors::backup_info* found = nullptr;
        for (auto& b : all)
          if (b.id == backup_id) found = &b;
        if (!found || found->expires_at_ms <= now_ms())
          return to_kj(make_error(errc::not_found, "no backup " + backup_id + " (unknown or expired)"));
        if (dir.empty()) dir = found->dir;
        // The whole archive is checked before anything in the sandbox is touched.
        error err;
        auto reader = ctx.blobs->open_verified(blob_name(backup_id), found->sha256, err);
        if (!reader) return to_kj(err);
        auto feed = kj::heap<feed_sink>(std::move(reader));
        auto* f = feed.get();
        auto feed_client = std::make_shared<wire::OutputSink::Client>(kj::mv(feed));
        auto result = kj::heap<int>(0);
        auto* res = result.get();
        std::vector<std::string> argv = {"/bin/bash", "--noprofile", "--norc", "-c", restore_script, "warren-restore", dir};
        return with_held_agent(ctx, name, id,
                               [argv, feed_client, res](wire::Agent::Client& agent) mutable {
                                 auto call = agent.execRequest();
                                 set_exec(call, argv);
                                 call.setSink(*feed_client);
                                 call.setStdinStream(true);
                                 return call.send().then([res](auto r) { *res = r.getStatus().getExitCode(); });
                               })
            .then([f, res, feed_client, name, backup_id, dir]() -> kj::Promise<void> {
              if (*res != 0)
                return to_kj(make_error(errc::internal, "unpacking backup " + backup_id + " into " + dir + " failed (exit " +
                                                            std::to_string(*res) + "): " + short_error(f->stderr_) +
                                                            (f->feed_error_.empty() ? "" : " / " + f->feed_error_) +
                                                            "; the directory was left as it was"));
              spdlog::info("event=backup_restored sandbox={} backup={}", name, backup_id);
              return kj::READY_NOW;
            })
            .attach(kj::mv(result));
      });
}

namespace {

// A child process with pipes for stdin (optional), stdout (optional) and stderr; its exit
// through KJ's child watch (the daemon captures SIGCHLD).
struct piped_child {
  pid_t pid = -1;
  kj::Maybe<pid_t> slot;
  kj::Promise<int> exited = nullptr;
  kj::Own<kj::AsyncOutputStream> in;
  kj::Own<kj::AsyncInputStream> out, err;
};

kj::Own<piped_child> spawn_piped(kj::AsyncIoContext& io, const std::vector<std::string>& argv, bool with_in,
                                 bool with_out, error& err) {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {in[0], in[1], out[0], out[1], errp[0], errp[1]})
      if (fd >= 0) ::close(fd);
  };
  if ((with_in && ::pipe2(in, O_CLOEXEC) < 0) || (with_out && ::pipe2(out, O_CLOEXEC) < 0) || ::pipe2(errp, O_CLOEXEC) < 0) {
    err = make_error(errc::internal, std::string("pipe2: ") + std::strerror(errno));
    close_all();
    return kj::Own<piped_child>();
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (with_in) posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  else posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (with_out) posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  else posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  auto c = kj::heap<piped_child>();
  int rc = ::posix_spawnp(&c->pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    err = make_error(errc::internal, argv[0] + ": " + std::strerror(rc));
    close_all();
    return kj::Own<piped_child>();
  }
  c->slot = c->pid;
  c->exited = io.unixEventPort.onChildExit(c->slot);  // Right after the spawn (KJ's rule).
  constexpr auto own = kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP | kj::LowLevelAsyncIoProvider::ALREADY_CLOEXEC;
  if (with_in) {
    ::close(in[0]);
    c->in = io.lowLevelProvider->wrapOutputFd(in[1], own);
  }
  if (with_out) {
    ::close(out[1]);
    c->out = io.lowLevelProvider->wrapInputFd(out[0], own);
  }
  ::close(errp[1]);
  c->err = io.lowLevelProvider->wrapInputFd(errp[0], own);
  return c;
}

kj::Promise<void> drain_into(kj::AsyncInputStream& in, actors::blob_store::writer& w, kj::Array<kj::byte> buf) {
  auto* p = buf.begin();
  auto n = buf.size();
  auto* ip = &in;
  auto* wp = &w;
  return in.tryRead(p, 1, n).then([ip, wp, buf = kj::mv(buf)](std::size_t got) mutable -> kj::Promise<void> {
    if (got == 0) return kj::READY_NOW;
    if (auto e = wp->write(buf.begin(), got)) return to_kj(e);
    return drain_into(*ip, *wp, kj::mv(buf));
  });
}

// The reader is shared into every continuation: it must live until the last chunk is read
// (with a reference captured instead, the daemon crashed reading the second chunk).
kj::Promise<void> feed_from(std::shared_ptr<actors::blob_store::reader> r, kj::AsyncOutputStream& out,
                            kj::Array<kj::byte> buf) {
  std::size_t got = 0;
  if (auto e = r->read(buf.begin(), buf.size(), got)) return to_kj(e);
  if (got == 0) return kj::READY_NOW;
  auto* p = buf.begin();
  auto* o = &out;
  return out.write(p, got).then([r, o, buf = kj::mv(buf)]() mutable { return feed_from(r, *o, kj::mv(buf)); });
}

bool valid_export_name(const std::string& name) {
  if (name.rfind("snapshot-", 0) != 0 || name.size() < 16 || name.size() > 128 ||
      name.compare(name.size() - 6, 6, ".btrfs") != 0)
    return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  return true;
}

}  // namespace

kj::Promise<snapshot_export> export_snapshot(rpc_context& ctx, std::uint64_t snapshot_id) {
  if (!ctx.blobs || !ctx.io) return to_kj(make_error(errc::unavailable, "this daemon has no blob store"));
  return ctx.calls.call<std::vector<actors::snapshot_info>>([&ctx](auto cb) { ctx.core.list_snapshots(std::move(cb)); })
      .then([&ctx, snapshot_id](std::vector<actors::snapshot_info> all) -> kj::Promise<snapshot_export> {
        std::string dir;
        for (auto& s : all)
          if (s.id == snapshot_id) dir = s.dir;
        if (dir.empty()) return to_kj(make_error(errc::not_found, "no snapshot " + std::to_string(snapshot_id)));
        auto name = "snapshot-" + std::to_string(snapshot_id) + "-" + random_id().substr(0, 8) + ".btrfs";
        error err;
        auto writer = ctx.blobs->create(name, err);
        if (!writer) return to_kj(err);
        auto child = spawn_piped(*ctx.io, {"btrfs", "send", "-q", dir}, false, true, err);
        if (child.get() == nullptr) return to_kj(err);
        auto& c = *child;
        auto& w = *writer;
        auto stderr_text = c.err->readAllText(4096);
        return drain_into(*c.out, w, kj::heapArray<kj::byte>(chunk_bytes))
            .then([&c, stderr_text = kj::mv(stderr_text)]() mutable { return stderr_text.then([&c](kj::String e) mutable {
              return c.exited.then([e = kj::mv(e)](int status) mutable { return std::make_pair(status, std::string(e.cStr())); });
            }); })
            .then([&w, name, snapshot_id](std::pair<int, std::string> done) -> kj::Promise<snapshot_export> {
              if (!WIFEXITED(done.first) || WEXITSTATUS(done.first) != 0)
                return to_kj(make_error(errc::internal, "btrfs send failed: " + short_error(done.second)));
              snapshot_export x;
              x.blob = name;
              if (auto e = w.commit(x.sha256, x.bytes)) return to_kj(e);
              spdlog::info("event=snapshot_exported snapshot={} blob={} bytes={}", snapshot_id, name, x.bytes);
              return x;
            })
            .attach(kj::mv(child), kj::mv(writer));
      });
}

kj::Promise<actors::snapshot_info> import_snapshot(rpc_context& ctx, std::string blob, std::string sha256,
                                                   std::string label) {
  if (!ctx.blobs || !ctx.io) return to_kj(make_error(errc::unavailable, "this daemon has no blob store"));
  if (!valid_export_name(blob))
    return to_kj(make_error(errc::invalid_argument, "not the name of a snapshot export (snapshot-ID-XXXXXXXX.btrfs)"));
  if (sha256.size() != 64 || sha256.find_first_not_of("0123456789abcdef") != std::string::npos)
    return to_kj(make_error(errc::invalid_argument, "sha256 must be 64 lower-case hex characters"));
  // The whole stream is checked before btrfs receive sees a byte of it.
  error err;
  auto reader = ctx.blobs->open_verified(blob, sha256, err);
  if (!reader) return to_kj(err);
  auto shared_reader = std::shared_ptr<actors::blob_store::reader>(std::move(reader));
  return ctx.calls.call<actors::snapshot_info>([&ctx, label](auto cb) { ctx.core.begin_import(label, std::move(cb)); })
      .then([&ctx, shared_reader](actors::snapshot_info staged) -> kj::Promise<actors::snapshot_info> {
        auto parent = staged.dir.substr(0, staged.dir.rfind('/'));
        if ((::mkdir(parent.c_str(), 0700) < 0 && errno != EEXIST) || ::mkdir(staged.dir.c_str(), 0700) < 0)
          return to_kj(make_error(errc::internal, "cannot create " + staged.dir + ": " + std::strerror(errno)));
        error err;
        // Confined to the staging directory; -e: stop at the stream's end marker.
        auto child = spawn_piped(*ctx.io, {"btrfs", "receive", "-q", "-e", "--chroot", staged.dir}, true, false, err);
        if (child.get() == nullptr) {
          ctx.host.remove_snapshot(staged.dir);
          return to_kj(err);
        }
        auto& c = *child;
        auto stderr_text = c.err->readAllText(4096);
        auto fed = feed_from(shared_reader, *c.in, kj::heapArray<kj::byte>(chunk_bytes))
                       .then([&c]() { c.in = nullptr; })  // EOF for btrfs receive.
                       .catch_([&c](kj::Exception&&) { c.in = nullptr; });
        return fed.then([&c, stderr_text = kj::mv(stderr_text)]() mutable {
                    return stderr_text.then([&c](kj::String e) mutable {
                      return c.exited.then(
                          [e = kj::mv(e)](int status) mutable { return std::make_pair(status, std::string(e.cStr())); });
                    });
                  })
            .then([&ctx, staged](std::pair<int, std::string> done) mutable -> kj::Promise<actors::snapshot_info> {
              if (!WIFEXITED(done.first) || WEXITSTATUS(done.first) != 0) {
                ctx.host.remove_snapshot(staged.dir);
                return to_kj(make_error(errc::invalid_argument, "the archive is not a snapshot this daemon can take "
                                                                "(btrfs receive: " + short_error(done.second) + ")"));
              }
              return ctx.calls.call<actors::snapshot_info>(
                  [&ctx, staged](auto cb) { ctx.core.finish_import(staged, std::move(cb)); });
            })
            .attach(kj::mv(child), shared_reader);
      });
}

kj::Promise<void> sweep_backups(rpc_context& ctx, bool orphans) {
  if (!ctx.blobs) return kj::READY_NOW;
  return ctx.calls.call<std::vector<actors::backup_info>>([&ctx](auto cb) { ctx.core.backups(std::move(cb)); })
      .then([&ctx, orphans](std::vector<actors::backup_info> all) {
        auto now = now_ms();
        auto deletions = kj::heapArrayBuilder<kj::Promise<void>>(all.size());
        for (auto& b : all) {
          if (b.expires_at_ms > now) continue;
          auto id = b.id;
          deletions.add(ctx.calls.call<bool>([&ctx, id](auto cb) { ctx.core.delete_backup(id, std::move(cb)); })
                            .then([&ctx, id](bool) {
                              if (auto e = ctx.blobs->remove(blob_name(id)))
                                spdlog::warn("event=backup_archive_left backup={} reason=\"{}\"", id, e.message);
                              spdlog::info("event=backup_expired backup={}", id);
                            }));
        }
        if (orphans) {
          for (auto& blob : ctx.blobs->list()) {
            bool known = false;
            for (auto& b : all) known = known || blob == blob_name(b.id);
            if (known || blob.rfind("backup-", 0) != 0) continue;  // Snapshot exports are the operator's.
            spdlog::info("event=orphan_archive_removed blob={}", blob);
            ctx.blobs->remove(blob);
          }
        }
        return kj::joinPromises(deletions.finish());
      })
      .catch_([](kj::Exception&& e) { spdlog::warn("event=backup_sweep_failed reason=\"{}\"", e.getDescription().cStr()); });
}

}  // namespace warren::gateway
