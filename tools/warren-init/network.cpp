// Network of a sandbox: a fresh network namespace with only the loopback interface up.
// Bringing one flag up is a single SIOCSIFFLAGS ioctl; veth and routing (egress issue) will
// go through rtnetlink.
#include <fcntl.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "sys.hpp"

namespace warren::init {

void loopback_up() {
  unique_fd sock(static_cast<int>(check(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), "socket", "AF_INET")));
  struct ifreq req {};
  std::strncpy(req.ifr_name, "lo", IFNAMSIZ - 1);
  check(::ioctl(sock.get(), SIOCGIFFLAGS, &req), "ioctl SIOCGIFFLAGS", "lo");
  req.ifr_flags |= IFF_UP | IFF_RUNNING;
  check(::ioctl(sock.get(), SIOCSIFFLAGS, &req), "ioctl SIOCSIFFLAGS", "lo");
}

void allow_unprivileged_network() {
  // Per network namespace; /proc/sys/net shows the caller's namespace.
  for (auto [path, value] : {std::pair{"/proc/sys/net/ipv4/ip_unprivileged_port_start", "0"},
                             std::pair{"/proc/sys/net/ipv4/ping_group_range", "0 2147483647"}}) {
    unique_fd fd(static_cast<int>(check(::open(path, O_WRONLY | O_CLOEXEC), "open", path)));
    if (!write_all(fd.get(), value, std::strlen(value))) fail("write", path, errno);
  }
}

}  // namespace warren::init
