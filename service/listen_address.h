// What hilo_server says about an address it is told to serve on (--listen,
// --metrics_listen): a check before anything is bound, and, when binding
// failed, the reason and what to do in the operator's words rather than a
// library's.
//
//   if (absl::Status s = CheckListenAddress(kListenFlag, options.listen);
//       !s.ok()) return s;
//   ...
//   // the bind failed:
//   return BindFailure(kListenFlag, options.listen, "the address is invalid");
//
// Thread-safe.
#ifndef HILO_SERVICE_LISTEN_ADDRESS_H_
#define HILO_SERVICE_LISTEN_ADDRESS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace hilo {

// A flag that names an address to serve on, and how its errors read.
struct ListenFlag {
  absl::string_view flag;     // "--listen"
  absl::string_view refusal;  // "cannot listen on"
  absl::string_view example;  // "127.0.0.1:50051"
  // A bare port ("9464") is every address of the machine (CivetWeb's way).
  bool bare_port_ok = false;
  // How to do without it, if one may: "; --metrics_listen= serves none".
  absl::string_view without = "";
};

inline constexpr ListenFlag kListenFlag = {"--listen", "cannot listen on",
                                           "127.0.0.1:50051"};
inline constexpr ListenFlag kMetricsListenFlag = {
    "--metrics_listen", "cannot serve metrics on", "127.0.0.1:9464", true,
    "; or --metrics_listen= (empty) to serve no metrics"};

// OK for a HOST:PORT or [IPV6]:PORT `address` with a port of 0 to 65535 (or
// a service name), and for what gRPC reads itself ("unix:/path"); a bare
// port if the flag allows it. INVALID_ARGUMENT otherwise: "cannot listen
// on localhost (--listen): it has no port; give HOST:PORT, such as
// 127.0.0.1:50051 (port 0 picks a free one)", or the port out of range.
absl::Status CheckListenAddress(const ListenFlag& flag,
                                absl::string_view address);

// The error for `address` that could not be bound: why, tried with a
// socket of our own, and what to do ("cannot listen on 127.0.0.1:50051
// (--listen): port 50051 is in use by another program (another
// hilo_server?); stop it, or give --listen another port (0 picks a free
// one)"); also an address that is not this machine's, a privileged port, a
// host name that does not resolve. If the address can be bound now (the
// failure was something else), `fallback` is the reason.
absl::Status BindFailure(const ListenFlag& flag, absl::string_view address,
                         absl::string_view fallback);

}  // namespace hilo

#endif  // HILO_SERVICE_LISTEN_ADDRESS_H_
