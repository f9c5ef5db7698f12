// ListenerProbe: checks, from inside the server, that its gRPC port still
// accepts connections.
//
// gRPC 1.51 stops accepting for good after one accept() fails with EMFILE
// (CVE-2023-4785): the process lives on, deaf. The probe connects to the
// port every `interval`, sends the HTTP/2 client preface and waits up to
// `timeout` for any answer (bytes, or the connection closed: a TLS port
// answers the preface with an alert). A listener that no longer accepts
// leaves the connection in the kernel's backlog, unanswered. After
// `failures` probes in a row fail, `on_deaf` runs once, on the probe's
// thread; hilo_server then turns NOT_SERVING and exits for its supervisor
// to restart it.
//
//   auto probe = ListenerProbe::Start({"127.0.0.1", port, absl::Seconds(5),
//                                      absl::Seconds(2), 3, on_deaf});
//
// Thread-safe; the destructor stops the probe and waits for its thread.
#ifndef HILO_SERVICE_OBSERVE_LISTENER_PROBE_H_
#define HILO_SERVICE_OBSERVE_LISTENER_PROBE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hilo {

struct ListenerProbeOptions {
  std::string host;  // numeric address or name; 0.0.0.0 and :: mean loopback
  int port = 0;
  absl::Duration interval = absl::Seconds(5);
  absl::Duration timeout = absl::Seconds(2);
  int failures = 3;
  // Gets the status of the last failed probe.
  std::function<void(const absl::Status&)> on_deaf;
};

class ListenerProbe {
 public:
  static std::unique_ptr<ListenerProbe> Start(ListenerProbeOptions options);
  ~ListenerProbe();

  // One probe: OK if the listener answered within `timeout`, else
  // UNAVAILABLE saying what failed (connect, or no answer).
  static absl::Status ProbeOnce(const std::string& host, int port,
                                absl::Duration timeout);

 private:
  explicit ListenerProbe(ListenerProbeOptions options);
  void Run();

  const ListenerProbeOptions options_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// The host part of a "host:port" or "[v6]:port" listen address.
std::string ListenHost(const std::string& listen);

}  // namespace hilo

#endif  // HILO_SERVICE_OBSERVE_LISTENER_PROBE_H_
