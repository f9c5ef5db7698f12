#include "service/observe/listener_probe.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"

namespace hilo {
namespace {

// The HTTP/2 client preface and an empty SETTINGS frame.
constexpr char kPreface[] =
    "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

int RemainingMs(absl::Time deadline) {
  return static_cast<int>(
      std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
}

}  // namespace

std::string ListenHost(const std::string& listen) {
  std::string host = listen;
  if (!host.empty() && host.front() == '[') {
    const size_t end = host.find(']');
    host = host.substr(1, end == std::string::npos ? end : end - 1);
  } else if (const size_t colon = host.rfind(':'); colon != std::string::npos) {
    host = host.substr(0, colon);
  }
  if (host.empty() || host == "0.0.0.0" || host == "*") return "127.0.0.1";
  if (host == "::") return "::1";
  return host;
}

absl::Status ListenerProbe::ProbeOnce(const std::string& host, int port,
                                      absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &addresses);
      rc != 0) {
    return absl::UnavailableError(
        absl::StrFormat("cannot resolve %s: %s", host, gai_strerror(rc)));
  }
  const int fd = socket(addresses->ai_family,
                        SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int error = errno;
    freeaddrinfo(addresses);
    return absl::UnavailableError(
        absl::StrFormat("cannot open a socket: %s", strerror(error)));
  }
  absl::Status status = absl::OkStatus();
  if (connect(fd, addresses->ai_addr, addresses->ai_addrlen) != 0 &&
      errno != EINPROGRESS) {
    status = absl::UnavailableError(absl::StrFormat(
        "cannot connect to %s:%d: %s", host, port, strerror(errno)));
  }
  freeaddrinfo(addresses);
  pollfd p = {fd, POLLOUT, 0};
  if (status.ok() && (poll(&p, 1, RemainingMs(deadline)) != 1 ||
                      (p.revents & (POLLERR | POLLHUP)) != 0)) {
    status = absl::UnavailableError(
        absl::StrFormat("cannot connect to %s:%d", host, port));
  }
  if (status.ok() && send(fd, kPreface, sizeof(kPreface) - 1, MSG_NOSIGNAL) !=
                         static_cast<ssize_t>(sizeof(kPreface) - 1)) {
    status = absl::UnavailableError(absl::StrFormat(
        "cannot write to %s:%d: %s", host, port, strerror(errno)));
  }
  p = {fd, POLLIN, 0};
  if (status.ok() && poll(&p, 1, RemainingMs(deadline)) != 1) {
    status = absl::UnavailableError(absl::StrFormat(
        "%s:%d took the connection but did not answer within %s: the "
        "listener no longer accepts",
        host, port, absl::FormatDuration(timeout)));
  }
  close(fd);
  return status;
}

ListenerProbe::ListenerProbe(ListenerProbeOptions options)
    : options_(std::move(options)) {}

std::unique_ptr<ListenerProbe> ListenerProbe::Start(
    ListenerProbeOptions options) {
  std::unique_ptr<ListenerProbe> probe(new ListenerProbe(std::move(options)));
  probe->thread_ = std::thread([p = probe.get()] { p->Run(); });
  return probe;
}

ListenerProbe::~ListenerProbe() {
  stopping_.store(true);
  thread_.join();
}

void ListenerProbe::Run() {
  int failed = 0;
  for (;;) {
    // Short naps, so that stopping is quick.
    const absl::Time until = absl::Now() + options_.interval;
    while (!stopping_.load() && absl::Now() < until) {
      absl::SleepFor(std::min(absl::Milliseconds(50), options_.interval));
    }
    if (stopping_.load()) return;
    absl::Status status =
        ProbeOnce(options_.host, options_.port, options_.timeout);
    failed = status.ok() ? 0 : failed + 1;
    if (failed >= options_.failures) {
      if (options_.on_deaf) options_.on_deaf(status);
      return;
    }
  }
}

}  // namespace hilo
