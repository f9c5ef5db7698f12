// SplitHostPort: the host and port of a "HOST:PORT" or "[IPV6]:PORT"
// address, checked the way hilo's programs check --listen, --metrics_listen
// and --target before gRPC sees them: gRPC reads a port above 65535 modulo
// 65536 (80000 serves on 14464) and says nothing of a missing one.
//
//   absl::StatusOr<hilo::base::HostPort> a = SplitHostPort("127.0.0.1:80000");
//   // INVALID_ARGUMENT "port 80000 is out of range: a port is 0 to 65535"
//
// Header-only; thread-safe.
#ifndef HILO_BASE_HOST_PORT_H_
#define HILO_BASE_HOST_PORT_H_

#include <cstdint>
#include <string>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace hilo::base {

inline constexpr int kMaxPort = 65535;

struct HostPort {
  // Without the brackets of an IPv6 address; empty for ":PORT".
  std::string host;
  // 0 to 65535; -1 if the port is a service name ("localhost:https"),
  // which is left to the resolver.
  int port = -1;
};

// Whether `address` names a gRPC resolver or socket kind ("unix:/path",
// "dns:///host:port", "ipv4:...") rather than HOST:PORT: such an address is
// not split, but passed to gRPC as it is.
inline bool IsSchemeAddress(absl::string_view address) {
  for (absl::string_view scheme :
       {"unix:", "unix-abstract:", "vsock:", "dns:", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(address, scheme)) return true;
  }
  return absl::StrContains(address, "://");
}

// `address` as host and port. OUT_OF_RANGE for a port above 65535;
// INVALID_ARGUMENT for no port or an IPv6 address without brackets. The
// message says what is wrong without naming the address: the caller says
// which flag it came from.
inline absl::StatusOr<HostPort> SplitHostPort(absl::string_view address) {
  HostPort result;
  absl::string_view port;
  if (absl::StartsWith(address, "[")) {
    const size_t end = address.find(']');
    if (end == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          "the \"[\" of an IPv6 address has no "
          "\"]\"");
    }
    result.host = std::string(address.substr(1, end - 1));
    absl::string_view rest = address.substr(end + 1);
    if (!absl::ConsumePrefix(&rest, ":")) {
      return absl::InvalidArgumentError("it has no port");
    }
    port = rest;
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError("it has no port");
    }
    result.host = std::string(address.substr(0, colon));
    if (absl::StrContains(result.host, ':')) {
      return absl::InvalidArgumentError(
          "an IPv6 address goes in brackets, as [::1]:PORT");
    }
    port = address.substr(colon + 1);
  }
  if (port.empty()) return absl::InvalidArgumentError("it has no port");
  if (!absl::c_all_of(port, [](char c) { return absl::ascii_isdigit(c); })) {
    return result;  // a service name
  }
  uint64_t number = 0;
  if (!absl::SimpleAtoi(port, &number) || number > kMaxPort) {
    return absl::OutOfRangeError(absl::StrCat(
        "port ", port, " is out of range: a port is 0 to ", kMaxPort));
  }
  result.port = static_cast<int>(number);
  return result;
}

}  // namespace hilo::base

#endif  // HILO_BASE_HOST_PORT_H_
