// IdleConnectionCloser: ends a stopping gRPC server's wait for clients that
// keep their connections open once no call is left.
//
// grpc::Server::Shutdown(deadline) returns once every call has ended and
// every connection has closed, or at the deadline, when it cancels what is
// left and drops the connections. It sends each client a GOAWAY and waits
// for the client to close: Go, Java and Node clients close at once; clients
// on gRPC's C core (hilo's C++ and Python clients among them) about 5 s
// later, and a client that never reads holds the server to the deadline
// (--shutdown_grace, 10 s). So while Shutdown waits, this watches the calls
// in the services and, once none is left, drops every connection (the
// server passes grpc_server_cancel_all_calls: what Shutdown does at its
// deadline). It waits `settle` first (the server passes the smaller of
// kSettle and the grace), so that calls a client started before it saw the
// GOAWAY, which gRPC still accepts for a round trip, reach the services
// and get their grace. A call that races that anyway is cancelled:
// UNAVAILABLE to its client, which retries on another node, and nothing
// half done in the store (a range committed for it is never handed out).
//
//   IdleConnectionCloser closer(
//       [&] { return calls.inside(); },
//       [&] { grpc_server_cancel_all_calls(server->c_server()); },
//       std::min(grace, IdleConnectionCloser::kSettle));
//   server->Shutdown(deadline);   // returns early once idle
//   server->Wait();
//   // closer's destructor ends its watch
//
// Thread-safe. `close` runs at most once, on the closer's thread, before
// the destructor returns.
#ifndef HILO_SERVICE_RPC_IDLE_CONNECTION_CLOSER_H_
#define HILO_SERVICE_RPC_IDLE_CONNECTION_CLOSER_H_

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "hilo/base/mutex.h"

namespace hilo {

class IdleConnectionCloser {
 public:
  // How long a server's closer waits before it first looks (at most).
  static constexpr absl::Duration kSettle = absl::Milliseconds(250);
  // How often it looks after that.
  static constexpr absl::Duration kPoll = absl::Milliseconds(5);

  // `calls_inside`: the calls in the services now. `close`: drops every
  // connection.
  IdleConnectionCloser(std::function<int64_t()> calls_inside,
                       std::function<void()> close, absl::Duration settle);
  ~IdleConnectionCloser();
  IdleConnectionCloser(const IdleConnectionCloser&) = delete;
  IdleConnectionCloser& operator=(const IdleConnectionCloser&) = delete;

 private:
  void Watch(absl::Duration settle);

  const std::function<int64_t()> calls_inside_;
  const std::function<void()> close_;
  base::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the rest is ready
};

}  // namespace hilo

#endif  // HILO_SERVICE_RPC_IDLE_CONNECTION_CLOSER_H_
