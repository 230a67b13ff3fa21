// Snapshots and forks end to end: the files of a running sandbox captured while it keeps
// running, sandboxes made from them that share nothing they write, and the journal.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>

#include "integration/harness.hpp"

using namespace warren::testing;

namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

TEST_CASE("snapshots: fork a running sandbox 4 times, writes stay apart, the source keeps running", "[e2e][snapshots]") {
  warrend_process d;
  // A workspace with a dependency tree and a server that comes back after every start.
  REQUIRE(d.warren({"exec", "src", "--shell", "--",
                    "mkdir -p /workspace/app/node_modules/a/lib /workspace/app/node_modules/b && "
                    "for i in $(seq 1 200); do echo \"module $i\" > /workspace/app/node_modules/a/lib/m$i.js; done && "
                    "echo '{\"name\":\"app\"}' > /workspace/app/package.json && "
                    "head -c 3000000 /dev/urandom > /workspace/app/node_modules/b/blob && "
                    "sha256sum /workspace/app/node_modules/b/blob | cut -c1-64 > /workspace/blob.sum"})
              .code == 0);
  auto sum = d.warren({"exec", "src", "--", "cat", "/workspace/blob.sum"}).out;
  REQUIRE(sum.size() == 65);
  REQUIRE(d.warren({"exec", "src", "--session", "dev", "--shell", "--", "export STAGE=snap; cd /workspace/app"}).code == 0);
  REQUIRE(d.warren({"start", "src", "--id", "web", "--restart-on-wake", "--", "python3", "-m", "http.server", "8000",
                    "--bind", "127.0.0.1"})
              .code == 0);

  auto snap = d.warren({"snapshot", "src", "--label", "base", "--json"});
  REQUIRE(snap.code == 0);
  INFO(snap.out << snap.err);
  CHECK(snap.out.find("\"label\":\"base\"") != std::string::npos);
  CHECK(snap.out.find("\"processes\":[{\"id\":\"web\"") != std::string::npos);
  CHECK(snap.out.find("\"pauseUs\":0,") == std::string::npos);  // It ran: it was frozen, briefly.
  auto id = snap.out.substr(6, snap.out.find(',') - 6);

  // The source was not stopped: its server is the same process, its files writable.
  CHECK(d.warren({"ps", "src", "--status", "running"}).out.find("web") != std::string::npos);
  REQUIRE(d.warren({"exec", "src", "--shell", "--", "echo later > /workspace/after-snapshot"}).code == 0);

  auto forked = d.warren({"fork", "src", "--count", "4"});
  REQUIRE(forked.code == 0);
  CHECK(forked.out == "src-1\nsrc-2\nsrc-3\nsrc-4\n");
  for (auto name : {"src-1", "src-2", "src-3", "src-4"}) {
    INFO(name);
    CHECK(d.warren({"exec", name, "--", "cat", "/workspace/blob.sum"}).out == sum);
    CHECK(d.warren({"exec", name, "--shell", "--", "sha256sum /workspace/app/node_modules/b/blob | cut -c1-64"}).out ==
          sum);
    CHECK(d.warren({"exec", name, "--shell", "--", "ls /workspace/app/node_modules/a/lib | wc -l"}).out == "200\n");
    // The fork was taken after the write above; the sessions came along.
    CHECK(d.warren({"exec", name, "--", "cat", "/workspace/after-snapshot"}).out == "later\n");
    CHECK(d.warren({"exec", name, "--session", "dev", "--shell", "--", "echo $STAGE $(pwd)"}).out ==
          "snap /workspace/app\n");
  }
  // Its restart_on_wake server started again in each fork.
  CHECK(eventually([&] { return d.warren({"ps", "src-1", "--status", "running"}).out.find("web") != std::string::npos; }));

  // Writes stay where they were made.
  REQUIRE(d.warren({"exec", "src-1", "--shell", "--", "echo mine > /workspace/app/only-1 && rm /workspace/app/package.json"})
              .code == 0);
  CHECK(d.warren({"exec", "src-2", "--", "test", "-e", "/workspace/app/only-1"}).code == 1);
  CHECK(d.warren({"exec", "src", "--", "test", "-e", "/workspace/app/only-1"}).code == 1);
  CHECK(d.warren({"exec", "src-2", "--", "cat", "/workspace/app/package.json"}).code == 0);
  CHECK(d.warren({"exec", "src", "--", "cat", "/workspace/app/package.json"}).code == 0);

  // A sandbox from the first snapshot has the files of that moment only.
  REQUIRE(d.warren({"create", "then", "--from", id}).code == 0);
  CHECK(d.warren({"exec", "then", "--", "test", "-e", "/workspace/after-snapshot"}).code == 1);
  CHECK(d.warren({"exec", "then", "--", "cat", "/workspace/blob.sum"}).out == sum);

  // Restore rolls a sandbox back: files, sessions and restart_on_wake servers of that moment.
  REQUIRE(d.warren({"exec", "src-3", "--shell", "--",
                    "rm -rf /workspace/app/node_modules && echo broken > /workspace/state && touch /workspace/after-snapshot"})
              .code == 0);
  REQUIRE(d.warren({"start", "src-3", "--id", "extra", "--", "sleep", "7171"}).code == 0);
  auto restored = d.warren({"restore", "src-3", id});
  INFO(restored.err);
  REQUIRE(restored.code == 0);
  CHECK(d.warren({"exec", "src-3", "--", "test", "-e", "/workspace/state"}).code == 1);
  CHECK(d.warren({"exec", "src-3", "--", "test", "-e", "/workspace/after-snapshot"}).code == 1);
  CHECK(d.warren({"exec", "src-3", "--shell", "--", "sha256sum /workspace/app/node_modules/b/blob | cut -c1-64"}).out ==
        sum);
  CHECK(commands("sleep 7171").empty());
  auto ps3 = d.warren({"ps", "src-3"}).out;
  INFO(ps3);
  CHECK(ps3.find("lost") != std::string::npos);  // extra: it ran when the files were replaced.
  CHECK(eventually([&] { return d.warren({"ps", "src-3", "--status", "running"}).out.find("web") != std::string::npos; }));
  CHECK(d.warren({"journal", "src-3"}).out.find("restored from snapshot " + id) != std::string::npos);
  CHECK(d.warren({"restore", "src-3", "999999"}).err.find("no snapshot 999999") != std::string::npos);

  // Hibernation and waking keep a fork's files.
  REQUIRE(d.warren({"sleep", "src-1"}).code == 0);
  CHECK(d.warren({"exec", "src-1", "--", "cat", "/workspace/app/only-1"}).out == "mine\n");

  // Bad input.
  CHECK(d.warren({"create", "src-2", "--from", id}).err.find("sandbox src-2 exists") != std::string::npos);
  CHECK(d.warren({"create", "nope", "--from", "999999"}).err.find("no snapshot 999999") != std::string::npos);
  CHECK(d.warren({"snapshot", "src", "--label", "Bad Label"}).err.find("snapshot labels are") != std::string::npos);
  auto memory = d.warren({"snapshot", "src", "--with-memory"});
  CHECK(memory.code != 0);
  CHECK(memory.err.find("CRIU") != std::string::npos);  // What the host has, e.g. not installed.
  auto snapshots_before = d.warren({"snapshots"}).out;
  CHECK(d.warren({"fork", "src", "--name", "src-2"}).err.find("sandbox src-2 exists") != std::string::npos);
  CHECK(d.warren({"snapshots"}).out == snapshots_before);  // Refused before any snapshot.

  // The journal has it; the snapshot outlives its sandbox and survives a daemon crash.
  CHECK(d.warren({"journal", "then"}).out.find("from snapshot " + id) != std::string::npos);
  REQUIRE(d.warren({"rm", "src"}).code == 0);
  d.stop(SIGKILL);
  d.start();
  auto list = d.warren({"snapshots"}).out;
  INFO(list);
  CHECK(list.find(id + " ") != std::string::npos);
  CHECK(list.find("base") != std::string::npos);
  REQUIRE(d.warren({"create", "again", "--from", id}).code == 0);
  CHECK(d.warren({"exec", "again", "--", "cat", "/workspace/blob.sum"}).out == sum);

  // Deleting a snapshot leaves the sandboxes made from it intact (they hold copies on write).
  REQUIRE(d.warren({"snapshots", "rm", id}).code == 0);
  CHECK(d.warren({"snapshots"}).out.find("base") == std::string::npos);
  CHECK(d.warren({"snapshots", "rm", id}).err.find("no snapshot") != std::string::npos);
  CHECK(d.warren({"exec", "then", "--", "cat", "/workspace/blob.sum"}).out == sum);
  CHECK(d.warren({"create", "late", "--from", id}).err.find("no snapshot") != std::string::npos);
  CHECK_FALSE(first_line(d.warren({"ls"}).out).empty());
}

TEST_CASE("snapshots need the disk pool and say so", "[e2e][snapshots]") {
  warrend_process d({"--disk-pool", "off"});
  REQUIRE(d.warren({"exec", "plain", "--", "true"}).code == 0);
  auto r = d.warren({"snapshot", "plain"});
  CHECK(r.code != 0);
  CHECK(r.err.find("disk pool") != std::string::npos);
  CHECK(d.warren({"snapshots"}).out.find("plain") == std::string::npos);
}

TEST_CASE("backups: a directory round trip with excludes, a corrupt archive refused, expiry", "[e2e][backups]") {
  warrend_process d;
  REQUIRE(d.warren({"exec", "bk", "--shell", "--",
                    "mkdir -p /workspace/proj/src /workspace/proj/node_modules/x /workspace/proj/build && cd /workspace/proj && "
                    "echo 'int main() {}' > src/main.c && chmod 750 src/main.c && ln -s src/main.c link.c && "
                    "echo dep > node_modules/x/index.js && echo out > build/app && echo noise > debug.log && "
                    "printf '*.log\\nbuild\\n' > .gitignore && echo kept > notes.txt"})
              .code == 0);
  auto made = d.warren({"backup", "bk", "/workspace/proj", "--exclude", "node_modules", "--gitignore", "--json"});
  INFO(made.out << made.err);
  REQUIRE(made.code == 0);
  auto id = made.out.substr(7, 32);
  CHECK(made.out.find("\"dir\":\"/workspace/proj\"") != std::string::npos);
  CHECK(d.warren({"backups"}).out.find(id) != std::string::npos);

  // Break it, then restore: the directory is what was archived, less the excludes.
  REQUIRE(d.warren({"exec", "bk", "--shell", "--", "rm -rf /workspace/proj/src && echo new > /workspace/proj/extra"}).code == 0);
  auto restored = d.warren({"restore", "bk", "--backup", id});
  INFO(restored.err);
  REQUIRE(restored.code == 0);
  auto listing = d.warren({"exec", "bk", "--shell", "--",
                           "cd /workspace/proj && find . | sort && stat -c %a src/main.c && readlink link.c"})
                     .out;
  CHECK(listing == ".\n./.gitignore\n./link.c\n./notes.txt\n./src\n./src/main.c\n750\nsrc/main.c\n");

  // Into another sandbox, at another place.
  REQUIRE(d.warren({"restore", "bk2", "--backup", id, "/workspace/copy"}).code != 0);  // bk2 does not exist yet.
  REQUIRE(d.warren({"exec", "bk2", "--", "true"}).code == 0);
  REQUIRE(d.warren({"restore", "bk2", "--backup", id, "/workspace/copy"}).code == 0);
  CHECK(d.warren({"exec", "bk2", "--", "cat", "/workspace/copy/notes.txt"}).out == "kept\n");

  // A corrupt archive is refused before anything changes.
  auto blob = d.data_dir + "/blobs/backup-" + id + ".tar.zst";
  {
    std::FILE* f = std::fopen(blob.c_str(), "r+b");
    REQUIRE(f);
    std::fseek(f, 40, SEEK_SET);
    int c = std::fgetc(f);
    std::fseek(f, 40, SEEK_SET);
    std::fputc(c ^ 0x5a, f);
    std::fclose(f);
  }
  REQUIRE(d.warren({"exec", "bk", "--shell", "--", "echo changed > /workspace/proj/notes.txt"}).code == 0);
  auto refused = d.warren({"restore", "bk", "--backup", id});
  CHECK(refused.code != 0);
  INFO(refused.err);
  CHECK(refused.err.find("corrupt") != std::string::npos);
  CHECK(d.warren({"exec", "bk", "--", "cat", "/workspace/proj/notes.txt"}).out == "changed\n");

  // Bad input.
  CHECK(d.warren({"backup", "bk", "/workspace/nope"}).err.find("no such directory") != std::string::npos);
  CHECK(d.warren({"backup", "bk", "relative"}).err.find("absolute") != std::string::npos);
  CHECK(d.warren({"restore", "bk", "--backup", "not-an-id"}).err.find("32 hex") != std::string::npos);
  CHECK(d.warren({"restore", "bk", "--backup", std::string(32, 'a')}).err.find("no backup") != std::string::npos);

  // Deleting removes the archive; an expired backup is gone from the list and its archive
  // goes at the next backup; an archive the journal never heard of goes at the next start.
  REQUIRE(d.warren({"backups", "rm", id}).code == 0);
  CHECK(::access(blob.c_str(), F_OK) != 0);
  auto brief = d.warren({"backup", "bk", "/workspace/proj", "--ttl", "1s"}).out.substr(0, 32);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  CHECK(d.warren({"backups"}).out.find(brief) == std::string::npos);
  CHECK(d.warren({"restore", "bk", "--backup", brief}).err.find("expired") != std::string::npos);
  REQUIRE(d.warren({"backup", "bk", "/workspace/proj"}).code == 0);
  CHECK(eventually([&] { return ::access((d.data_dir + "/blobs/backup-" + brief + ".tar.zst").c_str(), F_OK) != 0; }));
  auto orphan = d.data_dir + "/blobs/backup-" + std::string(32, 'b') + ".tar.zst";
  std::FILE* o = std::fopen(orphan.c_str(), "wb");
  REQUIRE(o);
  std::fclose(o);
  d.stop(SIGKILL);
  d.start();
  CHECK(eventually([&] { return ::access(orphan.c_str(), F_OK) != 0; }));
  CHECK(d.warren({"backups"}).out.find("/workspace/proj") != std::string::npos);  // The last one stays.
}

namespace {
std::string sha256_of(const std::string& path) {
  auto r = run({"/usr/bin/sha256sum", path});
  return r.out.substr(0, 64);
}
}  // namespace

TEST_CASE("snapshots move between daemons: export, import, and corrupt or foreign streams refused", "[e2e][snapshots]") {
  warrend_process a;
  REQUIRE(a.warren({"exec", "orig", "--shell", "--",
                    "mkdir -p /workspace/w && seq 1 5000 > /workspace/w/numbers && ln -s numbers /workspace/w/link"})
              .code == 0);
  auto id = first_line(a.warren({"snapshot", "orig", "--label", "travel"}).out);
  auto exported = a.warren({"snapshots", "export", id});
  INFO(exported.out << exported.err);
  REQUIRE(exported.code == 0);
  auto blob = exported.out.substr(0, exported.out.find(' '));
  auto sha = exported.out.substr(exported.out.find(' ') + 1, 64);
  CHECK(sha == sha256_of(a.data_dir + "/blobs/" + blob));

  warrend_process b;
  REQUIRE(b.warren({"exec", "other", "--", "true"}).code == 0);
  REQUIRE(run({"/bin/cp", a.data_dir + "/blobs/" + blob, b.data_dir + "/blobs/" + blob}).code == 0);
  CHECK(b.warren({"snapshots", "import", blob, std::string(64, '0')}).err.find("corrupt") != std::string::npos);
  auto imported = b.warren({"snapshots", "import", blob, sha, "--label", "arrived"});
  INFO(imported.err);
  REQUIRE(imported.code == 0);
  auto new_id = first_line(imported.out);
  CHECK(b.warren({"snapshots"}).out.find("arrived") != std::string::npos);
  REQUIRE(b.warren({"create", "copy", "--from", new_id}).code == 0);
  CHECK(b.warren({"exec", "copy", "--shell", "--", "wc -l < /workspace/w/link"}).out == "5000\n");

  // Bytes that are not a send stream (with a matching checksum) are refused; nothing stays.
  auto junk = b.data_dir + "/blobs/snapshot-9-0badf00d.btrfs";
  REQUIRE(run({"/bin/sh", "-c", "head -c 100000 /dev/urandom > " + junk}).code == 0);
  auto before = b.warren({"snapshots"}).out;
  auto refused = b.warren({"snapshots", "import", "snapshot-9-0badf00d.btrfs", sha256_of(junk)});
  CHECK(refused.code != 0);
  CHECK(refused.err.find("btrfs receive") != std::string::npos);
  CHECK(b.warren({"snapshots"}).out == before);
  CHECK_FALSE(b.mounts_mention(".import-"));
  CHECK(b.warren({"snapshots", "import", "../../etc/passwd", sha}).err.find("not the name") != std::string::npos);
  CHECK(a.warren({"snapshots", "export", "999999"}).err.find("no snapshot") != std::string::npos);
}
