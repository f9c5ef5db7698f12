// Doubles for testing the C++ client's gRPC side: GrpcRangeSource over mock
// stubs (MakeMockTargets, with a manual monotonic clock and canned replies),
// and StubbedNode, the real service and store behind a mock stub, as a
// GrpcRangeSource sees a server.
#ifndef HILO_TESTING_GRPC_SOURCE_FAKES_H_
#define HILO_TESTING_GRPC_SOURCE_FAKES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client_cpp/src/grpc_range_source.h"
#include "client_cpp/src/monotonic_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/v1/conversions.h"
#include "hilo/v1/hilo.pb.h"
#include "hilo/v1/hilo_mock.grpc.pb.h"
#include "testing/fake_node.h"

namespace hilo {
namespace testing_util {

using ::hilo::internal::IssuedRange;
using ::testing::_;
using ::testing::Return;

// GrpcRangeSource against mock stubs: failover, reply checks, tokens and
// return retries.
struct MockTargets {
  hilo::v1::MockHiLoStub* a;
  hilo::v1::MockHiLoStub* b;
  std::unique_ptr<internal::GrpcRangeSource> source;
};

// A monotonic clock that moves only when a test moves it (or a backoff
// sleeps on it). Thread-safe.
class ManualMonotonicClock final : public internal::MonotonicClock {
 public:
  TimePoint Now() const override {
    base::MutexLock lock(&mu_);
    return now_;
  }
  void SleepFor(absl::Duration duration) const override { Advance(duration); }
  void Advance(absl::Duration duration) const {
    base::MutexLock lock(&mu_);
    now_ = internal::After(now_, duration);
  }
  // How far it moved since it was made.
  absl::Duration Elapsed() const {
    base::MutexLock lock(&mu_);
    return internal::TimeLeft(TimePoint(), now_);
  }

 private:
  mutable base::Mutex mu_;
  mutable TimePoint now_ ABSL_GUARDED_BY(mu_);
};

// The time a call's context gives it, whatever clock its deadline is on.
inline absl::Duration Budget(const grpc::ClientContext& context) {
  const gpr_timespec span =
      gpr_convert_clock_type(context.raw_deadline(), GPR_TIMESPAN);
  return absl::Seconds(span.tv_sec) + absl::Nanoseconds(span.tv_nsec);
}

// Expects exactly `attempts` ReturnRange calls on `stub`, each failing
// with `code`; each call's budget (Budget) goes to `budgets`. With `clock`,
// each call also moves it on by its budget, as a call that waits out its
// deadline does.
inline void ExpectFailedReturnAttempts(hilo::v1::MockHiLoStub& stub,
                                       int attempts, grpc::StatusCode code,
                                       std::vector<absl::Duration>* budgets,
                                       ManualMonotonicClock* clock = nullptr) {
  EXPECT_CALL(stub, ReturnRange(_, _, _))
      .Times(attempts)
      .WillRepeatedly([=](grpc::ClientContext* context,
                          const hilo::v1::ReturnRangeRequest&,
                          hilo::v1::ReturnRangeResponse*) {
        budgets->push_back(Budget(*context));
        if (clock != nullptr) clock->Advance(budgets->back());
        return grpc::Status(code, "no answer");
      });
}

// Two targets, or one (then `b` is null). Retried returns do not wait.
// They stand for servers older than ReturnRanges: it is UNIMPLEMENTED, so
// a client hands ranges back with ReturnRange. Deadlines are measured on
// `clock` (the real monotonic clock if null).
inline MockTargets MakeMockTargets(
    int count = 2, absl::Duration rpc_deadline = absl::Seconds(1),
    internal::ReturnRetryPolicy retry = {.attempts = 3,
                                         .backoff = absl::ZeroDuration()},
    const internal::MonotonicClock* clock = nullptr) {
  auto a = std::make_unique<hilo::v1::MockHiLoStub>();
  auto b = std::make_unique<hilo::v1::MockHiLoStub>();
  MockTargets m{a.get(), count > 1 ? b.get() : nullptr, nullptr};
  for (hilo::v1::MockHiLoStub* stub : {a.get(), b.get()}) {
    ON_CALL(*stub, ReturnRanges(_, _, _))
        .WillByDefault(Return(
            grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no ReturnRanges")));
    EXPECT_CALL(*stub, ReturnRanges(_, _, _)).Times(::testing::AnyNumber());
  }
  std::vector<internal::GrpcRangeSource::Target> targets;
  targets.push_back({"node-a:1", std::move(a), /*channel=*/nullptr});
  if (count > 1) targets.push_back({"node-b:2", std::move(b), nullptr});
  m.source = std::make_unique<internal::GrpcRangeSource>(
      std::move(targets), rpc_deadline, retry,
      clock != nullptr ? clock : &internal::MonotonicClock::Real());
  return m;
}

inline auto Reply(int64_t low, int64_t high, const std::string& tag,
                  uint64_t token = 0) {
  return [=](grpc::ClientContext*, const hilo::v1::NextRangeRequest&,
             hilo::v1::NextRangeResponse* response) {
    response->set_low(low);
    response->set_high(high);
    response->set_node_tag(tag);
    response->set_range_token(token);
    return grpc::Status::OK;
  };
}

inline auto Returned(bool applied, int64_t max) {
  return [=](grpc::ClientContext*, const hilo::v1::ReturnRangeRequest&,
             hilo::v1::ReturnRangeResponse* response) {
    response->set_applied(applied);
    response->set_max(max);
    return grpc::Status::OK;
  };
}

inline IssuedRange TokenedRange(uint64_t token = 0x5eed'0000'0000'0001) {
  IssuedRange range;
  range.low = 1;
  range.high = 32;
  range.node_tag = "A";
  range.token = token;
  return range;
}

// A node over the real service and store behind a mock stub, as a
// GrpcRangeSource sees a server: NextRange and ReturnRanges reach the
// service (or ReturnRanges is UNIMPLEMENTED, as on a server older than it,
// and ReturnRange does). After each ReturnRange(s) call the client makes,
// `after_return` runs: another client's request arriving then.
struct StubbedNode {
  explicit StubbedNode(int64_t size, bool batches = true) : node("A", size) {
    auto mock = std::make_unique<hilo::v1::MockHiLoStub>();
    EXPECT_CALL(*mock, NextRange(_, _, _))
        .WillRepeatedly([this](grpc::ClientContext*,
                               const hilo::v1::NextRangeRequest& request,
                               hilo::v1::NextRangeResponse* response) {
          return ToGrpcStatus(node.service().DoNextRange(request, response));
        });
    EXPECT_CALL(*mock, ReturnRanges(_, _, _))
        .WillRepeatedly([this, batches](
                            grpc::ClientContext*,
                            const hilo::v1::ReturnRangesRequest& request,
                            hilo::v1::ReturnRangesResponse* response) {
          if (!batches) {
            return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                "no ReturnRanges");
          }
          const grpc::Status status =
              ToGrpcStatus(node.service().DoReturnRanges(request, response));
          std::vector<std::string> items;
          for (int i = 0; i < request.returns_size(); ++i) {
            const hilo::v1::ReturnRangeResult& r = response->results(i);
            items.push_back(absl::StrFormat("end %d last %d %s",
                                            request.returns(i).end(),
                                            request.returns(i).last(),
                                            r.code() != 0 ? "error"
                                            : r.applied() ? "applied"
                                                          : "refused"));
          }
          calls.push_back(absl::StrJoin(items, ", "));
          if (after_return) after_return();
          return LoseReply(status);
        });
    EXPECT_CALL(*mock, ReturnRange(_, _, _))
        .WillRepeatedly([this](grpc::ClientContext*,
                               const hilo::v1::ReturnRangeRequest& request,
                               hilo::v1::ReturnRangeResponse* response) {
          const grpc::Status status =
              ToGrpcStatus(node.service().DoReturnRange(request, response));
          calls.push_back(absl::StrFormat("end %d last %d %s", request.end(),
                                          request.last(),
                                          !status.ok()          ? "error"
                                          : response->applied() ? "applied"
                                                                : "refused"));
          if (after_return) after_return();
          return LoseReply(status);
        });
    stub = std::move(mock);
  }

  // A client of this node (once: it takes the stub) that runs prefetch
  // tasks when `scheduler` does and logs to `log`, after IDs 1 and 2 of
  // "o" (the second asks for a prefetch) and the prefetch: it holds 3-10,
  // and 11-20 fetched ahead.
  std::unique_ptr<Client> MakeClientHoldingAPair() {
    std::vector<internal::GrpcRangeSource::Target> targets;
    targets.push_back({"node-a:1", std::move(stub), /*channel=*/nullptr});
    auto source = std::make_unique<internal::GrpcRangeSource>(
        std::move(targets), absl::Seconds(5),
        internal::ReturnRetryPolicy{.attempts = 3,
                                    .backoff = absl::ZeroDuration()});
    ClientOptions options;
    options.prefetch_at = 0.2;
    options.log = [this](absl::string_view line) { log.Add(line); };
    std::unique_ptr<Client> client = NewClientForTesting(
        options, std::move(source), [this](std::function<void()> task) {
          scheduler.Schedule(std::move(task));
        });
    EXPECT_EQ(client->NextId("o")->number, 1);
    EXPECT_EQ(client->NextId("o")->number, 2);
    EXPECT_EQ(scheduler.RunAll(), 1);  // 11-20 fetched ahead
    return client;
  }

  // The reply to a return call: `status`, or, while lost_replies lasts, a
  // lost reply (the node applied what it applied; the client sees
  // UNAVAILABLE).
  grpc::Status LoseReply(grpc::Status status) {
    if (lost_replies == 0) return status;
    --lost_replies;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset");
  }

  // Another client's first NextRange of `collection`: the range's low.
  int64_t OtherClientTakesARange(absl::string_view collection) {
    hilo::v1::NextRangeResponse response;
    EXPECT_THAT(node.service().DoNextRange(
                    internal::MakeNextRangeRequest(collection, {}), &response),
                IsOk());
    return response.low();
  }

  FakeNode node;
  std::unique_ptr<hilo::v1::MockHiLoStub> stub;
  std::vector<std::string> calls;  // one line per call the client made
  std::function<void()> after_return;
  int lost_replies = 0;  // the first return calls whose reply is lost
  ManualScheduler scheduler;
  LogLines log;
};

}  // namespace testing_util
}  // namespace hilo

#endif  // HILO_TESTING_GRPC_SOURCE_FAKES_H_
