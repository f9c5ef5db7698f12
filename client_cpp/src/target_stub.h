// TargetStub: the client's calls to one hilo server, with no knowledge of
// any other.
//
// NextRange is one call with a deadline; its reply is handed back as is, and
// a failed call's grpc::Status becomes an absl::Status with the same code and
// message (hilo/v1/conversions.h). ReturnRange is retried against this same
// server: a tokened return applies at most once on the server, so on
// UNAVAILABLE or DEADLINE_EXCEEDED it is sent again, up to
// ReturnRetryPolicy::attempts calls with a doubling backoff between them, all
// within one deadline. Choosing among servers is GrpcRangeSource's job.
//
// Every deadline is measured on a MonotonicClock, never the wall clock, and
// gRPC gets each call's deadline as a span: a step of the wall clock neither
// stretches a return's retries nor cuts them short.
//
// Thread-safe: the stub and the clock are, and a TargetStub holds no other
// state.
#ifndef HILO_CLIENT_CPP_SRC_TARGET_STUB_H_
#define HILO_CLIENT_CPP_SRC_TARGET_STUB_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client_cpp/src/monotonic_clock.h"
#include "client_cpp/src/range_source.h"
#include "grpcpp/channel.h"
#include "hilo/v1/hilo.grpc.pb.h"

namespace hilo::internal {

// How a failed return is retried.
struct ReturnRetryPolicy {
  int attempts = 3;                                 // calls in all, at least 1
  absl::Duration backoff = absl::Milliseconds(50);  // before the 2nd, doubling
};

// True for the codes after which the same call may succeed on another
// server, or on the same one a little later: UNAVAILABLE, DEADLINE_EXCEEDED.
bool IsTransient(const absl::Status& status);

class TargetStub {
 public:
  // `name` is what error messages call the server; `channel` is the stub's
  // channel (null for a mock stub). `clock` measures the deadlines and
  // sleeps the backoffs; it must outlive the stub.
  TargetStub(std::string name,
             std::unique_ptr<hilo::v1::HiLo::StubInterface> stub,
             std::shared_ptr<grpc::Channel> channel,
             const MonotonicClock* clock = &MonotonicClock::Real());

  const std::string& name() const { return name_; }
  // The stub's channel, or null.
  grpc::Channel* channel() const { return channel_.get(); }

  // One NextRange call that may take `timeout`: the server's reply
  // (unchecked), or the call's status as the server gave it.
  absl::StatusOr<hilo::v1::NextRangeResponse> NextRange(
      const hilo::v1::NextRangeRequest& request, absl::Duration timeout) const;

  // ReturnRange within `timeout`, sent up to `attempts` times (at least
  // once) while it fails with a transient code and the next backoff still
  // ends before the deadline; each attempt gets an equal share of the time
  // left. A failure's message starts with the server's name; after more
  // than one attempt it lists what each one got.
  absl::StatusOr<ReturnResult> ReturnRange(
      const hilo::v1::ReturnRangeRequest& request, int attempts,
      absl::Duration backoff, absl::Duration timeout) const;

  // ReturnRanges, retried as ReturnRange. The reply as the server gave it
  // (unchecked), or the call's status: UNIMPLEMENTED from a server older
  // than ReturnRanges.
  absl::StatusOr<hilo::v1::ReturnRangesResponse> ReturnRanges(
      const hilo::v1::ReturnRangesRequest& request, int attempts,
      absl::Duration backoff, absl::Duration timeout) const;

 private:
  // Calls `call(context, response)` as ReturnRange describes; `method`
  // names it in messages.
  template <typename Response, typename Call>
  absl::StatusOr<Response> CallWithRetries(const char* method, Call call,
                                           int attempts, absl::Duration backoff,
                                           absl::Duration timeout) const;

  std::string name_;
  std::unique_ptr<hilo::v1::HiLo::StubInterface> stub_;
  std::shared_ptr<grpc::Channel> channel_;
  const MonotonicClock* clock_;
};

}  // namespace hilo::internal

#endif  // HILO_CLIENT_CPP_SRC_TARGET_STUB_H_
