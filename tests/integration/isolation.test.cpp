// Attack tests for the isolation promises: each tries to break out and must fail. Each test
// names the promise it attacks: namespaces, the overlay root, the user namespace (root
// inside is not root outside), capabilities, seccomp, resource limits, the network.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "integration/harness.hpp"

using namespace warren::testing;
namespace fs = std::filesystem;

namespace {
// Runs a shell line in sandbox `name`.
run_result sh(const warrend_process& d, const std::string& name, const std::string& line) {
  return d.warren({"exec", name, "--", "sh", "-c", line});
}
}  // namespace

TEST_CASE("a sandbox sees its init as PID 1 and no host process", "[isolation]") {
  warrend_process d;
  CHECK(sh(d, "a", "cat /proc/1/comm").out == "warren-init\n");
  CHECK(sh(d, "a", "echo $$").out != "1\n");
  // The daemon and the test runner are invisible: no process in the sandbox's /proc has
  // their command lines.
  auto r = sh(d, "a", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '");
  CHECK(r.out.find("warrend") == std::string::npos);
  CHECK(r.out.find("warren_integration_tests") == std::string::npos);
  auto count = sh(d, "a", "ls -d /proc/[0-9]* | wc -l");
  CHECK(std::stoi(count.out) < 10);
  CHECK(sh(d, "a", "hostname").out == "a\n");
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  CHECK(std::string(host) != "a");
}

TEST_CASE("a sandbox cannot see host files, the daemon's data or another sandbox", "[isolation]") {
  warrend_process d;
  auto marker = "/root/warren-marker-" + std::to_string(::getpid());
  std::ofstream(marker) << "host secret\n";
  REQUIRE(sh(d, "a", "echo mine > /workspace/a-file").code == 0);

  CHECK(sh(d, "b", "test -e " + marker).code != 0);
  CHECK(sh(d, "b", "cat /etc/shadow").code != 0);
  CHECK(sh(d, "b", "test -e " + d.data_dir).code != 0);
  CHECK(sh(d, "b", "test -e " + d.socket).code != 0);
  CHECK(sh(d, "b", "test -e /workspace/a-file").code != 0);
  CHECK(sh(d, "b", "grep -r 'host secret' /root /home /workspace /etc 2>/dev/null").out.empty());
  // Through /proc: PID 1's root and cwd are the sandbox's, not the host's.
  CHECK(sh(d, "b", "test -e /proc/1/root" + marker).code != 0);
  CHECK(sh(d, "b", "test -e /proc/1/cwd/" + d.data_dir).code != 0);
  fs::remove(marker);
}

TEST_CASE("writes through .. and to /usr stay inside the sandbox", "[isolation]") {
  warrend_process d;
  auto tag = std::to_string(::getpid());
  CHECK(sh(d, "a", "cd /../../..; pwd").out == "/\n");
  CHECK(sh(d, "a", "echo x > /../../../tmp/escape-" + tag).code == 0);
  CHECK_FALSE(fs::exists("/tmp/escape-" + tag));
  CHECK(sh(d, "a", "echo x > /usr/warren-test-" + tag + " && cat /usr/warren-test-" + tag).out == "x\n");
  CHECK_FALSE(fs::exists("/usr/warren-test-" + tag));
  CHECK(sh(d, "b", "test -e /usr/warren-test-" + tag).code != 0);
}

TEST_CASE("root in a sandbox cannot mount, make devices or change kernel settings", "[isolation]") {
  warrend_process d;
  CHECK(sh(d, "a", "mount -t tmpfs none /mnt").code != 0);
  CHECK(sh(d, "a", "mount --bind /usr /mnt").code != 0);
  CHECK(sh(d, "a", "mknod /tmp/disk b 8 0").code != 0);
  std::ifstream in("/proc/sys/kernel/core_pattern");
  std::string before((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(sh(d, "a", "echo '|/tmp/evil' > /proc/sys/kernel/core_pattern").code != 0);
  std::ifstream again("/proc/sys/kernel/core_pattern");
  std::string after((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  CHECK(after == before);
  CHECK(sh(d, "a", "echo 1 > /proc/sysrq-trigger").code != 0);
  CHECK(sh(d, "a", "cat /proc/kcore | head -c 1 | wc -c").out == "0\n");
  // Entering the host's namespaces through PID 1 needs CAP_SYS_ADMIN, which is dropped.
  CHECK(sh(d, "a", "nsenter -t 1 -m true").code != 0);
  CHECK(sh(d, "a", "unshare -m true").code != 0);
}

TEST_CASE("a sandbox has only a loopback network", "[isolation]") {
  warrend_process d;
  auto r = sh(d, "a", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
  CHECK(r.out == "lo\n");
  CHECK(sh(d, "a", "cat /proc/net/route | wc -l").out == "1\n");  // Header only: no route.
}

TEST_CASE("seccomp: a sandbox cannot create user namespaces, use keyrings or io_uring, or inject terminal input", "[isolation][seccomp]") {
  warrend_process d;
  // A user namespace would give root inside it every capability again (for its own objects).
  CHECK(sh(d, "a", "unshare -U true").code != 0);
  CHECK(sh(d, "a", "unshare -Ur true").code != 0);
  auto sys = [&](const std::string& call) {
    return sh(d, "a", "python3 -c 'import ctypes; libc = ctypes.CDLL(None, use_errno=True); r = libc.syscall(" + call +
                          "); print(r, ctypes.get_errno())'")
        .out;
  };
  CHECK(sys("250, 0, -3, 0") == "-1 1\n");   // keyctl(KEYCTL_GET_KEYRING_ID, session): EPERM
  CHECK(sys("425, 1, None") == "-1 1\n");    // io_uring_setup: EPERM (EFAULT if it reached the kernel)
  CHECK(sys("248, None, None, None, 0").find("-1 1") == 0);  // add_key: EPERM
  // TIOCSTI on its own controlling terminal: would push input into another program's stdin.
  auto tty = sh(d, "a", R"(python3 -c '
import os, pty, fcntl, termios
m, s = pty.openpty()
name = os.ttyname(s)
pid = os.fork()
if pid == 0:
    os.setsid()
    fd = os.open(name, os.O_RDWR)
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
        print("injected", flush=True)
    except OSError as e:
        print("refused", e.errno, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
')");
  CHECK(tty.out == "refused 1\n");
  // Ordinary work is unaffected: threads, processes, pipes, ptys.
  CHECK(sh(d, "a", "python3 -c 'import threading,subprocess; t=threading.Thread(target=print); t.start(); t.join(); subprocess.run([\"true\"], check=True)'").code == 0);
}

TEST_CASE("limits: a fork bomb is contained by the pids limit and the sandbox recovers", "[isolation][limits]") {
  warrend_process d({"--sandbox-pids", "64"});
  REQUIRE(sh(d, "a", "true").code == 0);
  auto host_before = processes_with("").size();
  auto bomb = d.warren({"exec", "a", "--timeout", "3", "--", "sh", "-c", "f() { f | f & }; f; sleep 60"});
  CHECK(bomb.code == 124);  // It ran until its timeout killed the whole group.
  // The host never saw the bomb's processes multiply beyond the limit.
  CHECK(processes_with("").size() < host_before + 80);
  CHECK(eventually([&] { return sh(d, "a", "echo ok").out == "ok\n"; }));
}

TEST_CASE("limits: a memory bomb is killed inside the sandbox and nothing else is", "[isolation][limits]") {
  warrend_process d({"--sandbox-memory", "128M"});
  REQUIRE(sh(d, "a", "true").code == 0);
  auto bomb = d.warren({"exec", "a", "--", "python3", "-c", "b = bytearray(768 * 1024 * 1024); print(len(b))"});
  CHECK(bomb.code == 128 + 9);  // SIGKILL from the OOM killer of the sandbox's cgroup.
  CHECK(bomb.out.empty());
  CHECK(bomb.err.find("out of memory") != std::string::npos);  // The sandbox reports it.
  CHECK(d.warren({"journal", "a"}).out.find("killed: out of memory") != std::string::npos);
  auto fine = d.warren({"exec", "a", "--", "sh", "-c", "kill -9 $$"});
  CHECK(fine.code == 128 + 9);
  CHECK(fine.err.find("out of memory") == std::string::npos);  // Not every SIGKILL is an OOM.
  CHECK(sh(d, "a", "echo alive").out == "alive\n");
  CHECK(d.warren({"exec", "b", "--", "echo", "other"}).out == "other\n");
}

TEST_CASE("a sandbox cannot reach host ports, the daemon, or signal a host process", "[isolation][network]") {
  warrend_process d;
  // A listener on the host's loopback: the sandbox's own loopback is another one.
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  auto port = std::to_string(ntohs(addr.sin_port));
  auto connect = [&](const std::string& host) {
    return sh(d, "a", "python3 -c 'import socket; s = socket.socket(); s.settimeout(2); s.connect((\"" + host +
                          "\", " + port + ")); print(\"connected\")'");
  };
  CHECK(connect("127.0.0.1").out.empty());
  CHECK(connect("10.0.2.2").out.empty());  // Any other address: there is no route at all.
  CHECK(connect("10.0.2.2").err.find("unreachable") != std::string::npos);
  ::close(listener);
  // The daemon's pid means nothing inside (another pid namespace): no such process.
  CHECK(sh(d, "a", "kill -0 " + std::to_string(d.pid)).code != 0);
  CHECK(sh(d, "a", "kill -9 1; echo survived").out == "survived\n");  // PID 1 ignores it.
  CHECK(sh(d, "a", "echo still up").out == "still up\n");
}

TEST_CASE("symlinks and hardlinks inside a sandbox resolve inside it", "[isolation]") {
  warrend_process d;
  CHECK(sh(d, "a", "ln -s /etc/shadow /workspace/s; cat /workspace/s").code != 0);
  CHECK(sh(d, "a", "ln -s ../../../../../../etc/passwd /workspace/p; cat /workspace/p").out.find("alice") ==
        std::string::npos);
  // A hardlink to the (shared) /usr layer cannot be made; links between own files can.
  CHECK(sh(d, "a", "ln /usr/bin/true /workspace/hard").code != 0);
  CHECK(sh(d, "a", "echo mine > /workspace/x && ln /workspace/x /workspace/y && cat /workspace/y").out == "mine\n");
  CHECK_FALSE(fs::exists("/workspace/y"));
  CHECK(sh(d, "a", "python3 -c 'import os; os.chroot(\"/tmp\"); os.chdir(\"../../..\"); print(os.listdir(\".\"))'")
            .out.find(d.data_dir) == std::string::npos);
}

TEST_CASE("a command flooding stdout keeps the daemon responsive and bounded in memory", "[isolation][flood]") {
  warrend_process d;
  REQUIRE(sh(d, "a", "true").code == 0);
  auto rss = [&] {
    std::ifstream in("/proc/" + std::to_string(d.pid) + "/status");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return 0L;
  };
  auto before = rss();
  // 1 GiB through a client that reads it all (into the harness's pipe): flow control, not buffers.
  auto flood = spawn({bin("warren"), "--socket", d.socket, "exec", "a", "--", "sh", "-c", "head -c 1073741824 /dev/zero"});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto t = std::chrono::steady_clock::now();
  CHECK(d.warren({"exec", "b", "--", "echo", "responsive"}).out == "responsive\n");
  CHECK(std::chrono::steady_clock::now() - t < std::chrono::seconds(10));
  int status = 0;
  ::waitpid(flood, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(rss() - before < 64 * 1024);  // KB: far below the gigabyte that went through.
}

TEST_CASE("usage reports CPU, memory, processes and disk of a sandbox without waking it", "[isolation][usage]") {
  warrend_process d({"--sandbox-memory", "512M", "--sandbox-pids", "300"});
  REQUIRE(sh(d, "u", "head -c 5000000 /dev/urandom > /workspace/blob").code == 0);
  REQUIRE(sh(d, "u", "timeout 1 sh -c 'while :; do :; done'; true").code == 0);
  auto json = d.warren({"usage", "u", "--json"}).out;
  INFO(json);
  auto number = [&](const std::string& key) {
    auto at = json.find("\"" + key + "\":");
    REQUIRE(at != std::string::npos);
    return std::stod(json.substr(at + key.size() + 3));
  };
  CHECK(number("cpuSeconds") >= 0.5);
  CHECK(number("diskBytes") >= 5000000);
  CHECK(number("pids") >= 1);
  CHECK(number("memoryBytes") > 0);
  CHECK(number("memoryLimitBytes") == 512.0 * 1024 * 1024);
  CHECK(number("pidsLimit") == 300);
  REQUIRE(d.warren({"sleep", "u"}).code == 0);
  auto asleep = d.warren({"ls", "--usage"});
  CHECK(asleep.out.find("hibernated") != std::string::npos);
  CHECK(processes_with("warren-init --name u ").empty());  // Asking did not wake it.
  CHECK(d.warren({"usage", "u"}).out.find("4.8M in its writable layer") != std::string::npos);
}

TEST_CASE("limits set at creation apply to that sandbox only, and survive hibernation", "[isolation][limits]") {
  warrend_process d({"--sandbox-memory", "1G"});
  REQUIRE(d.warren({"create", "small", "--memory", "128M", "--pids", "100"}).code == 0);
  auto eat = [&](const std::string& name) {
    return d.warren({"exec", name, "--", "python3", "-c", "b = bytearray(300 * 1024 * 1024); print(len(b))"});
  };
  CHECK(eat("small").code == 128 + 9);
  CHECK(eat("big").out == "314572800\n");  // The daemon's default (1G) is enough.
  REQUIRE(d.warren({"sleep", "small"}).code == 0);
  CHECK(eat("small").code == 128 + 9);  // Woken with the same limits.
  auto json = d.warren({"usage", "small", "--json"}).out;
  CHECK(json.find("\"memoryLimitBytes\":134217728") != std::string::npos);
  CHECK(json.find("\"pidsLimit\":100") != std::string::npos);
  auto bad = d.warren({"create", "x", "--memory", "lots"});
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--memory takes a positive value") != std::string::npos);
}

TEST_CASE("escape system calls fail: pivot_root, setns, chroot out of the root, module loading, reboot, kexec", "[isolation][seccomp]") {
  warrend_process d;
  auto sys = [&](const std::string& call) {
    return sh(d, "a", "python3 -c 'import ctypes; libc = ctypes.CDLL(None, use_errno=True); r = libc.syscall(" + call +
                          "); print(r, ctypes.get_errno())'")
        .out;
  };
  CHECK(sys("155, b\"/tmp\", b\"/tmp\"") == "-1 1\n");   // pivot_root: EPERM
  CHECK(sys("308, 0, 0") == "-1 1\n");                    // setns: EPERM
  CHECK(sys("313, 0, b\"\", 0") == "-1 1\n");             // finit_module: EPERM
  CHECK(sys("175, None, 0, b\"\"") == "-1 1\n");          // init_module: EPERM
  CHECK(sys("169, 0, 0, 0, None") == "-1 1\n");           // reboot: EPERM
  CHECK(sys("246, 0, 0, None, 0") == "-1 1\n");           // kexec_load: EPERM
  CHECK(sys("298, None, 0, -1, -1, 0") == "-1 1\n");      // perf_event_open: EPERM
  CHECK(sys("323, 0") == "-1 1\n");                       // userfaultfd: EPERM
  // /proc/self/root is the sandbox's own root; PID 1's (more privileged) root and cwd links
  // are not even reachable for commands.
  CHECK(sh(d, "a", "ls /proc/self/root/ | grep -c workspace").out == "1\n");
  CHECK(sh(d, "a", "echo x > /proc/1/root/tmp/through-proc").code != 0);
  CHECK(sh(d, "a", "ls /proc/1/cwd/").code != 0);
  CHECK_FALSE(fs::exists("/tmp/through-proc"));
}

TEST_CASE("limits can be changed later: at once while running, kept through hibernation", "[isolation][limits]") {
  warrend_process d({"--sandbox-memory", "1G"});
  REQUIRE(d.warren({"create", "grow", "--memory", "128M"}).code == 0);
  auto eat = [&] {
    return d.warren({"exec", "grow", "--", "python3", "-c", "b = bytearray(300 * 1024 * 1024); print(len(b))"});
  };
  CHECK(eat().code == 128 + 9);
  auto set = d.warren({"set", "grow", "--memory", "768M"});
  CHECK(set.code == 0);
  CHECK(eat().out == "314572800\n");  // Applied to the running sandbox, no restart.
  REQUIRE(d.warren({"set", "grow", "--pids", "50"}).code == 0);  // Memory stays as set.
  REQUIRE(d.warren({"sleep", "grow"}).code == 0);
  CHECK(eat().out == "314572800\n");  // Woken with the changed limit.
  auto json = d.warren({"usage", "grow", "--json"}).out;
  CHECK(json.find("\"memoryLimitBytes\":805306368") != std::string::npos);
  CHECK(json.find("\"pidsLimit\":50") != std::string::npos);
  CHECK(d.warren({"journal", "grow"}).out.find("sandbox_configured") != std::string::npos);
}

namespace {
// The "Uid:" or "Gid:" line of a host process: real, effective, saved, filesystem.
std::vector<std::uint64_t> host_ids(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  std::vector<std::uint64_t> ids;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    std::istringstream fields(line.substr(key.size()));
    std::uint64_t id;
    while (fields >> id) ids.push_back(id);
  }
  return ids;
}

// First host id of a sandbox's range, from its own uid_map ("0 BASE 65536").
std::uint64_t range_base(const warrend_process& d, const std::string& name) {
  auto r = sh(d, name, "cat /proc/self/uid_map");
  std::istringstream in(r.out);
  std::uint64_t inside = 1, base = 0, count = 0;
  in >> inside >> base >> count;
  CHECK(inside == 0);
  CHECK(count == 65536);
  return base;
}
}  // namespace

TEST_CASE("user namespace: root inside is an unprivileged host user, each sandbox with its own ids", "[isolation][userns]") {
  warrend_process d;
  CHECK(sh(d, "a", "id -u; id -g").out == "0\n0\n");
  auto a = range_base(d, "a"), b = range_base(d, "b");
  CHECK(a >= 65536);
  CHECK(b >= 65536);
  CHECK((a > b ? a - b : b - a) >= 65536);  // Disjoint ranges.
  CHECK(sh(d, "a", "cat /proc/self/gid_map").out.find(" " + std::to_string(a) + " ") != std::string::npos);
  // Seen from the host, the sandbox's PID 1 (and so every command it starts) holds only
  // the sandbox's ids.
  for (auto [name, base] : {std::pair{"a", a}, std::pair{"b", b}}) {
    auto inits = processes_with(std::string("warren-init --name ") + name + " ");
    REQUIRE(inits.size() == 1);
    CHECK(host_ids(inits[0], "Uid:") == std::vector<std::uint64_t>(4, base));
    CHECK(host_ids(inits[0], "Gid:") == std::vector<std::uint64_t>(4, base));
  }
}

TEST_CASE("user namespace: root inside cannot change host files it can see, nor reach the data dir", "[isolation][userns]") {
  warrend_process d;
  struct stat before {};
  REQUIRE(::stat("/dev/null", &before) == 0);
  // /dev/null is the host's own node, bound in: root inside holds no capability over it.
  CHECK(sh(d, "a", "chmod 600 /dev/null").code != 0);
  CHECK(sh(d, "a", "chown 1000 /dev/null").code != 0);
  CHECK(sh(d, "a", "ls -ln /dev/null").out.find(" 65534 ") != std::string::npos);  // Unmapped owner.
  struct stat after {};
  REQUIRE(::stat("/dev/null", &after) == 0);
  CHECK(after.st_mode == before.st_mode);
  CHECK(after.st_uid == before.st_uid);
  // What root inside creates is stored with the sandbox's own ids (0 inside); host users
  // other than root never reach it: the data dir is closed.
  CHECK(sh(d, "a", "cp /bin/sh /workspace/s && chmod 4755 /workspace/s && stat -c %u /workspace/s").out == "0\n");
  struct stat data {};
  REQUIRE(::stat(d.data_dir.c_str(), &data) == 0);
  CHECK((data.st_mode & 077) == 0);
}

TEST_CASE("user namespace: users inside are separated from root inside, and root inside keeps ports below 1024", "[isolation][userns]") {
  warrend_process d;
  REQUIRE(sh(d, "a", "echo secret > /root/r && chmod 600 /root/r").code == 0);
  auto as_user = [&](const std::string& line) {
    return sh(d, "a", "setpriv --reuid 1000 --regid 1000 --clear-groups sh -c '" + line + "'");
  };
  CHECK(as_user("id -u").out == "1000\n");
  CHECK(as_user("cat /root/r").code != 0);
  CHECK(as_user("kill -0 1").code != 0);
  CHECK(as_user("touch /etc/passwd").code != 0);
  // The network namespace belongs to the host, yet a dev server inside may listen on 80,
  // and ping sockets work (no raw sockets needed).
  CHECK(sh(d, "a", "python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 80)); print(\"ok\")'").out == "ok\n");
  CHECK(sh(d, "a", "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP); print(\"ok\")'").out == "ok\n");
}

namespace {
// Bytes a file really takes on the host's disk (a sparse image grows as it is written).
std::uint64_t allocated_bytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_blocks) * 512 : 0;
}

double json_number(const std::string& json, const std::string& key) {
  auto at = json.find("\"" + key + "\":");
  return at == std::string::npos ? -1 : std::stod(json.substr(at + key.size() + 3));
}
}  // namespace

TEST_CASE("disk: filling the disk stops at the sandbox's limit, the host and other sandboxes are untouched", "[isolation][disk]") {
  warrend_process d({"--disk-pool", "1G"});
  REQUIRE(d.warren({"create", "a", "--disk", "48M"}).code == 0);
  REQUIRE(sh(d, "b", "true").code == 0);
  auto image = d.data_dir + "/disk.img";
  auto image_before = allocated_bytes(image);

  auto fill = sh(d, "a", "dd if=/dev/zero of=/workspace/fill bs=1M count=200");
  CHECK(fill.code != 0);
  CHECK(fill.err.find("Disk quota exceeded") != std::string::npos);
  auto usage = d.warren({"usage", "a", "--json"}).out;
  INFO(usage);
  CHECK(json_number(usage, "diskLimitBytes") == 48.0 * 1024 * 1024);
  CHECK(json_number(usage, "diskBytes") <= 48.0 * 1024 * 1024);
  CHECK(json_number(usage, "diskBytes") >= 40.0 * 1024 * 1024);
  // The host's disk grew by what the sandbox may hold, not by what it tried to write.
  CHECK(allocated_bytes(image) - image_before < 100ull << 20);
  // Another sandbox writes as before.
  CHECK(sh(d, "b", "dd if=/dev/zero of=/workspace/mine bs=1M count=20 2>/dev/null && echo ok").out == "ok\n");

  // A full sandbox still starts after hibernation, and its user can make room.
  REQUIRE(d.warren({"sleep", "a"}).code == 0);
  CHECK(sh(d, "a", "rm /workspace/fill && echo x > /workspace/small && cat /workspace/small").out == "x\n");
  // A flood of empty files is counted too (metadata), and stops at the limit.
  REQUIRE(d.warren({"set", "a", "--disk", "4M"}).code == 0);
  auto flood = sh(d, "a", "python3 -c 'import os\nn = 0\ntry:\n  while n < 1000000:\n    open(\"/workspace/e%d\" % n, \"w\").close(); n += 1\nexcept OSError as e: print(e.errno)'");
  CHECK(flood.out == "122\n");  // EDQUOT
  // A limit below what it holds is refused; a higher one applies at once.
  CHECK(d.warren({"set", "a", "--disk", "1M"}).err.find("more than the new limit") != std::string::npos);
  REQUIRE(d.warren({"set", "a", "--disk", "64M"}).code == 0);
  CHECK(sh(d, "a", "dd if=/dev/zero of=/workspace/more bs=1M count=30 2>/dev/null && echo ok").out == "ok\n");
}

TEST_CASE("disk: all sandboxes together cannot grow the host's disk beyond the pool", "[isolation][disk]") {
  warrend_process d({"--disk-pool", "600M"});
  auto image = d.data_dir + "/disk.img";
  auto r = sh(d, "a", "dd if=/dev/zero of=/workspace/fill bs=1M count=1000");
  CHECK(r.code != 0);
  CHECK(r.err.find("No space left on device") != std::string::npos);
  struct stat st {};
  REQUIRE(::stat(image.c_str(), &st) == 0);
  CHECK(st.st_size == 600ll << 20);
  CHECK(allocated_bytes(image) <= 600ull << 20);
  // The daemon and the sandbox carry on.
  CHECK(sh(d, "a", "rm /workspace/fill && echo room").out == "room\n");
}

TEST_CASE("a sandbox cannot ptrace its init, sees nothing of the host's /sys, and /proc/self/root leads back inside", "[isolation]") {
  warrend_process d;
  auto ptrace_attach = [&](const std::string& pid) {
    return sh(d, "a", "python3 -c 'import ctypes; libc = ctypes.CDLL(None, use_errno=True); r = libc.ptrace(16, " + pid +
                          ", None, None); print(r, ctypes.get_errno())'")
        .out;
  };
  CHECK(ptrace_attach("1") == "-1 1\n");  // PTRACE_ATTACH to PID 1: EPERM
  // Its own processes may be traced (debuggers and strace work); the host's are not even
  // visible (the pid namespace), and PID 1 is refused above.
  CHECK(sh(d, "a", "python3 -c 'import ctypes, os, time\nlibc = ctypes.CDLL(None, use_errno=True)\npid = os.fork()\n"
                   "if pid == 0:\n  time.sleep(3)\n  os._exit(0)\nprint(libc.ptrace(16, pid, None, None))\nos.kill(pid, 9)'")
            .out == "0\n");
  CHECK(sh(d, "a", "ls -A /sys | wc -l").out == "0\n");
  auto tag = std::to_string(::getpid());
  CHECK(sh(d, "a", "echo x > /proc/self/root/tmp/via-root-" + tag + " && cat /tmp/via-root-" + tag).out == "x\n");
  CHECK_FALSE(fs::exists("/tmp/via-root-" + tag));
}
