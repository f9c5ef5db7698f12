// NextRange calls that an in-process server holds at its store's commit
// until the test lets them go, so that they reach the store together and
// commit in batches: for the suites that test what a server does while it
// holds many calls, or with the replies of one batch.
#ifndef HILO_TESTING_HELD_CALLS_H_
#define HILO_TESTING_HELD_CALLS_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"
#include "hilo/v1/hilo.grpc.pb.h"
#include "service/server.h"
#include "testing/test_util.h"

namespace hilo::testing_util {

// The hook for ServerOptions::before_commit_for_testing that holds every
// commit until `release` is notified, and fails the commit (nothing
// written) if that takes over a minute.
std::function<absl::Status()> HoldCommitsUntil(Notification& release);

// `calls` NextRange("orders") calls, each on a thread of its own, started by
// the constructor. With `stub` they share its channel (one connection);
// without, each call opens a channel of its own. The server must hold its
// commits until `release` (HoldCommitsUntil), which Release() or the
// destructor notifies; the threads never outlive this object.
class HeldNextRanges {
 public:
  HeldNextRanges(Server& server, Notification& release, int calls,
                 hilo::v1::HiLo::Stub* stub = nullptr);
  ~HeldNextRanges();
  HeldNextRanges(const HeldNextRanges&) = delete;
  HeldNextRanges& operator=(const HeldNextRanges&) = delete;

  // Waits until every call is in the server's services (held, or waiting
  // for a batch behind the held one); false if that takes over 30 s or
  // the server has other calls in them.
  bool AllInServices();

  // Lets the commits go, waits for every call, and returns their ranges
  // (low, high) sorted; a call that did not succeed fails the test and
  // gives (0, 0).
  std::vector<std::pair<int64_t, int64_t>> Release();

 private:
  Server& server_;
  Notification& release_;
  const int calls_;
  std::vector<hilo::v1::NextRangeResponse> responses_;
  std::vector<grpc::Status> statuses_;
  std::vector<std::thread> callers_;
};

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_HELD_CALLS_H_
