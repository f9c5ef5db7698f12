// GrpcRangeSource against mock stubs: failover, reply checks, tokens,
// return batching and retries, deadlines on the monotonic clock.
#include "client_cpp/src/grpc_range_source.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "client_cpp/src/client_testing.h"
#include "client_cpp/src/fork_guard.h"
#include "client_cpp/src/fork_safe_source.h"
#include "client_cpp/src/monotonic_clock.h"
#include "client_cpp/src/range_cache.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"
#include "hilo/base/mutex.h"
#include "hilo/client.h"
#include "service/rpc/hilo_service.h"
#include "service/store/range_size_policy.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "testing/client_fakes.h"
#include "testing/fake_node.h"
#include "testing/grpc_source_fakes.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::internal::IssuedRange;
using ::hilo::internal::PreviousRange;
using ::hilo::internal::ReturnResult;
using ::hilo::testing_util::Budget;
using ::hilo::testing_util::ExpectFailedReturnAttempts;
using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::kT0;
using ::hilo::testing_util::MakeMockTargets;
using ::hilo::testing_util::ManualMonotonicClock;
using ::hilo::testing_util::MockTargets;
using ::hilo::testing_util::Previous;
using ::hilo::testing_util::Reply;
using ::hilo::testing_util::Returned;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TokenedRange;
using ::testing::_;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Return;

TEST(GrpcRangeSourceTest, FailsOverOnUnavailableAndStaysWithTheNewTarget) {
  MockTargets m = MakeMockTargets();
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(Return(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")));
  EXPECT_CALL(*m.b, NextRange(_, _, _))
      .WillOnce(Reply(1, 32, "B"))
      .WillOnce(Reply(33, 64, "B"));
  absl::StatusOr<IssuedRange> first = m.source->Next("o", {});
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->node_tag, "B");
  EXPECT_EQ(first->source, 1u);
  absl::StatusOr<IssuedRange> second = m.source->Next("o", {});
  ASSERT_THAT(second, IsOk());
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
  EXPECT_THAT(
      r, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("node-a:1")));
}

// A reply a client never uses nor echoes (CONTRACT.md R11): one bad reply
// must not make every later request of the collection malformed.
TEST(GrpcRangeSourceTest,
     RangeAtThatIsNoTimestampIsRefusedAndTheNextTargetAsked) {
  MockTargets m = MakeMockTargets();
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce([](grpc::ClientContext*, const hilo::v1::NextRangeRequest&,
                   hilo::v1::NextRangeResponse* response) {
        response->set_low(1);
        response->set_high(32);
        response->set_node_tag("A");
        response->mutable_range_at()->set_seconds(253402300800);  // 10000-01-01
        return grpc::Status::OK;
      });
  EXPECT_CALL(*m.b, NextRange(_, _, _)).WillOnce(Reply(1, 32, "B"));
  absl::StatusOr<IssuedRange> r = m.source->Next("o", {});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->node_tag, "B");
}

TEST(GrpcRangeSourceTest, RangeOfMoreThanTwoToThe32NumbersIsRefused) {
  MockTargets m = MakeMockTargets(1);
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(Reply(1, INT64_MAX, "A"))
      .WillOnce(Reply(1, int64_t{1} << 32, "A"));  // exactly 2^32: usable
  EXPECT_THAT(m.source->Next("o", {}),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("at most 4294967296 in one range")));
  EXPECT_THAT(m.source->Next("o", {}), IsOk());
}

// CONTRACT.md R17: a node far behind the one that issued the range a
// request reports refuses the report; it is asked again without it.
TEST(GrpcRangeSourceTest, RefusedEchoIsAskedAgainWithoutIt) {
  for (const grpc::StatusCode code : {grpc::StatusCode::FAILED_PRECONDITION,
                                      grpc::StatusCode::INVALID_ARGUMENT}) {
    MockTargets m = MakeMockTargets(1);
    std::vector<hilo::v1::NextRangeRequest> requests;
    EXPECT_CALL(*m.a, NextRange(_, _, _))
        .WillOnce([&](grpc::ClientContext*,
                      const hilo::v1::NextRangeRequest& request,
                      hilo::v1::NextRangeResponse*) {
          requests.push_back(request);
          return grpc::Status(code, "last_max 5000000000 is far above Max");
        })
        .WillOnce([&](grpc::ClientContext* context,
                      const hilo::v1::NextRangeRequest& request,
                      hilo::v1::NextRangeResponse* response) {
          requests.push_back(request);
          return Reply(101, 132, "B")(context, request, response);
        });
    PreviousRange previous;
    previous.size = 32;
    previous.range_at = absl::FromUnixSeconds(1'800'000'000);
    previous.max = 5'000'000'032;
    previous.held.Add("A", 5'000'000'001, 5'000'000'032);
    absl::StatusOr<IssuedRange> r = m.source->Next("o", previous);
    ASSERT_THAT(r, IsOk());
    EXPECT_EQ(r->low, 101);
    ASSERT_EQ(requests.size(), 2u);
    EXPECT_EQ(requests[0].last_max(), 5'000'000'032);
    EXPECT_EQ(requests[1].collection(), "o");
    EXPECT_EQ(requests[1].last_max(), 0);
    EXPECT_EQ(requests[1].last_size(), 0);
    EXPECT_FALSE(requests[1].has_last_range_at());
  }
}

// Without the echo, a node that forgot numbers of its own (restored from
// an old backup) could offer this client its own numbers again: R11's
// numbers of that node still refuse them.
TEST(GrpcRangeSourceTest, RangeWithoutTheEchoIsStillJudgedByTheNodesNumbers) {
  MockTargets m = MakeMockTargets(1);
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(Return(
          grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "far above")))
      .WillOnce(Reply(1001, 1032, "A"));
  PreviousRange previous;
  previous.max = 5'000'000'032;
  previous.held.Add("A", 1, 1032);
  EXPECT_THAT(m.source->Next("o", previous),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("1001-1032 of tag \"A\", which overlaps "
                                 "1-1032")));
}

TEST(GrpcRangeSourceTest, RefusalOfAFirstRequestIsNotAskedAgain) {
  MockTargets m = MakeMockTargets(1);
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(
          Return(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad name")));
  EXPECT_THAT(m.source->Next("o", {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(GrpcRangeSourceTest, AllTargetsDownIsUnavailableNamingEachTarget) {
  MockTargets m = MakeMockTargets();
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(Return(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")));
  EXPECT_CALL(*m.b, NextRange(_, _, _))
      .WillOnce(
          Return(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "timeout")));
  absl::StatusOr<IssuedRange> r = m.source->Next("orders", {});
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kUnavailable,
                          AllOf(HasSubstr("node-a:1"), HasSubstr("node-b:2"),
                                HasSubstr("orders"))));
}

// Replies that break the contract: never used; INTERNAL when no target gives
// a usable range.
struct BadReply {
  const char* name;
  int64_t low, high;
  std::string tag;
};

void PrintTo(const BadReply& r, std::ostream* os) { *os << r.name; }

class GrpcRangeSourceBadReplyTest : public ::testing::TestWithParam<BadReply> {
};

TEST_P(GrpcRangeSourceBadReplyTest, IsInternalFromTheOnlyTarget) {
  const BadReply& bad = GetParam();
  MockTargets m = MakeMockTargets(1);
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(Reply(bad.low, bad.high, bad.tag, 7));
  absl::StatusOr<IssuedRange> r = m.source->Next("o", {});
  ASSERT_FALSE(r.ok()) << r->low << "-" << r->high << " " << r->node_tag;
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInternal, HasSubstr("node-a:1")));
}

TEST_P(GrpcRangeSourceBadReplyTest, FailsOverToATargetThatBehaves) {
  const BadReply& bad = GetParam();
  MockTargets m = MakeMockTargets();
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(Reply(bad.low, bad.high, bad.tag, 7));
  EXPECT_CALL(*m.b, NextRange(_, _, _))
      .WillOnce(Reply(1, 32, "B", 8))
      .WillOnce(Reply(33, 64, "B", 9));
  absl::StatusOr<IssuedRange> r = m.source->Next("o", {});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->node_tag, "B");
  EXPECT_EQ(r->source, 1u);
  EXPECT_EQ(m.source->Next("o", {})->low, 33);  // stays with b
}

TEST_P(GrpcRangeSourceBadReplyTest, IsInternalNamingEveryTargetWhenAllFail) {
  const BadReply& bad = GetParam();
  MockTargets m = MakeMockTargets();
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(Reply(bad.low, bad.high, bad.tag, 7));
  EXPECT_CALL(*m.b, NextRange(_, _, _))
      .WillOnce(Return(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")));
  absl::StatusOr<IssuedRange> r = m.source->Next("orders", {});
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInternal,
                          AllOf(HasSubstr("node-a:1"),
                                HasSubstr("node-b:2: UNAVAILABLE: down"))));
}

INSTANTIATE_TEST_SUITE_P(
    Replies, GrpcRangeSourceBadReplyTest,
    ::testing::Values(BadReply{"LowZero", 0, 31, "A"},
                      BadReply{"LowNegative", -5, 3, "A"},
                      BadReply{"HighBelowLow", 10, 9, "A"},
                      BadReply{"TagEmpty", 1, 32, ""},
                      BadReply{"TagOfFive", 1, 32, "ABCDE"},
                      BadReply{"TagOfEight", 1, 32, "ABCDEFGH"},
                      BadReply{"TagLowerCase", 1, 32, "a"},
                      BadReply{"TagWithDash", 1, 32, "A-"},
                      BadReply{"TagWithSpace", 1, 32, "A B"},
                      BadReply{"TagWithNul", 1, 32, std::string("A\0B", 3)},
                      BadReply{"TagNotAscii", 1, 32, "\xC3\x84"}),
    [](const ::testing::TestParamInfo<BadReply>& info) {
      return std::string(info.param.name);
    });

// CONTRACT R11: a range at or below the highest number the client holds or
// handed out from that node would hand those numbers out again.
TEST(GrpcRangeSourceTest, RangeAtOrBelowWhatTheClientHasFromThatNodeIsRefused) {
  MockTargets m = MakeMockTargets(1);
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce(Reply(1, 32, "A", 7))
      .WillOnce(Reply(20, 83, "A", 8))
      .WillOnce(Reply(32, 95, "A", 9))
      .WillOnce(Reply(33, 96, "A", 10))
      .WillOnce(Reply(1, 32, "B", 11));
  PreviousRange previous = Previous(32, kT0, 32);
  previous.held.Add("A", 1, 32);
  for (const char* range : {"1-32", "20-83", "32-95"}) {
    EXPECT_THAT(
        m.source->Next("o", previous),
        StatusIs(
            absl::StatusCode::kInternal,
            AllOf(HasSubstr("node-a:1"),
                  HasSubstr(absl::StrCat("replied with ", range,
                                         " of tag \"A\", which overlaps 1-32, "
                                         "numbers the client holds")))));
  }
  EXPECT_EQ(m.source->Next("o", previous)->low, 33);
  // Another node's numbers are other IDs (their tag tells them apart).
  EXPECT_EQ(m.source->Next("o", previous)->node_tag, "B");
  EXPECT_EQ(m.source->failovers(), 0);
}

TEST(GrpcRangeSourceTest, RangeBelowWhatTheClientHasFailsOverAndCountsIt) {
  MockTargets m = MakeMockTargets();
  EXPECT_CALL(*m.a, NextRange(_, _, _)).WillOnce(Reply(1, 32, "A", 7));
  EXPECT_CALL(*m.b, NextRange(_, _, _)).WillOnce(Reply(33, 96, "B", 8));
  PreviousRange previous = Previous(32, kT0, 32);
  previous.held.Add("A", 1, 32);
  absl::StatusOr<IssuedRange> r = m.source->Next("o", previous);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->node_tag, "B");
  EXPECT_EQ(r->low, 33);
  EXPECT_EQ(m.source->failovers(), 1);
}

TEST(GrpcRangeSourceTest, TagsOfOneToFourOfAToZAndDigitsAreAccepted) {
  for (const char* tag : {"A", "Z", "0", "9", "Z9", "AB12", "ZZZZ"}) {
    MockTargets m = MakeMockTargets(1);
    EXPECT_CALL(*m.a, NextRange(_, _, _)).WillOnce(Reply(1, 32, tag, 7));
    absl::StatusOr<IssuedRange> r = m.source->Next("o", {});
    ASSERT_THAT(r, IsOk()) << tag << ": " << r.status();
    EXPECT_EQ(r->node_tag, tag);
  }
}

TEST(GrpcRangeSourceTest, SendsPreviousRangeAndReturnsToIssuingTarget) {
  MockTargets m = MakeMockTargets();
  PreviousRange previous = Previous(64, kT0, 640);
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
        response->set_range_token(0xfeed'beef'0000'0042);
        return grpc::Status::OK;
      });
  absl::StatusOr<IssuedRange> range = m.source->Next("o", previous);
  ASSERT_THAT(range, IsOk());
  EXPECT_EQ(range->token, 0xfeed'beef'0000'0042);
  IssuedRange from_b = *range;
  from_b.source = 1;
  from_b.node_tag = "B";
  EXPECT_CALL(*m.a, ReturnRange(_, _, _)).Times(0);
  EXPECT_CALL(*m.b, ReturnRange(_, _, _))
      .WillOnce([](grpc::ClientContext*,
                   const hilo::v1::ReturnRangeRequest& request,
                   hilo::v1::ReturnRangeResponse* response) {
        EXPECT_EQ(request.collection(), "o");
        EXPECT_EQ(request.end(), 768);
        EXPECT_EQ(request.last(), 700);
        EXPECT_EQ(request.node_tag(), "B");
        EXPECT_EQ(request.range_token(), 0xfeed'beef'0000'0042);
        response->set_applied(true);
        response->set_max(700);
        return grpc::Status::OK;
      });
  absl::StatusOr<ReturnResult> returned = m.source->Return("o", from_b, 700);
  ASSERT_THAT(returned, IsOk());
  EXPECT_TRUE(returned->applied);
  EXPECT_EQ(returned->max, 700);
}

// ReturnMany: each node gets its own items, in batches of at most 1000,
// and each item's result (its own code, or applied and Max) comes back in
// the caller's order.
TEST(GrpcRangeSourceTest, ReturnManyBatchesEachNodesItemsAndKeepsItemCodes) {
  MockTargets m = MakeMockTargets();
  constexpr int kItems = 1500;  // for node a: a batch of 1000, then 500
  std::vector<IssuedRange> ranges(kItems + 1, TokenedRange());
  std::vector<std::string> names(kItems + 1);
  std::vector<internal::ReturnRequest> items;
  for (int i = 0; i <= kItems; ++i) {
    names[i] = absl::StrCat("c", i);
    ranges[i].token = 1000 + i;
    if (i == kItems) ranges[i].source = 1;  // the last one is node b's
    items.push_back({names[i], &ranges[i], 4});
  }
  // Node a refuses item c7 with its own code; the rest apply.
  auto answer = [](grpc::ClientContext*,
                   const hilo::v1::ReturnRangesRequest& request,
                   hilo::v1::ReturnRangesResponse* response) {
    for (const hilo::v1::ReturnRangeRequest& item : request.returns()) {
      hilo::v1::ReturnRangeResult* result = response->add_results();
      EXPECT_EQ(item.range_token(),
                1000u + std::stoul(item.collection().substr(1)));
      if (item.collection() == "c7") {
        result->set_code(grpc::StatusCode::PERMISSION_DENIED);
        result->set_message("may not");
      } else {
        result->set_applied(true);
        result->set_max(item.last());
      }
    }
    return grpc::Status::OK;
  };
  std::vector<int> sizes;  // batches may go at once
  base::Mutex sizes_mu;
  EXPECT_CALL(*m.a, ReturnRanges(_, _, _))
      .Times(2)
      .WillRepeatedly([&](grpc::ClientContext* context,
                          const hilo::v1::ReturnRangesRequest& request,
                          hilo::v1::ReturnRangesResponse* response) {
        {
          base::MutexLock lock(&sizes_mu);
          sizes.push_back(request.returns_size());
        }
        return answer(context, request, response);
      });
  EXPECT_CALL(*m.b, ReturnRanges(_, _, _))
      .WillOnce([&](grpc::ClientContext* context,
                    const hilo::v1::ReturnRangesRequest& request,
                    hilo::v1::ReturnRangesResponse* response) {
        EXPECT_EQ(request.returns_size(), 1);
        EXPECT_EQ(request.returns(0).collection(), names[kItems]);
        return answer(context, request, response);
      });
  EXPECT_CALL(*m.a, ReturnRange(_, _, _)).Times(0);
  EXPECT_CALL(*m.b, ReturnRange(_, _, _)).Times(0);
  const std::vector<absl::StatusOr<ReturnResult>> results =
      m.source->ReturnMany(items);
  ASSERT_EQ(results.size(), items.size());
  std::sort(sizes.begin(), sizes.end());
  EXPECT_THAT(sizes, ::testing::ElementsAre(500, 1000));
  for (int i = 0; i <= kItems; ++i) {
    if (i == 7) {
      EXPECT_THAT(results[i], StatusIs(absl::StatusCode::kPermissionDenied,
                                       HasSubstr("node-a:1: may not")));
    } else {
      ASSERT_THAT(results[i], IsOk()) << i;
      EXPECT_TRUE(results[i]->applied);
      EXPECT_EQ(results[i]->max, 4);
    }
  }
}

class GrpcRangeSourceReturnRetryTest
    : public ::testing::TestWithParam<grpc::StatusCode> {};

TEST_P(GrpcRangeSourceReturnRetryTest, RetriesToTheSameTarget) {
  MockTargets m = MakeMockTargets();
  EXPECT_CALL(*m.b, ReturnRange(_, _, _)).Times(0);
  EXPECT_CALL(*m.a, ReturnRange(_, _, _))
      .WillOnce(Return(grpc::Status(GetParam(), "blip")))
      .WillOnce(Return(grpc::Status(GetParam(), "blip")))
      .WillOnce(Returned(true, 5));
  absl::StatusOr<ReturnResult> r = m.source->Return("o", TokenedRange(), 5);
  ASSERT_THAT(r, IsOk());
  EXPECT_TRUE(r->applied);
}

TEST_P(GrpcRangeSourceReturnRetryTest, GivesUpAfterItsAttempts) {
  MockTargets m = MakeMockTargets();
  EXPECT_CALL(*m.b, ReturnRange(_, _, _)).Times(0);
  EXPECT_CALL(*m.a, ReturnRange(_, _, _))
      .Times(3)
      .WillRepeatedly(Return(grpc::Status(GetParam(), "down")));
  absl::StatusOr<ReturnResult> r = m.source->Return("o", TokenedRange(), 5);
  EXPECT_THAT(r, StatusIs(static_cast<absl::StatusCode>(GetParam()),
                          AllOf(HasSubstr("node-a:1"), HasSubstr("3 times"))));
}

// An attempt that times out must leave time for the next: each gets an
// equal share of what is left of rpc_deadline.
TEST_P(GrpcRangeSourceReturnRetryTest, EachAttemptGetsAShareOfTheDeadline) {
  MockTargets m = MakeMockTargets(
      1, absl::Seconds(30), {.attempts = 3, .backoff = absl::ZeroDuration()});
  std::vector<absl::Duration> budgets;
  ExpectFailedReturnAttempts(*m.a, 3, GetParam(), &budgets);
  EXPECT_FALSE(m.source->Return("o", TokenedRange(), 5).ok());
  ASSERT_EQ(budgets.size(), 3u);
  // The mock answers at once, so nearly all 30 s are left each time.
  EXPECT_LE(budgets[0], absl::Seconds(10));  // a third
  EXPECT_GT(budgets[0], absl::Seconds(9));
  EXPECT_LE(budgets[1], absl::Seconds(15));  // half
  EXPECT_GT(budgets[1], absl::Seconds(14));
  EXPECT_GT(budgets[2], absl::Seconds(29));  // the rest
}

TEST_P(GrpcRangeSourceReturnRetryTest, ReturnWithoutTokenIsSentOnce) {
  // A range from a server older than tokens: a copy of its return could
  // apply after the numbers were issued again.
  MockTargets m = MakeMockTargets();
  EXPECT_CALL(*m.a, ReturnRange(_, _, _))
      .WillOnce(Return(grpc::Status(GetParam(), "down")));
  absl::StatusOr<ReturnResult> r =
      m.source->Return("o", TokenedRange(/*token=*/0), 5);
  EXPECT_THAT(r, StatusIs(static_cast<absl::StatusCode>(GetParam())));
}

TEST_P(GrpcRangeSourceReturnRetryTest, NoRetryThatCannotFinishWithinDeadline) {
  // The backoff alone would pass rpc_deadline: nothing is slept, and no
  // second call is made.
  MockTargets m = MakeMockTargets(
      1, absl::Seconds(1), {.attempts = 3, .backoff = absl::Seconds(30)});
  EXPECT_CALL(*m.a, ReturnRange(_, _, _))
      .WillOnce(Return(grpc::Status(GetParam(), "down")));
  const absl::Time start = absl::Now();
  absl::StatusOr<ReturnResult> r = m.source->Return("o", TokenedRange(), 5);
  EXPECT_THAT(r, StatusIs(static_cast<absl::StatusCode>(GetParam())));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

INSTANTIATE_TEST_SUITE_P(Codes, GrpcRangeSourceReturnRetryTest,
                         ::testing::Values(grpc::StatusCode::UNAVAILABLE,
                                           grpc::StatusCode::DEADLINE_EXCEEDED),
                         [](const auto& info) {
                           return info.param == grpc::StatusCode::UNAVAILABLE
                                      ? "Unavailable"
                                      : "DeadlineExceeded";
                         });

// Every call's deadline reaches gRPC as a span from the call's start, which
// gRPC measures on its monotonic clock: no later step of the wall clock can
// move it (a point in wall-clock time would move with every step).
TEST(GrpcRangeSourceTest, EveryDeadlineReachesGrpcAsASpan) {
  MockTargets m = MakeMockTargets(1, absl::Seconds(3));
  std::vector<std::pair<gpr_clock_type, absl::Duration>> deadlines;
  auto record = [&](grpc::ClientContext* context) {
    deadlines.emplace_back(context->raw_deadline().clock_type,
                           Budget(*context));
  };
  EXPECT_CALL(*m.a, NextRange(_, _, _))
      .WillOnce([&](grpc::ClientContext* context,
                    const hilo::v1::NextRangeRequest& request,
                    hilo::v1::NextRangeResponse* response) {
        record(context);
        return Reply(1, 32, "A", 7)(context, request, response);
      });
  EXPECT_CALL(*m.a, ReturnRanges(_, _, _))
      .WillOnce([&](grpc::ClientContext* context,
                    const hilo::v1::ReturnRangesRequest&,
                    hilo::v1::ReturnRangesResponse*) {
        record(context);
        return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no");
      });
  EXPECT_CALL(*m.a, ReturnRange(_, _, _))
      .WillOnce([&](grpc::ClientContext* context,
                    const hilo::v1::ReturnRangeRequest& request,
                    hilo::v1::ReturnRangeResponse* response) {
        record(context);
        return Returned(true, 4)(context, request, response);
      });
  absl::StatusOr<IssuedRange> range = m.source->Next("o", {});
  ASSERT_THAT(range, IsOk());
  const internal::ReturnRequest item{"o", &*range, 4};
  ASSERT_THAT(m.source->ReturnMany({&item, 1})[0], IsOk());
  ASSERT_EQ(deadlines.size(), 3u);
  for (const auto& [clock_type, budget] : deadlines) {
    EXPECT_EQ(clock_type, GPR_TIMESPAN);
    EXPECT_GT(budget, absl::Milliseconds(900));  // a third of 3 s at least
    EXPECT_LE(budget, absl::Seconds(3));
  }
  EXPECT_EQ(deadlines[0].second, absl::Seconds(3));  // NextRange: it all
}

// The wall clock steps back while a return's attempts run (here: the
// monotonic clock moves on by each attempt's whole budget, as a server that
// never answers makes it, while the wall clock does not move, which is
// what the retry loop would see if the wall clock had been set back by as
// much). The attempts still end when rpc_deadline is over: each got a
// third of it, nothing more.
TEST(GrpcRangeSourceTest, WallClockStepBackDoesNotStretchReturnRetries) {
  ManualMonotonicClock clock;
  MockTargets m =
      MakeMockTargets(1, absl::Seconds(3),
                      {.attempts = 3, .backoff = absl::ZeroDuration()}, &clock);
  std::vector<absl::Duration> budgets;
  // Each attempt waits out its deadline.
  ExpectFailedReturnAttempts(*m.a, 3, grpc::StatusCode::DEADLINE_EXCEEDED,
                             &budgets, &clock);
  EXPECT_THAT(m.source->Return("o", TokenedRange(), 5),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("3 times within 3s")));
  ASSERT_EQ(budgets.size(), 3u);
  for (const absl::Duration budget : budgets) {
    EXPECT_GT(budget, absl::Milliseconds(999)) << budget;
    EXPECT_LE(budget, absl::Seconds(1)) << budget;
  }
  EXPECT_LE(clock.Elapsed(), absl::Seconds(3));
}

// The wall clock steps forward past the deadline right after the first
// attempt failed (here: it moves past a 1 ms rpc_deadline while the
// monotonic clock stands still). The retries still happen: no time has
// passed for them.
TEST(GrpcRangeSourceTest, WallClockStepForwardDoesNotCutReturnRetries) {
  ManualMonotonicClock clock;
  MockTargets m =
      MakeMockTargets(1, absl::Milliseconds(1),
                      {.attempts = 3, .backoff = absl::ZeroDuration()}, &clock);
  EXPECT_CALL(*m.a, ReturnRange(_, _, _))
      .WillOnce([&](grpc::ClientContext*, const hilo::v1::ReturnRangeRequest&,
                    hilo::v1::ReturnRangeResponse*) {
        // The wall clock passes the deadline (bounded: a few ms).
        const absl::Time passed = absl::Now() + absl::Milliseconds(3);
        while (absl::Now() < passed) absl::SleepFor(absl::Milliseconds(1));
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "reset");
      })
      .WillOnce(Return(grpc::Status(grpc::StatusCode::UNAVAILABLE, "reset")))
      .WillOnce(Returned(true, 5));
  absl::StatusOr<ReturnResult> r = m.source->Return("o", TokenedRange(), 5);
  ASSERT_THAT(r, IsOk());
  EXPECT_TRUE(r->applied);
  EXPECT_EQ(clock.Elapsed(), absl::ZeroDuration());
}

TEST(GrpcRangeSourceTest, ReturnIsNotRetriedOnOtherErrors) {
  for (const grpc::StatusCode code :
       {grpc::StatusCode::FAILED_PRECONDITION,
        grpc::StatusCode::INVALID_ARGUMENT,
        grpc::StatusCode::RESOURCE_EXHAUSTED, grpc::StatusCode::INTERNAL}) {
    MockTargets m = MakeMockTargets();
    EXPECT_CALL(*m.a, ReturnRange(_, _, _))
        .WillOnce(Return(grpc::Status(code, "no")));
    absl::StatusOr<ReturnResult> r = m.source->Return("o", TokenedRange(), 5);
    EXPECT_THAT(r, StatusIs(static_cast<absl::StatusCode>(code)));
  }
}

// However many returns come before it, a pair is never split across two
// ReturnRanges calls (batches of one node may go at once, in any order),
// and no call passes the batch limits.
TEST(GrpcRangeSourceTest, ReturnManyNeverSplitsAPairAcrossCalls) {
  struct Case {
    size_t singles;     // items before the pair
    size_t name_bytes;  // of each collection name
  };
  std::vector<Case> cases;
  for (size_t n = 990; n <= 1002; ++n) cases.push_back({n, 8});
  for (size_t n = 190; n <= 230; ++n) cases.push_back({n, 256});
  for (const Case& c : cases) {
    MockTargets m = MakeMockTargets(1);
    std::vector<std::string> names;
    for (size_t i = 0; i <= c.singles; ++i) {
      std::string name = absl::StrCat("c", i);
      name.resize(c.name_bytes, 'x');
      names.push_back(std::move(name));
    }
    std::vector<IssuedRange> ranges(c.singles + 2, TokenedRange());
    for (size_t i = 0; i < ranges.size(); ++i) ranges[i].token = 1 + i;
    std::vector<internal::ReturnRequest> items;
    for (size_t i = 0; i < c.singles; ++i) {
      items.push_back({names[i], &ranges[i], 4});
    }
    // The pair: the later range whole, then the earlier one's tail.
    ranges[c.singles].low = 33;
    ranges[c.singles].high = 64;
    items.push_back({names[c.singles], &ranges[c.singles], 32,
                     /*with_next=*/true});
    items.push_back({names[c.singles], &ranges[c.singles + 1], 4});
    std::vector<std::vector<std::string>> calls;
    base::Mutex calls_mu;
    EXPECT_CALL(*m.a, ReturnRanges(_, _, _))
        .WillRepeatedly([&](grpc::ClientContext*,
                            const hilo::v1::ReturnRangesRequest& request,
                            hilo::v1::ReturnRangesResponse* response) {
          std::vector<std::string> lines;
          for (const hilo::v1::ReturnRangeRequest& item : request.returns()) {
            lines.push_back(absl::StrFormat("%s end %d last %d",
                                            item.collection().substr(0, 6),
                                            item.end(), item.last()));
            hilo::v1::ReturnRangeResult* result = response->add_results();
            result->set_applied(true);
            result->set_max(item.last());
          }
          EXPECT_LE(request.returns_size(), 1000);
          EXPECT_LE(request.ByteSizeLong(), size_t{60 * 1024});
          base::MutexLock lock(&calls_mu);
          calls.push_back(std::move(lines));
          return grpc::Status::OK;
        });
    const std::vector<absl::StatusOr<ReturnResult>> results =
        m.source->ReturnMany(items);
    ASSERT_EQ(results.size(), items.size());
    for (const auto& r : results) ASSERT_THAT(r, IsOk());
    const std::string pair_name = names[c.singles].substr(0, 6);
    const std::string later = pair_name + " end 64 last 32";
    const std::string tail = pair_name + " end 32 last 4";
    size_t holding = 0;
    for (const std::vector<std::string>& call : calls) {
      auto it = std::find(call.begin(), call.end(), later);
      if (it == call.end()) {
        EXPECT_EQ(std::find(call.begin(), call.end(), tail), call.end())
            << "the tail went without the later range; " << c.singles
            << " items before the pair, names of " << c.name_bytes;
        continue;
      }
      ++holding;
      ASSERT_NE(it + 1, call.end())
          << "the pair was split; " << c.singles << " items before it, "
          << "names of " << c.name_bytes;
      EXPECT_EQ(*(it + 1), tail);
    }
    EXPECT_EQ(holding, 1u);
    size_t sent = 0;
    for (const auto& call : calls) sent += call.size();
    EXPECT_EQ(sent, items.size());
  }
}

// A name that is not UTF-8 would fail on the wire: INVALID_ARGUMENT, as the
// server would answer, and nothing is sent (CONTRACT.md R13, R19).
TEST(GrpcRangeSourceTest, NameThatIsNotUtf8IsInvalidArgumentAndNotSent) {
  MockTargets m = MakeMockTargets(1);
  EXPECT_CALL(*m.a, NextRange(_, _, _)).WillOnce(Reply(1, 32, "A"));
  for (const absl::string_view bad :
       {absl::string_view("u\xffx"), absl::string_view("u\xc0\xafx"),
        absl::string_view("u\xed\xa0\x80x"),
        absl::string_view("u\xf4\x90\x80\x80"),
        absl::string_view("u\xe2\x82")}) {
    EXPECT_THAT(m.source->Next(bad, {}),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("is not valid UTF-8")))
        << absl::CHexEscape(bad);
  }
  EXPECT_THAT(m.source->Next("u\xf0\x9f\x98\x80x", {}), IsOk());
}

}  // namespace
}  // namespace hilo
