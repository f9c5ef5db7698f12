// HeldPort: a TCP port on 127.0.0.1 that this process holds (bound and
// listening) for as long as the object lives, so that a test can show what
// a server says when its port is in use, or what a probe sees of a listener
// that never accepts (connections queue up to `backlog`). The kernel picks
// the port.
//
//   hilo::testing_util::HeldPort held;
//   ... "--listen=127.0.0.1:" + std::to_string(held.port()) ...
//
// Header-only. port() is 0 if no port could be held.
#ifndef HILO_TESTING_HELD_PORT_H_
#define HILO_TESTING_HELD_PORT_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace hilo::testing_util {

class HeldPort {
 public:
  explicit HeldPort(int backlog = 1) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (fd_ >= 0 &&
        bind(fd_, reinterpret_cast<sockaddr*>(&address), length) == 0 &&
        listen(fd_, backlog) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      port_ = ntohs(address.sin_port);
    }
  }
  ~HeldPort() {
    if (fd_ >= 0) close(fd_);
  }
  HeldPort(const HeldPort&) = delete;
  HeldPort& operator=(const HeldPort&) = delete;

  int fd() const { return fd_; }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_HELD_PORT_H_
