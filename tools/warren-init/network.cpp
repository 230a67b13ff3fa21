// Network of a sandbox: a fresh network namespace with only the loopback interface up.
// Bringing one flag up is a single SIOCSIFFLAGS ioctl; veth and routing (egress issue) will
// go through rtnetlink.
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

}  // namespace warren::init
