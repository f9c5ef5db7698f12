#include "service/listen_address.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/algorithm/container.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hilo/base/host_port.h"

namespace hilo {
namespace {

bool IsBarePort(absl::string_view address) {
  return !address.empty() &&
         absl::c_all_of(address, [](char c) { return absl::ascii_isdigit(c); });
}

// `address` as host and port, a bare port as every address.
absl::StatusOr<base::HostPort> Split(absl::string_view address) {
  if (IsBarePort(address)) {
    return base::SplitHostPort(absl::StrCat(":", address));
  }
  return base::SplitHostPort(address);
}

// errno of binding a socket of our own to `info`, or 0 if it binds.
int BindErrno(const addrinfo& info) {
  const int fd = socket(info.ai_family, info.ai_socktype, info.ai_protocol);
  if (fd < 0) return errno;
  // As gRPC and CivetWeb bind: a port whose last connections linger in
  // TIME_WAIT is free.
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const int result = bind(fd, info.ai_addr, info.ai_addrlen) == 0 ? 0 : errno;
  close(fd);
  return result;
}

// Why `address` cannot be bound now, and what to do; "" if it can be, or
// is not HOST:PORT.
std::string WhyCannotBind(const ListenFlag& flag, absl::string_view address) {
  if (base::IsSchemeAddress(address)) return "";
  absl::StatusOr<base::HostPort> split = Split(address);
  if (!split.ok() || split->port < 0) return "";
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(split->port);
  const std::string& host = split->host;
  const int resolved =
      getaddrinfo(host.empty() || host == "*" ? nullptr : host.c_str(),
                  port.c_str(), &hints, &found);
  if (resolved != 0) {
    return absl::StrFormat(
        "host \"%s\" cannot be resolved (%s); give %s an address of this "
        "machine, or a name it resolves",
        host, gai_strerror(resolved), flag.flag);
  }
  int error = 0;
  for (addrinfo* info = found; info != nullptr && error == 0;
       info = info->ai_next) {
    error = BindErrno(*info);
  }
  freeaddrinfo(found);
  switch (error) {
    case 0:
      return "";
    case EADDRINUSE:
      return absl::StrFormat(
          "port %d is in use by another program (another hilo_server?); "
          "stop it, or give %s another port (0 picks a free one)%s",
          split->port, flag.flag, flag.without);
    case EADDRNOTAVAIL:
      return absl::StrFormat(
          "%s is not an address of this machine; give %s one of its "
          "addresses (127.0.0.1 for this machine only)",
          host, flag.flag);
    case EACCES:
      return absl::StrFormat(
          "port %d needs privileges this process does not have; give %s a "
          "port above 1023",
          split->port, flag.flag);
    default:
      return absl::StrFormat("binding it fails: %s", std::strerror(error));
  }
}

}  // namespace

absl::Status CheckListenAddress(const ListenFlag& flag,
                                absl::string_view address) {
  if (base::IsSchemeAddress(address)) return absl::OkStatus();
  absl::StatusOr<base::HostPort> split =
      flag.bare_port_ok ? Split(address) : base::SplitHostPort(address);
  if (split.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s %s (%s): %s; give HOST:PORT, such as %s (port 0 picks a free "
      "one)%s",
      flag.refusal, address, flag.flag, split.status().message(), flag.example,
      flag.without));
}

absl::Status BindFailure(const ListenFlag& flag, absl::string_view address,
                         absl::string_view fallback) {
  std::string why = WhyCannotBind(flag, address);
  return absl::UnavailableError(
      absl::StrFormat("%s %s (%s): %s", flag.refusal, address, flag.flag,
                      why.empty() ? std::string(fallback) : why));
}

}  // namespace hilo
