#include "testing/held_calls.h"

#include <algorithm>
#include <memory>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"

namespace hilo::testing_util {

std::function<absl::Status()> HoldCommitsUntil(Notification& release) {
  return [&release] {
    return release.WaitForNotificationWithTimeout(absl::Seconds(60))
               ? absl::OkStatus()
               : absl::DeadlineExceededError("the test never let it commit");
  };
}

HeldNextRanges::HeldNextRanges(Server& server, Notification& release, int calls,
                               hilo::v1::HiLo::Stub* stub)
    : server_(server),
      release_(release),
      calls_(calls),
      responses_(calls),
      statuses_(calls) {
  const int port = server.port();
  for (int i = 0; i < calls; ++i) {
    callers_.emplace_back([this, i, stub, port] {
      std::unique_ptr<hilo::v1::HiLo::Stub> own;
      if (stub == nullptr) own = NewStub(port);
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
      hilo::v1::NextRangeRequest request;
      request.set_collection("orders");
      statuses_[i] = (stub != nullptr ? stub : own.get())
                         ->NextRange(&context, request, &responses_[i]);
    });
  }
}

HeldNextRanges::~HeldNextRanges() {
  release_.Notify();
  for (std::thread& caller : callers_) {
    if (caller.joinable()) caller.join();
  }
}

bool HeldNextRanges::AllInServices() {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (server_.calls_in_services() < calls_ && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  return server_.calls_in_services() == calls_;
}

std::vector<std::pair<int64_t, int64_t>> HeldNextRanges::Release() {
  release_.Notify();
  for (std::thread& caller : callers_) {
    if (caller.joinable()) caller.join();
  }
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int i = 0; i < calls_; ++i) {
    if (statuses_[i].ok()) {
      ranges.emplace_back(responses_[i].low(), responses_[i].high());
    } else {
      ADD_FAILURE() << "call " << i << ": " << statuses_[i].error_message();
      ranges.emplace_back(0, 0);
    }
  }
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

}  // namespace hilo::testing_util
