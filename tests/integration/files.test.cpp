// The files API end to end (Sandbox.files(), wire/files.capnp) over a real daemon, and the
// CLI's cp / cat / ls-files. Attack tests try to leave the sandbox's root through paths.
#include <catch2/catch.hpp>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "integration/api.hpp"
#include "integration/harness.hpp"
#include "wire/files.capnp.h"
#include "wire/warren.capnp.h"

using namespace warren::testing;
namespace fs = std::filesystem;
using warren::wire::FileType;
using warren::wire::Files;

namespace {

std::string write(api& a, Files::Client& f, const std::string& path, const std::string& content, std::uint32_t mode = 0,
                  bool parents = false, bool no_overwrite = false) {
  auto req = f.writeFileRequest();
  req.setPath(path);
  req.setData(bytes(content));
  auto o = req.initOptions();
  o.setMode(mode);
  o.setMakeParents(parents);
  o.setNoOverwrite(no_overwrite);
  return a.error_of(req);
}

std::string read(api& a, Files::Client& f, const std::string& path, std::uint64_t offset = 0, std::uint64_t length = 0) {
  auto req = f.readFileRequest();
  req.setPath(path);
  req.setOffset(offset);
  req.setLength(length);
  return text(req.send().wait(a.io.waitScope).getData());
}

std::string read_error(api& a, Files::Client& f, const std::string& path) {
  auto req = f.readFileRequest();
  req.setPath(capnp::Text::Reader(path.data(), path.size()));  // NULs included.
  return a.error_of(req);
}

bool exists(api& a, Files::Client& f, const std::string& path) {
  auto req = f.existsRequest();
  req.setPath(path);
  return req.send().wait(a.io.waitScope).getExists();
}

run_result sh(const warrend_process& d, const std::string& name, const std::string& line) {
  return d.warren({"exec", name, "--", "sh", "-c", line});
}

}  // namespace

TEST_CASE("files: write, read, stat, list, mkdir, rename and remove, seen by processes at once", "[files]") {
  warrend_process d;
  api a(d);
  auto f = a.files("f");

  CHECK(write(a, f, "notes.txt", "hello files\n") == "");  // Relative: under /workspace.
  CHECK(sh(d, "f", "cat /workspace/notes.txt").out == "hello files\n");
  REQUIRE(sh(d, "f", "printf 'from a process' > /workspace/p.txt && chmod 600 /workspace/p.txt").code == 0);
  CHECK(read(a, f, "/workspace/p.txt") == "from a process");
  CHECK(read(a, f, "p.txt", 5, 2) == "a ");
  CHECK(read(a, f, "p.txt", 5) == "a process");

  // Overwrite keeps the mode unless one is given; a new mode applies.
  CHECK(write(a, f, "p.txt", "replaced") == "");
  CHECK(sh(d, "f", "stat -c %a /workspace/p.txt; cat /workspace/p.txt").out == "600\nreplaced");
  CHECK(write(a, f, "run.sh", "#!/bin/sh\necho ran\n", 0755) == "");
  CHECK(sh(d, "f", "/workspace/run.sh").out == "ran\n");
  CHECK(write(a, f, "deep/er/file.json", "{}", 0, true) == "");
  CHECK(sh(d, "f", "cat /workspace/deep/er/file.json").out == "{}");

  auto st = f.statRequest();
  st.setPath("deep/er/file.json");
  auto info = st.send().wait(a.io.waitScope).getInfo();
  CHECK(std::string(info.getPath().cStr()) == "/workspace/deep/er/file.json");
  CHECK(info.getType() == FileType::FILE);
  CHECK(info.getSize() == 2);
  CHECK(std::string(info.getMimeType().cStr()) == "application/json");
  CHECK_FALSE(info.getIsBinary());
  REQUIRE(sh(d, "f", "head -c 100 /dev/urandom > /workspace/blob; ln -s notes.txt /workspace/link").code == 0);
  auto rb = f.readFileRequest();
  rb.setPath("blob");
  auto blob = rb.send().wait(a.io.waitScope);
  CHECK(blob.getData().size() == 100);
  CHECK(blob.getInfo().getIsBinary());
  auto sl = f.statRequest();
  sl.setPath("link");
  auto link = sl.send().wait(a.io.waitScope).getInfo();
  CHECK(link.getType() == FileType::SYMLINK);
  CHECK(std::string(link.getSymlinkTarget().cStr()) == "notes.txt");
  CHECK(read(a, f, "link") == "hello files\n");  // Reading follows it.

  auto mk = f.mkdirRequest();
  mk.setPath("/workspace/a/b/c");
  mk.setRecursive(true);
  CHECK(mk.send().wait(a.io.waitScope).getInfo().getType() == FileType::DIRECTORY);
  CHECK(sh(d, "f", "test -d /workspace/a/b/c && echo dir").out == "dir\n");
  REQUIRE(sh(d, "f", "touch /workspace/a/.hidden /workspace/a/b/x").code == 0);

  auto ls = f.listRequest();
  ls.setPath("/workspace/a");
  ls.setRecursive(true);
  auto entries = ls.send().wait(a.io.waitScope).getEntries();
  std::vector<std::string> paths;
  for (auto e : entries) paths.emplace_back(e.getPath().cStr());
  CHECK(paths == std::vector<std::string>{"/workspace/a/b", "/workspace/a/b/c", "/workspace/a/b/x"});
  auto ls_all = f.listRequest();  // (A request is sent once.)
  ls_all.setPath("/workspace/a");
  ls_all.setRecursive(true);
  ls_all.setHidden(true);
  CHECK(ls_all.send().wait(a.io.waitScope).getEntries().size() == 4);

  // Rename within a filesystem, and a move across filesystems (/tmp is a tmpfs).
  auto mv = f.renameRequest();
  mv.setFrom("notes.txt");
  mv.setTo("/workspace/a/notes.txt");
  CHECK(a.error_of(mv) == "");
  CHECK(sh(d, "f", "cat /workspace/a/notes.txt").out == "hello files\n");
  auto across = f.renameRequest();
  across.setFrom("/workspace/a");
  across.setTo("/tmp/moved");
  CHECK(a.error_of(across) == "");
  CHECK(sh(d, "f", "cat /tmp/moved/notes.txt; test -e /workspace/a || echo gone").out == "hello files\ngone\n");
  CHECK(exists(a, f, "/tmp/moved/b/c"));
  CHECK_FALSE(exists(a, f, "/workspace/a"));

  auto rm = f.removeRequest();
  rm.setPath("/tmp/moved");
  CHECK(a.error_of(rm).rfind("not_empty: ", 0) == 0);
  auto rm_all = f.removeRequest();
  rm_all.setPath("/tmp/moved");
  rm_all.setRecursive(true);
  CHECK(a.error_of(rm_all) == "");
  CHECK_FALSE(exists(a, f, "/tmp/moved"));
  CHECK(exists(a, f, "/"));
}

TEST_CASE("files: bad input gets a precise error and writes nothing", "[files]") {
  warrend_process d({"--sandbox-disk", "64M"});
  api a(d);
  auto f = a.files("e");
  auto code = [](const std::string& err) { return err.substr(0, err.find(':')); };
  CHECK(code(read_error(a, f, "/nope")) == "not_found");
  CHECK(code(read_error(a, f, "/workspace")) == "is_a_directory");
  CHECK(write(a, f, "file", "x") == "");
  CHECK(code(read_error(a, f, "/workspace/file/below")) == "not_a_directory");
  CHECK(code(write(a, f, "file", "y", 0, false, true)) == "already_exists");
  CHECK(code(write(a, f, "/workspace", "y")) == "is_a_directory");
  CHECK(code(write(a, f, "missing/parent/file", "y")) == "not_found");
  CHECK(code(read_error(a, f, "/dev/zero")) == "invalid_argument");  // Not a regular file.
  CHECK(code(read_error(a, f, "")) == "invalid_argument");
  CHECK(code(read_error(a, f, std::string("/etc/host\0name", 14))) == "invalid_argument");
  CHECK(read_error(a, f, std::string("/work\xff\xfe", 7)).find("UTF-8") != std::string::npos);
  CHECK(read_error(a, f, "/" + std::string(5000, 'a')).find("4096") != std::string::npos);
  CHECK(read_error(a, f, "/" + std::string(300, 'a')).find("255") != std::string::npos);
  // The sandbox's own permissions: /proc/sys is read-only inside.
  auto rm_ro = f.removeRequest();
  rm_ro.setPath("/proc/sys/kernel/hostname");
  CHECK(code(a.error_of(rm_ro)) == "permission_denied");
  auto rm_root = f.removeRequest();
  rm_root.setPath("/workspace");
  rm_root.setRecursive(true);
  CHECK(code(a.error_of(rm_root)) == "permission_denied");
  // A one-shot write or read too large for one message names the streaming call.
  auto big = write(a, f, "big", std::string((16u << 20) + 1, 'b'));
  CHECK(code(big) == "too_large");
  CHECK(big.find("openWrite") != std::string::npos);
  REQUIRE(sh(d, "e", "head -c 20000000 /dev/zero > /workspace/twenty").code == 0);
  auto large = read_error(a, f, "twenty");
  CHECK(code(large) == "too_large");
  CHECK(large.find("streamFile") != std::string::npos);
  CHECK(read(a, f, "twenty", 19999990).size() == 10);  // Ranges of it work.

  // A write that fails midway (the disk limit) leaves the old file and no temporary file.
  CHECK(write(a, f, "keep", "old") == "");
  auto open = f.openWriteRequest();
  open.setPath("keep");
  auto sink = open.send().getSink();
  std::string chunk(1 << 20, 'z');
  std::string failure;
  try {
    for (int i = 0; i < 100; ++i) {
      auto w = sink.writeRequest();
      w.setData(bytes(chunk));
      w.send().wait(a.io.waitScope);
    }
    sink.commitRequest().send().wait(a.io.waitScope);
  } catch (const kj::Exception& e) {
    failure = e.getDescription().cStr();
  }
  CHECK(failure.find("no_space") != std::string::npos);
  sink = nullptr;  // Dropping the sink discards the partial file.
  a.io.provider->getTimer().afterDelay(200 * kj::MILLISECONDS).wait(a.io.waitScope);
  CHECK(read(a, f, "keep") == "old");
  CHECK(sh(d, "e", "ls -A /workspace | grep -c warren").out == "0\n");
}

TEST_CASE("files attack: paths stay inside the sandbox whatever .., symlinks and /proc links say", "[files][isolation]") {
  warrend_process d;
  api a(d);
  auto f = a.files("x");
  auto marker = "/root/warren-files-marker-" + std::to_string(::getpid());
  std::ofstream(marker) << "host secret\n";
  auto tag = std::to_string(::getpid());

  CHECK(read(a, f, "../../../../etc/hostname") == "x\n");  // .. stops at the sandbox's root.
  CHECK(read(a, f, "/etc/hostname") == "x\n");
  CHECK(read_error(a, f, marker).rfind("not_found", 0) == 0);
  REQUIRE(sh(d, "x", "ln -s " + marker + " /workspace/to-host; ln -s ../../../../../../../.. /workspace/up;"
                      " ln -s /proc/1/fd/3 /workspace/agent; ln -s /proc/1/root /workspace/pid1root").code == 0);
  CHECK(read_error(a, f, "to-host").rfind("not_found", 0) == 0);
  // The host's /etc/shadow is never what a path inside names.
  std::ifstream host_shadow("/etc/shadow");
  std::string shadow((std::istreambuf_iterator<char>(host_shadow)), std::istreambuf_iterator<char>());
  REQUIRE(sh(d, "x", "ln -s /etc/shadow /workspace/shadow").code == 0);
  auto shadow_error = read_error(a, f, "shadow");
  if (shadow_error.empty()) CHECK(read(a, f, "shadow") != shadow);
  else CHECK(shadow_error.rfind("not_found", 0) == 0);  // The sandbox has none of its own.
  CHECK(read_error(a, f, "up" + marker).rfind("not_found", 0) == 0);
  CHECK(read(a, f, "up/etc/hostname") == "x\n");
  // Magic links are refused, even the agent's own link to the daemon.
  CHECK(read_error(a, f, "agent").rfind("invalid_argument", 0) == 0);
  CHECK(read_error(a, f, "/proc/1/fd/3").rfind("invalid_argument", 0) == 0);
  CHECK(read_error(a, f, "pid1root/etc/hostname").rfind("invalid_argument", 0) == 0);
  // Writes through symlinks and .. land inside.
  CHECK(write(a, f, "up/tmp/escape-" + tag, "w") == "");
  CHECK_FALSE(fs::exists("/tmp/escape-" + tag));
  CHECK(sh(d, "x", "cat /tmp/escape-" + tag).out == "w");
  auto mk = f.mkdirRequest();
  mk.setPath("up/tmp/dir-" + tag + "/sub");
  mk.setRecursive(true);
  CHECK(a.error_of(mk) == "");
  CHECK_FALSE(fs::exists("/tmp/dir-" + tag));

  // A process swaps a path between a directory and symlinks to / and to the host marker's
  // place while the API reads through it: whatever it sees, it is the sandbox's.
  REQUIRE(sh(d, "x", "mkdir -p /workspace/real/root && echo inside > /workspace/real/root/" + fs::path(marker).filename().string()).code == 0);
  auto swapper = spawn({bin("warren"), "--socket", d.socket, "exec", "x", "--", "sh", "-c",
                        "while :; do ln -sfn / /workspace/race; ln -sfn /workspace/real /workspace/race; "
                        "ln -sfn /proc/1/root /workspace/race; done"});
  int inside = 0, refused = 0;
  for (int i = 0; i < 300; ++i) {
    auto req = f.readFileRequest();
    req.setPath("race" + marker);
    try {
      auto got = text(req.send().wait(a.io.waitScope).getData());
      CHECK(got != "host secret\n");
      if (got == "inside\n") ++inside;
    } catch (const kj::Exception&) {
      ++refused;
    }
  }
  ::kill(swapper, SIGTERM);
  ::waitpid(swapper, nullptr, 0);
  CHECK(inside + refused == 300);
  fs::remove(marker);
}

TEST_CASE("files: a 1 GiB file streams in and out without the daemon holding it in memory", "[files][large]") {
  warrend_process d;
  test_dir local;
  auto src = local.path + "/big.bin";
  {
    std::ofstream out(src, std::ios::binary);
    std::string block(1 << 20, '\0');
    for (int i = 0; i < 1024; ++i) {
      block[0] = static_cast<char>(i);  // Not all zeros: the content is checked at the end.
      out.write(block.data(), static_cast<std::streamsize>(block.size()));
    }
  }
  REQUIRE(d.warren({"create", "big"}).code == 0);
  auto rss_kb = [&] {
    std::ifstream in("/proc/" + std::to_string(d.pid) + "/status");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return 0L;
  };
  auto before = rss_kb();
  auto up = d.warren({"cp", src, "big:/workspace/big.bin"}, 300000);
  INFO(up.err);
  REQUIRE(up.code == 0);
  CHECK(sh(d, "big", "stat -c %s /workspace/big.bin").out == "1073741824\n");
  auto back = local.path + "/back.bin";
  auto down = d.warren({"cp", "big:/workspace/big.bin", back}, 300000);
  INFO(down.err);
  REQUIRE(down.code == 0);
  CHECK(fs::file_size(back) == 1073741824u);
  CHECK(run({"/usr/bin/cmp", src, back}).code == 0);
  CHECK(rss_kb() - before < 64 * 1024);  // The daemon streamed it: far less than the file.
}

TEST_CASE("files: warren cp copies files and directories both ways, cat and ls-files show them", "[files][cli]") {
  warrend_process d;
  test_dir local;
  fs::create_directories(local.path + "/proj/src");
  std::ofstream(local.path + "/proj/src/main.py") << "print('hi')\n";
  std::ofstream(local.path + "/proj/README") << "readme\n";
  REQUIRE(d.warren({"cp", local.path + "/proj", "c:/workspace/"}).code == 0);
  CHECK(sh(d, "c", "python3 /workspace/proj/src/main.py").out == "hi\n");
  CHECK(d.warren({"cat", "c:proj/README"}).out == "readme\n");
  auto ls = d.warren({"ls-files", "c:/workspace/proj", "--recursive"}).out;
  CHECK(ls.find("/workspace/proj/src/main.py") != std::string::npos);
  CHECK(ls.find("dir") != std::string::npos);

  REQUIRE(sh(d, "c", "mkdir -p /workspace/out/sub && echo result > /workspace/out/sub/r.txt").code == 0);
  REQUIRE(d.warren({"cp", "c:/workspace/out", local.path + "/got"}).code == 0);
  std::ifstream in(local.path + "/got/sub/r.txt");
  std::string line;
  std::getline(in, line);
  CHECK(line == "result");
  auto missing = d.warren({"cat", "c:/workspace/none"});
  CHECK(missing.code == 125);
  CHECK(missing.err.find("no such file") != std::string::npos);
  // A hibernated sandbox wakes for a file call.
  REQUIRE(d.warren({"sleep", "c"}).code == 0);
  CHECK(d.warren({"cat", "c:proj/README"}).out == "readme\n");
}

TEST_CASE("exec: without a stream, the result carries the output, capped and marked truncated", "[e2e][exec]") {
  warrend_process d;
  api a(d);
  auto sandbox = [&] {
    auto req = a.root.sandboxRequest();
    req.setName("b");
    return req.send().getSandbox();
  }();
  auto run_shell = [&](const std::string& line, std::uint32_t keep) {
    auto req = sandbox.execRequest();  // No output capability: the result is all there is.
    auto r = req.initRequest();
    r.initCommand().setShell(line);
    r.setCollectOutput(keep);
    return req.send().wait(a.io.waitScope);
  };
  auto small = run_shell("echo out; echo err >&2", 1024);
  CHECK(text(small.getResult().getStdout()) == "out\n");
  CHECK(text(small.getResult().getStderr()) == "err\n");
  CHECK_FALSE(small.getResult().getStdoutTruncated());
  // Gigabytes of output: the result keeps the first bytes, counts all, and says it cut.
  auto big = run_shell("head -c 1073741824 /dev/zero; echo done >&2", 4096);
  CHECK(big.getResult().getStdout().size() == 4096);
  CHECK(big.getResult().getStdoutTruncated());
  CHECK(big.getResult().getStdoutBytes() == 1073741824u);
  CHECK(text(big.getResult().getStderr()) == "done\n");
  {
    auto with_input = sandbox.execRequest();
    auto in = with_input.initRequest();
    auto argv = in.initCommand().initArgv(3);
    argv.set(0, "tr");
    argv.set(1, "a-z");
    argv.set(2, "A-Z");
    in.setStdin(bytes("shout\n"));
    in.setCollectOutput(100);
    CHECK(text(with_input.send().wait(a.io.waitScope).getResult().getStdout()) == "SHOUT\n");
  }
  auto req = sandbox.execRequest();
  auto r = req.initRequest();
  r.initCommand().setShell("true");
  r.setCollectOutput(64u << 20);
  CHECK(a.error_of(req).find("at most 16 MiB") != std::string::npos);
}
