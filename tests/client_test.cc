// The C++ client's caching, concurrency and return logic, against a fake
// RangeSource; and its gRPC failover, against mock stubs.
#include "hilo/client.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "client_cpp/src/client_testing.h"
#include "client_cpp/src/grpc_range_source.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/mutex.h"
#include "hilo/v1/hilo_mock.grpc.pb.h"

namespace hilo {
namespace {

using ::hilo::internal::IssuedRange;
using ::hilo::internal::PreviousRange;
using ::hilo::internal::ReturnResult;
using ::testing::_;
using ::testing::HasSubstr;
using ::testing::Return;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

// Issues consecutive ranges of `size` numbers; each range's tag is taken in
// turn from `tags`. Can be paused and made to fail. Thread-safe.
class FakeSource final : public internal::RangeSource {
 public:
  struct ReturnCall {
    std::string collection;
    int64_t low, high, last;
    std::string tag;
  };

  explicit FakeSource(int64_t size, std::vector<std::string> tags = {"A"})
      : size_(size), tags_(std::move(tags)) {}

  absl::StatusOr<IssuedRange> Next(absl::string_view collection,
                                   const PreviousRange& previous) override {
    base::MutexLock lock(&mu_);
    ++in_flight_;
    ++calls_;
    previous_.push_back(previous);
    mu_.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !paused_; });
    --in_flight_;
    if (!fail_with_.ok()) return fail_with_;
    IssuedRange range;
    range.low = std::max(next_, previous.max + 1);
    range.high = range.low + size_ - 1;
    range.node_tag = tags_[(calls_ - 1) % tags_.size()];
    range.range_at = kT0 + absl::Seconds(calls_);
    next_ = range.high + 1;
    issued_.push_back(range);
    return range;
  }

  absl::StatusOr<ReturnResult> Return(absl::string_view collection,
                                      const IssuedRange& range,
                                      int64_t last) override {
    base::MutexLock lock(&mu_);
    returns_.push_back(
        {std::string(collection), range.low, range.high, last, range.node_tag});
    if (return_log_ != nullptr) {
      return_log_->push_back(absl::StrFormat("%s %d-%d last %d %s", collection,
                                             range.low, range.high, last,
                                             range.node_tag));
    }
    if (range.high == next_ - 1) next_ = last + 1;
    return ReturnResult{true, last};
  }

  std::string Describe() const override { return "fake"; }

  // Also records returns in `log`, which may outlive the source.
  void set_return_log(std::shared_ptr<std::vector<std::string>> log) {
    base::MutexLock lock(&mu_);
    return_log_ = std::move(log);
  }
  void Pause() {
    base::MutexLock lock(&mu_);
    paused_ = true;
  }
  void Resume() {
    base::MutexLock lock(&mu_);
    paused_ = false;
  }
  void WaitForInFlight(int n) {
    base::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return in_flight_ >= n;
    };
    mu_.Await(enough);
  }
  void FailWith(absl::Status status) {
    base::MutexLock lock(&mu_);
    fail_with_ = std::move(status);
  }
  int calls() {
    base::MutexLock lock(&mu_);
    return calls_;
  }
  std::vector<PreviousRange> previous() {
    base::MutexLock lock(&mu_);
    return previous_;
  }
  std::vector<IssuedRange> issued() {
    base::MutexLock lock(&mu_);
    return issued_;
  }
  std::vector<ReturnCall> returns() {
    base::MutexLock lock(&mu_);
    return returns_;
  }

 private:
  const int64_t size_;
  const std::vector<std::string> tags_;
  base::Mutex mu_;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Status fail_with_ ABSL_GUARDED_BY(mu_);
  std::vector<PreviousRange> previous_ ABSL_GUARDED_BY(mu_);
  std::vector<IssuedRange> issued_ ABSL_GUARDED_BY(mu_);
  std::vector<ReturnCall> returns_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<std::vector<std::string>> return_log_ ABSL_GUARDED_BY(mu_);
};

// Holds prefetch tasks until the test runs them.
class ManualScheduler {
 public:
  void Schedule(std::function<void()> task) {
    base::MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
  }
  // Runs the queued tasks on this thread; returns how many ran.
  int RunAll() {
    std::vector<std::function<void()>> tasks;
    {
      base::MutexLock lock(&mu_);
      tasks.swap(tasks_);
    }
    for (auto& task : tasks) task();
    return static_cast<int>(tasks.size());
  }

 private:
  base::Mutex mu_;
  std::vector<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
};

struct TestClient {
  FakeSource* source;
  std::unique_ptr<Client> client;
  std::shared_ptr<ManualScheduler> scheduler;
};

TestClient MakeClient(int64_t size, std::vector<std::string> tags = {"A"},
                      char separator = '/', double prefetch_at = 0) {
  auto source = std::make_unique<FakeSource>(size, std::move(tags));
  FakeSource* raw = source.get();
  ClientOptions options;
  options.separator = separator;
  options.prefetch_at = prefetch_at;
  options.log = [](absl::string_view) {};
  auto scheduler = std::make_shared<ManualScheduler>();
  auto schedule = [scheduler](std::function<void()> task) {
    scheduler->Schedule(std::move(task));
  };
  return {raw,
          NewClientForTesting(std::move(options), std::move(source), schedule),
          scheduler};
}

TEST(ClientTest, HandsOutItsRangeInOrderThenFetchesTheNext) {
  TestClient t = MakeClient(32);
  for (int64_t want = 1; want <= 40; ++want) {
    absl::StatusOr<Id> id = t.client->NextId("orders");
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(id->number, want);
    EXPECT_EQ(id->node_tag, "A");
  }
  EXPECT_EQ(t.source->calls(), 2);
}

TEST(ClientTest, ReportsPreviousRangeSoRangesGrowAndNeverGoDown) {
  TestClient t = MakeClient(32);
  for (int i = 0; i < 33; ++i) ASSERT_TRUE(t.client->NextId("orders").ok());
  const std::vector<PreviousRange> previous = t.source->previous();
  ASSERT_EQ(previous.size(), 2u);
  EXPECT_EQ(previous[0].size, 0);
  EXPECT_FALSE(previous[0].range_at.has_value());
  EXPECT_EQ(previous[0].max, 0);
  EXPECT_EQ(previous[1].size, 32);
  EXPECT_EQ(previous[1].range_at, kT0 + absl::Seconds(1));
  EXPECT_EQ(previous[1].max, 32);
}

TEST(ClientTest, DocumentIdIsCollectionSeparatorNumberDashTag) {
  TestClient t = MakeClient(32, {"B7"});
  EXPECT_EQ(*t.client->NextDocumentId("orders"), "orders/1-B7");
  EXPECT_EQ(*t.client->NextDocumentId("orders"), "orders/2-B7");
  TestClient colon = MakeClient(32, {"A"}, ':');
  EXPECT_EQ(*colon.client->NextDocumentId("users"), "users:1-A");
}

TEST(ClientTest, CollectionHandleDrawsFromTheCollectionsOwnRange) {
  TestClient t = MakeClient(32, {"A"}, ':');
  const CollectionHandle orders = t.client->Collection("orders");
  const CollectionHandle again = t.client->Collection("orders");
  EXPECT_EQ(orders.name(), "orders");
  EXPECT_EQ(t.client->NextId("orders")->number, 1);
  EXPECT_EQ(orders.NextId()->number, 2);
  EXPECT_EQ(*again.NextDocumentId(), "orders:3-A");
  EXPECT_EQ(*t.client->Collection("users").NextDocumentId(), "users:33-A");
  EXPECT_EQ(orders.NextId()->number, 4);
  EXPECT_EQ(t.source->calls(), 2);  // one range each
}

TEST(ClientTest, CollectionsHaveSeparateRanges) {
  TestClient t = MakeClient(32);
  EXPECT_EQ(t.client->NextId("a")->number, 1);
  EXPECT_EQ(t.client->NextId("b")->number, 33);  // the fake is global
  EXPECT_EQ(t.client->NextId("a")->number, 2);
}

TEST(ClientTest, EachNumberKeepsTheTagOfItsOwnRange) {
  TestClient t = MakeClient(3, {"A", "B", "C"});
  std::vector<std::string> ids;
  for (int i = 0; i < 9; ++i) ids.push_back(*t.client->NextDocumentId("o"));
  EXPECT_THAT(
      ids, ::testing::ElementsAre("o/1-A", "o/2-A", "o/3-A", "o/4-B", "o/5-B",
                                  "o/6-B", "o/7-C", "o/8-C", "o/9-C"));
}

TEST(ClientTest, OneFetchInFlightWhenManyThreadsRunDry) {
  TestClient t = MakeClient(1000);
  t.source->Pause();
  constexpr int kThreads = 8;
  std::vector<int64_t> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] { got[i] = t.client->NextId("o")->number; });
  }
  t.source->WaitForInFlight(1);
  t.source->Resume();
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(t.source->calls(), 1);
  EXPECT_EQ(std::set<int64_t>(got.begin(), got.end()).size(), kThreads);
  for (int64_t n : got) EXPECT_TRUE(n >= 1 && n <= kThreads) << n;
}

TEST(ClientTest, FetchErrorIsReturnedAndClientRecovers) {
  TestClient t = MakeClient(2);
  t.source->FailWith(absl::UnavailableError("no server"));
  absl::StatusOr<Id> failed = t.client->NextId("o");
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.status().message(), HasSubstr("no server"));
  t.source->FailWith(absl::OkStatus());
  EXPECT_EQ(t.client->NextId("o")->number, 1);
}

TEST(ClientTest, ServerErrorCodeIsPassedThrough) {
  TestClient t = MakeClient(2);
  t.source->FailWith(absl::InvalidArgumentError("collection name is empty"));
  EXPECT_EQ(t.client->NextId("").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ClientTest, ReturnUnusedRangesHandsBackTheTail) {
  TestClient t = MakeClient(32, {"Q"});
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(t.client->NextId("orders").ok());
  t.client->ReturnUnusedRanges();
  const std::vector<FakeSource::ReturnCall> returns = t.source->returns();
  ASSERT_EQ(returns.size(), 1u);
  EXPECT_EQ(returns[0].collection, "orders");
  EXPECT_EQ(returns[0].low, 1);
  EXPECT_EQ(returns[0].high, 32);
  EXPECT_EQ(returns[0].last, 5);
  EXPECT_EQ(returns[0].tag, "Q");
  // The client stays usable and continues right after what it used.
  EXPECT_EQ(t.client->NextId("orders")->number, 6);
  EXPECT_EQ(t.source->previous().back().max, 5);
}

TEST(ClientTest, NothingIsReturnedWhenTheRangeIsUsedUp) {
  TestClient t = MakeClient(4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(t.client->NextId("o").ok());
  t.client->ReturnUnusedRanges();
  EXPECT_TRUE(t.source->returns().empty());
}

TEST(ClientTest, DestructorReturnsUnusedRanges) {
  auto source = std::make_unique<FakeSource>(32);
  auto log = std::make_shared<std::vector<std::string>>();
  source->set_return_log(log);
  ClientOptions options;
  options.prefetch_at = 0;
  std::unique_ptr<Client> client =
      NewClientForTesting(options, std::move(source));
  ASSERT_TRUE(client->NextId("a").ok());
  ASSERT_TRUE(client->NextId("b").ok());
  ASSERT_TRUE(client->NextId("b").ok());
  client.reset();
  EXPECT_THAT(*log, ::testing::UnorderedElementsAre("a 1-32 last 1 A",
                                                    "b 33-64 last 34 A"));
}

TEST(ClientTest, ManyThreadsNeverRepeatAndOnlyUseIssuedRanges) {
  TestClient t = MakeClient(100, {"A", "B"});
  // Half the threads go through a shared handle, half by name.
  const CollectionHandle handle = t.client->Collection("o");
  constexpr int kThreads = 8;
  constexpr int kPerThread = 10'000;
  std::vector<std::vector<Id>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      got[i].reserve(kPerThread);
      for (int n = 0; n < kPerThread; ++n) {
        absl::StatusOr<Id> id =
            i % 2 == 0 ? handle.NextId() : t.client->NextId("o");
        ASSERT_TRUE(id.ok());
        got[i].push_back(*id);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  std::set<std::pair<int64_t, std::string>> unique;
  for (const auto& ids : got) {
    for (const Id& id : ids) unique.emplace(id.number, id.node_tag);
  }
  EXPECT_EQ(unique.size(), size_t{kThreads} * kPerThread);
  // Every (number, tag) lies in a range issued with that tag.
  const std::vector<IssuedRange> issued = t.source->issued();
  for (const auto& [number, tag] : unique) {
    const bool inside =
        std::any_of(issued.begin(), issued.end(), [&](const IssuedRange& r) {
          return r.low <= number && number <= r.high && r.node_tag == tag;
        });
    ASSERT_TRUE(inside) << number << "-" << tag;
  }
}

TEST(ClientPrefetchTest, NextRangeArrivesAheadSoCallersDoNotWait) {
  TestClient t = MakeClient(10, {"A"}, '/', 0.2);
  // The 2nd number of a 10-number range is its first fifth.
  EXPECT_EQ(t.client->NextId("o")->number, 1);
  EXPECT_EQ(t.scheduler->RunAll(), 0);
  EXPECT_EQ(t.client->NextId("o")->number, 2);
  EXPECT_EQ(t.scheduler->RunAll(), 1);  // fetches 11-20
  EXPECT_EQ(t.source->calls(), 2);
  for (int64_t want = 3; want <= 12; ++want) {
    EXPECT_EQ(t.client->NextId("o")->number, want);
  }
  EXPECT_EQ(t.scheduler->RunAll(), 1);  // the 12th number asked for 21-30
  for (int64_t want = 13; want <= 25; ++want) {
    EXPECT_EQ(t.client->NextId("o")->number, want);
  }
  // Only the very first call waited on the network.
  EXPECT_EQ(t.client->stats().calls_waited, 1);
  const std::vector<PreviousRange> previous = t.source->previous();
  ASSERT_GE(previous.size(), 3u);
  EXPECT_EQ(previous[1].max, 10);  // the prefetch reported the range in use
  EXPECT_EQ(previous[2].max, 20);
}

TEST(ClientPrefetchTest, ReturnGivesBackPrefetchedRangeWholeThenTheTail) {
  TestClient t = MakeClient(10, {"A"}, '/', 0.2);
  EXPECT_EQ(t.client->NextId("o")->number, 1);
  EXPECT_EQ(t.client->NextId("o")->number, 2);
  EXPECT_EQ(t.scheduler->RunAll(), 1);
  t.client->ReturnUnusedRanges();
  const std::vector<FakeSource::ReturnCall> returns = t.source->returns();
  ASSERT_EQ(returns.size(), 2u);
  EXPECT_EQ(returns[0].low, 11);   // newest first: the server only takes
  EXPECT_EQ(returns[0].last, 10);  // back the range it issued last
  EXPECT_EQ(returns[1].low, 1);
  EXPECT_EQ(returns[1].last, 2);
  EXPECT_EQ(t.client->NextId("o")->number, 3);
}

TEST(ClientPrefetchTest, FailedPrefetchIsRetriedByTheCallerThatRunsDry) {
  TestClient t = MakeClient(5, {"A"}, '/', 0.2);
  t.source->FailWith(absl::OkStatus());
  EXPECT_EQ(t.client->NextId("o")->number, 1);  // offset 0 asks ahead
  EXPECT_EQ(t.scheduler->RunAll(), 1);          // and gets 6-10
  t.source->FailWith(absl::UnavailableError("down"));
  for (int64_t want = 2; want <= 6; ++want) {
    EXPECT_EQ(t.client->NextId("o")->number, want);
  }
  EXPECT_EQ(t.scheduler->RunAll(), 1);  // 6 asked ahead, which failed
  EXPECT_EQ(t.source->calls(), 3);
  for (int64_t want = 7; want <= 10; ++want) {
    EXPECT_EQ(t.client->NextId("o")->number, want);
  }
  EXPECT_EQ(t.client->NextId("o").status().code(),
            absl::StatusCode::kUnavailable);
  t.source->FailWith(absl::OkStatus());
  EXPECT_EQ(t.client->NextId("o")->number, 11);
}

TEST(ClientCreateTest, RejectsPrefetchShareOutsideZeroToOne) {
  for (double share : {-0.1, 1.0, 2.0}) {
    ClientOptions options;
    options.targets = {"127.0.0.1:1"};
    options.prefetch_at = share;
    EXPECT_EQ(Client::Create(options).status().code(),
              absl::StatusCode::kInvalidArgument)
        << share;
  }
}

TEST(ClientPrefetchTest, ManyThreadsWithBackgroundPrefetchNeverRepeat) {
  auto source =
      std::make_unique<FakeSource>(50, std::vector<std::string>{"A", "B", "C"});
  FakeSource* raw = source.get();
  ClientOptions options;
  options.prefetch_at = 0.2;  // the real prefetch thread
  std::unique_ptr<Client> client =
      NewClientForTesting(options, std::move(source));
  constexpr int kThreads = 6;
  constexpr int kPerThread = 5'000;
  std::vector<std::vector<Id>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int n = 0; n < kPerThread; ++n) {
        absl::StatusOr<Id> id = client->NextId(n % 2 == 0 ? "even" : "odd");
        ASSERT_TRUE(id.ok()) << id.status();
        got[i].push_back(*id);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const std::vector<IssuedRange> issued = raw->issued();
  std::set<std::pair<int64_t, std::string>> unique;
  for (const auto& ids : got) {
    for (const Id& id : ids) {
      unique.emplace(id.number, id.node_tag);
      const bool inside =
          std::any_of(issued.begin(), issued.end(), [&](const IssuedRange& r) {
            return r.low <= id.number && id.number <= r.high &&
                   r.node_tag == id.node_tag;
          });
      ASSERT_TRUE(inside) << id.number << "-" << id.node_tag;
    }
  }
  EXPECT_EQ(unique.size(), size_t{kThreads} * kPerThread);
}

// GrpcRangeSource against mock stubs: failover and error mapping.
struct MockTargets {
  hilo::v1::MockHiLoStub* a;
  hilo::v1::MockHiLoStub* b;
  std::unique_ptr<internal::GrpcRangeSource> source;
};

MockTargets MakeMockTargets() {
  auto a = std::make_unique<hilo::v1::MockHiLoStub>();
  auto b = std::make_unique<hilo::v1::MockHiLoStub>();
  MockTargets m{a.get(), b.get(), nullptr};
  std::vector<internal::GrpcRangeSource::Target> targets;
  targets.push_back({"node-a:1", std::move(a), /*channel=*/nullptr});
  targets.push_back({"node-b:2", std::move(b), /*channel=*/nullptr});
  m.source = std::make_unique<internal::GrpcRangeSource>(std::move(targets),
                                                         absl::Seconds(1));
  return m;
}

auto Reply(int64_t low, int64_t high, const std::string& tag) {
  return [=](grpc::ClientContext*, const hilo::v1::NextRangeRequest&,
             hilo::v1::NextRangeResponse* response) {
    response->set_low(low);
    response->set_high(high);
    response->set_node_tag(tag);
    return grpc::Status::OK;
  };
}

TEST(GrpcRangeSourceTest, FailsOverOnUnavailableAndStaysWithTheNewTarget) {
  MockTargets m = MakeMockTargets();
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(Return(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")));
  EXPECT_CALL(*m.b, NextRange(_, _, _))
      .WillOnce(Reply(1, 32, "B"))
      .WillOnce(Reply(33, 64, "B"));
  absl::StatusOr<IssuedRange> first = m.source->Next("o", {});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->node_tag, "B");
  EXPECT_EQ(first->source, 1u);
  absl::StatusOr<IssuedRange> second = m.source->Next("o", {});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->low, 33);
}

TEST(GrpcRangeSourceTest, FailsOverOnDeadlineExceeded) {
  MockTargets m = MakeMockTargets();
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(
          Return(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "slow")));
  EXPECT_CALL(*m.b, NextRange(_, _, _)).WillOnce(Reply(5, 9, "B"));
  EXPECT_EQ(m.source->Next("o", {})->low, 5);
}

TEST(GrpcRangeSourceTest, DoesNotFailOverOnInvalidArgument) {
  MockTargets m = MakeMockTargets();
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(
          Return(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad name")));
  EXPECT_CALL(*m.b, NextRange(_, _, _)).Times(0);
  absl::StatusOr<IssuedRange> r = m.source->Next("o", {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("node-a:1"));
}

TEST(GrpcRangeSourceTest, AllTargetsDownIsUnavailableNamingEachTarget) {
  MockTargets m = MakeMockTargets();
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(Return(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")));
  EXPECT_CALL(*m.b, NextRange(_, _, _))
      .WillOnce(
          Return(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "timeout")));
  absl::StatusOr<IssuedRange> r = m.source->Next("orders", {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("node-a:1"));
  EXPECT_THAT(r.status().message(), HasSubstr("node-b:2"));
  EXPECT_THAT(r.status().message(), HasSubstr("orders"));
}

TEST(GrpcRangeSourceTest, InvalidRangeFromServerIsInternal) {
  MockTargets m = MakeMockTargets();
  EXPECT_CALL(*m.a, NextRange(_, _, _)).WillOnce(Reply(0, 31, "A"));
  EXPECT_EQ(m.source->Next("o", {}).status().code(),
            absl::StatusCode::kInternal);
}

TEST(GrpcRangeSourceTest, SendsPreviousRangeAndReturnsToIssuingTarget) {
  MockTargets m = MakeMockTargets();
  PreviousRange previous{64, kT0, 640};
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce([](grpc::ClientContext*,
                   const hilo::v1::NextRangeRequest& request,
                   hilo::v1::NextRangeResponse* response) {
        EXPECT_EQ(request.collection(), "o");
        EXPECT_EQ(request.last_size(), 64);
        EXPECT_EQ(request.last_max(), 640);
        EXPECT_EQ(request.last_range_at().seconds(), absl::ToUnixSeconds(kT0));
        response->set_low(641);
        response->set_high(768);
        response->set_node_tag("A");
        return grpc::Status::OK;
      });
  absl::StatusOr<IssuedRange> range = m.source->Next("o", previous);
  ASSERT_TRUE(range.ok());
  IssuedRange from_b = *range;
  from_b.source = 1;
  from_b.node_tag = "B";
  EXPECT_CALL(*m.b, ReturnRange(_, _, _))
      .WillOnce([](grpc::ClientContext*,
                   const hilo::v1::ReturnRangeRequest& request,
                   hilo::v1::ReturnRangeResponse* response) {
        EXPECT_EQ(request.end(), 768);
        EXPECT_EQ(request.last(), 700);
        EXPECT_EQ(request.node_tag(), "B");
        response->set_applied(true);
        response->set_max(700);
        return grpc::Status::OK;
      });
  absl::StatusOr<ReturnResult> returned = m.source->Return("o", from_b, 700);
  ASSERT_TRUE(returned.ok());
  EXPECT_TRUE(returned->applied);
}

TEST(ClientCreateTest, RejectsBadOptions) {
  ClientOptions none;
  EXPECT_EQ(Client::Create(none).status().code(),
            absl::StatusCode::kInvalidArgument);
  ClientOptions pipe;
  pipe.targets = {"127.0.0.1:1"};
  pipe.separator = '|';
  EXPECT_EQ(Client::Create(pipe).status().code(),
            absl::StatusCode::kInvalidArgument);
  ClientOptions deadline;
  deadline.targets = {"127.0.0.1:1"};
  deadline.rpc_deadline = absl::ZeroDuration();
  EXPECT_EQ(Client::Create(deadline).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hilo
