// The hilo.v1.HiLo contract, exercised over real gRPC against an in-process
// server on 127.0.0.1:0 with a manual clock.
#include "service/rpc/hilo_service.h"

#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "hilo/v1/conversions.h"
#include "service/access/collection_limit.h"
#include "service/rpc/admin_service.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::hilo::v1::NextRangeRequest;
using ::hilo::v1::NextRangeResponse;
using ::hilo::v1::ReturnRangeRequest;
using ::hilo::v1::ReturnRangeResponse;
using ::hilo::v1::ReturnRangeResult;
using ::hilo::v1::ReturnRangesRequest;
using ::hilo::v1::ReturnRangesResponse;
using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

google::protobuf::Timestamp Ts(absl::Time t) {
  google::protobuf::Timestamp ts;
  ToProtoTime(t, &ts);
  return ts;
}

NextRangeRequest Next(const std::string& collection, int64_t last_size = 0,
                      std::optional<absl::Time> last_range_at = std::nullopt,
                      int64_t last_max = 0) {
  NextRangeRequest request;
  request.set_collection(collection);
  request.set_last_size(last_size);
  request.set_last_max(last_max);
  if (last_range_at.has_value()) {
    *request.mutable_last_range_at() = Ts(*last_range_at);
  }
  return request;
}

ReturnRangeRequest ReturnRequest(const std::string& collection, int64_t end,
                                 int64_t last, const std::string& tag = "",
                                 uint64_t token = 0) {
  ReturnRangeRequest request;
  request.set_collection(collection);
  request.set_end(end);
  request.set_last(last);
  request.set_node_tag(tag);
  request.set_range_token(token);
  return request;
}

class HiLoServiceTest : public ::testing::Test {
 public:
  void SetUp() override { Start(/*allow_returns_without_token=*/false); }

  void Start(bool allow_returns_without_token,
             int64_t max_collections = kDefaultMaxCollections) {
    stub_.reset();
    server_.reset();
    ServerOptions options = testing_util::TestServerOptions(dir_, "A");
    options.clock = &clock_;
    options.allow_returns_without_token = allow_returns_without_token;
    options.max_collections = max_collections;
    server_ = testing_util::StartServer(options);
    ASSERT_NE(server_, nullptr);
    stub_ = testing_util::NewStub(server_->port());
  }

  // A return by the holder of the range of `collection` ending at `end`:
  // it carries the token NextRange gave with that range.
  ReturnRangeRequest Return(const std::string& collection, int64_t end,
                            int64_t last, const std::string& tag = "") {
    auto it = tokens_.find({collection, end});
    return ReturnRequest(collection, end, last, tag,
                         it == tokens_.end() ? 0 : it->second);
  }

  grpc::Status CallNext(const NextRangeRequest& request,
                        NextRangeResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    grpc::Status status = stub_->NextRange(&context, request, response);
    if (status.ok()) {
      tokens_[{request.collection(), response->high()}] =
          response->range_token();
    }
    return status;
  }
  grpc::Status CallReturn(const ReturnRangeRequest& request,
                          ReturnRangeResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    return stub_->ReturnRange(&context, request, response);
  }

  grpc::Status CallReturns(const std::vector<ReturnRangeRequest>& items,
                           ReturnRangesResponse* response) {
    ReturnRangesRequest request;
    for (const ReturnRangeRequest& item : items) *request.add_returns() = item;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    return stub_->ReturnRanges(&context, request, response);
  }
  // The results of a successful ReturnRanges, one per item.
  std::vector<ReturnRangeResult> MustReturns(
      const std::vector<ReturnRangeRequest>& items) {
    ReturnRangesResponse response;
    grpc::Status status = CallReturns(items, &response);
    EXPECT_THAT(status, IsOk());
    EXPECT_EQ(response.results_size(), static_cast<int>(items.size()));
    return {response.results().begin(), response.results().end()};
  }

  // The range of a successful NextRange, as {low, high}.
  std::pair<int64_t, int64_t> MustNext(const NextRangeRequest& request) {
    NextRangeResponse response;
    grpc::Status status = CallNext(request, &response);
    EXPECT_THAT(status, IsOk());
    return {response.low(), response.high()};
  }
  ReturnRangeResponse MustReturn(const ReturnRangeRequest& request) {
    ReturnRangeResponse response;
    grpc::Status status = CallReturn(request, &response);
    EXPECT_THAT(status, IsOk());
    return response;
  }

  std::optional<CollectionState> Row(absl::string_view collection) {
    absl::StatusOr<std::optional<CollectionState>> row =
        server_->store()->Get(collection);
    EXPECT_THAT(row, IsOk());
    return row.ok() ? *row : std::nullopt;
  }

  // Every stored row, in name order.
  std::vector<NamedCollectionState> Rows() {
    absl::StatusOr<std::vector<NamedCollectionState>> rows =
        server_->store()->List("", 1000);
    EXPECT_THAT(rows, IsOk());
    return rows.value_or(std::vector<NamedCollectionState>{});
  }

  TempDir dir_;
  ManualClock clock_{kStart};
  std::unique_ptr<Server> server_;
  std::unique_ptr<hilo::v1::HiLo::Stub> stub_;
  // range_token of each range NextRange gave, by collection and high.
  std::map<std::pair<std::string, int64_t>, uint64_t> tokens_;
};

using Pair = std::pair<int64_t, int64_t>;

TEST_F(HiLoServiceTest, NewCollectionGivesOneTo32ThenSecondClient33To64) {
  NextRangeResponse first;
  ASSERT_THAT(CallNext(Next("orders"), &first), IsOk());
  EXPECT_EQ(first.low(), 1);
  EXPECT_EQ(first.high(), 32);
  EXPECT_EQ(first.node_tag(), "A");
  EXPECT_EQ(first.range_at().seconds(), absl::ToUnixSeconds(kStart));
  EXPECT_EQ(MustNext(Next("orders")), Pair(33, 64));
}

// --max_collections: a NextRange that would create one collection more is
// RESOURCE_EXHAUSTED naming the collection and the limit; existing
// collections keep working, and the count survives a restart (it is read
// from the store at start).
TEST_F(HiLoServiceTest, NoNewCollectionBeyondMaxCollections) {
  Start(/*allow_returns_without_token=*/false, /*max_collections=*/3);
  for (const char* name : {"a", "b", "c"}) MustNext(Next(name));
  for (int restart = 0; restart < 2; ++restart) {
    NextRangeResponse response;
    const grpc::Status status = CallNext(Next("d"), &response);
    EXPECT_THAT(
        status,
        StatusIs(absl::StatusCode::kResourceExhausted,
                 HasSubstr("collection \"d\" would be new, and this node "
                           "already stores its limit of 3 collections")));
    EXPECT_EQ(MustNext(Next("a")).first, 32 * (restart + 1) + 1);
    EXPECT_EQ(Rows().size(), 3u);
    Start(/*allow_returns_without_token=*/false, /*max_collections=*/3);
  }
}

// Many new collections at once, none of them told to wait: the limit holds
// exactly, however the calls race.
TEST_F(HiLoServiceTest, RacingNewCollectionsStopAtMaxCollections) {
  Start(/*allow_returns_without_token=*/false, /*max_collections=*/10);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  std::atomic<int> exhausted{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto stub = testing_util::NewStub(server_->port());
      for (int i = 0; i < 5; ++i) {
        grpc::ClientContext context;
        NextRangeResponse response;
        const grpc::Status status = stub->NextRange(
            &context, Next(absl::StrCat("c", t, "-", i)), &response);
        if (status.ok()) ++ok;
        if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
          ++exhausted;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 10);
  EXPECT_EQ(exhausted.load(), 30);
  EXPECT_EQ(Rows().size(), 10u);
}

TEST_F(HiLoServiceTest, ReturnedTailIsHandedOutNext) {
  EXPECT_EQ(MustNext(Next("orders")), Pair(1, 32));
  ReturnRangeResponse returned = MustReturn(Return("orders", 32, 1));
  EXPECT_TRUE(returned.applied());
  EXPECT_EQ(returned.max(), 1);
  EXPECT_EQ(MustNext(Next("orders")), Pair(2, 33));
}

TEST_F(HiLoServiceTest, StaleReturnIsRefusedWithCurrentMax) {
  MustNext(Next("orders"));
  MustNext(Next("orders"));
  ReturnRangeResponse returned = MustReturn(Return("orders", 32, 3));
  EXPECT_FALSE(returned.applied());
  EXPECT_EQ(returned.max(), 64);
  EXPECT_EQ(MustNext(Next("orders")), Pair(65, 96));
}

TEST_F(HiLoServiceTest, ReturnBelowLastIssuedLowIsRefused) {
  MustNext(Next("orders"));  // 1-32, still in use by its client
  MustNext(Next("orders"));  // 33-64
  ReturnRangeResponse returned = MustReturn(Return("orders", 64, 20));
  EXPECT_FALSE(returned.applied());
  EXPECT_EQ(returned.max(), 64);
  EXPECT_EQ(Row("orders")->max, 64);
}

TEST_F(HiLoServiceTest, ReturnWithOwnTagIsApplied) {
  MustNext(Next("orders"));
  EXPECT_TRUE(MustReturn(Return("orders", 32, 4, "A")).applied());
  EXPECT_EQ(Row("orders")->max, 4);
}

TEST_F(HiLoServiceTest, ReturnWithAnotherNodesTagIsRefused) {
  MustNext(Next("orders"));
  ReturnRangeResponse returned = MustReturn(Return("orders", 32, 4, "B"));
  EXPECT_FALSE(returned.applied());
  EXPECT_EQ(returned.max(), 32);
  EXPECT_EQ(Row("orders")->max, 32);
}

TEST_F(HiLoServiceTest, EveryRangeCarriesItsOwnNonZeroToken) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 50; ++i) {
    NextRangeResponse response;
    ASSERT_THAT(CallNext(Next(i % 2 == 0 ? "a" : "b"), &response), IsOk());
    EXPECT_NE(response.range_token(), 0u);
    seen.insert(response.range_token());
  }
  EXPECT_EQ(seen.size(), 50u);
}

TEST_F(HiLoServiceTest, SameReturnTwiceAppliesOnce) {
  MustNext(Next("orders"));
  EXPECT_TRUE(MustReturn(Return("orders", 32, 4)).applied());
  ReturnRangeResponse again = MustReturn(Return("orders", 32, 4));
  EXPECT_FALSE(again.applied());
  EXPECT_EQ(again.max(), 4);
  EXPECT_EQ(MustNext(Next("orders")), Pair(5, 36));
}

// Without tokens, any caller could hand back a live range it never held
// (Max is visible in every refused return) and get it issued again.
TEST_F(HiLoServiceTest, CallerWithoutTheTokenCannotHandBackALiveRange) {
  MustNext(Next("orders"));  // held by another client
  for (uint64_t guess = 1; guess != 0; guess <<= 1) {
    ReturnRangeResponse stolen =
        MustReturn(ReturnRequest("orders", 32, 0, "", guess));
    EXPECT_FALSE(stolen.applied()) << guess;
  }
  EXPECT_EQ(MustNext(Next("orders")), Pair(33, 64));
}

TEST_F(HiLoServiceTest, ReturnWithoutTokenAppliesOnlyWhereAllowed) {
  Start(/*allow_returns_without_token=*/true);
  MustNext(Next("orders"));
  ReturnRangeResponse returned =
      MustReturn(ReturnRequest("orders", 32, 3));  // an old client
  EXPECT_TRUE(returned.applied());
  EXPECT_EQ(returned.max(), 3);
  EXPECT_EQ(MustNext(Next("orders")), Pair(4, 35));
}

// ReturnRanges: each item is judged as a ReturnRange of its own would be,
// in the order given, and gets its own result.

// The result of an item that was judged: applied or refused, with Max.
MATCHER_P2(Judged, applied, max, "") {
  return arg.code() == 0 && arg.message().empty() && arg.applied() == applied &&
         arg.max() == max;
}
// The result of an item refused with `code` before it was judged.
MATCHER_P2(Failed, code, message, "") {
  return arg.code() == static_cast<int>(code) &&
         absl::StrContains(arg.message(), message) && !arg.applied() &&
         arg.max() == 0;
}

TEST_F(HiLoServiceTest, ReturnRangesAppliesEveryGoodItem) {
  MustNext(Next("a"));  // 1-32
  MustNext(Next("b"));  // 1-32
  EXPECT_THAT(MustReturns({Return("a", 32, 3), Return("b", 32, 5, "A")}),
              ::testing::ElementsAre(Judged(true, 3), Judged(true, 5)));
  EXPECT_EQ(Row("a")->max, 3);
  EXPECT_EQ(Row("a")->return_floor, 3);
  EXPECT_EQ(Row("a")->range_token, 0u);  // retired
  EXPECT_EQ(Row("b")->max, 5);
  EXPECT_EQ(MustNext(Next("a")), Pair(4, 35));
  EXPECT_EQ(MustNext(Next("b")), Pair(6, 37));
}

TEST_F(HiLoServiceTest, ReturnRangesWithNoItemsAnswersNoResults) {
  EXPECT_THAT(MustReturns({}), ::testing::IsEmpty());
}

// The same return twice in one batch: the first applies and retires the
// token, so the second is refused, as a second ReturnRange would be.
TEST_F(HiLoServiceTest, ReturnRangesAppliesADuplicateItemOnce) {
  MustNext(Next("orders"));
  EXPECT_THAT(MustReturns({Return("orders", 32, 4), Return("orders", 32, 4)}),
              ::testing::ElementsAre(Judged(true, 4), Judged(false, 4)));
  EXPECT_EQ(MustNext(Next("orders")), Pair(5, 36));
}

// In the order given: the range fetched ahead whole, then the tail of the
// one before it, as a closing client sends them.
TEST_F(HiLoServiceTest, ReturnRangesJudgesItemsInOrder) {
  MustNext(Next("orders"));  // 1-32
  MustNext(Next("orders"));  // 33-64, right above it
  EXPECT_THAT(MustReturns({Return("orders", 64, 32), Return("orders", 32, 7)}),
              ::testing::ElementsAre(Judged(true, 32), Judged(true, 7)));
  EXPECT_EQ(Row("orders")->max, 7);
  // The other order: the tail first is refused (33-64 was issued last).
  MustNext(Next("x"));
  MustNext(Next("x"));
  EXPECT_THAT(MustReturns({Return("x", 32, 7), Return("x", 64, 32)}),
              ::testing::ElementsAre(Judged(false, 64), Judged(true, 32)));
  EXPECT_EQ(Row("x")->max, 32);
}

// Every rule of ReturnRange, one item each, in one batch: each item gets
// exactly the outcome it would get alone, and the bad ones change nothing.
TEST_F(HiLoServiceTest, ReturnRangesJudgesEachItemAlone) {
  for (const char* name : {"good", "stale", "below", "guess", "tokenless",
                           "tag", "negative", "args"}) {
    MustNext(Next(name));  // 1-32 each
  }
  MustNext(Next("stale"));  // 33-64: 1-32 is no longer the last issued
  MustNext(Next("below"));  // 33-64: its return floor is 32
  const std::vector<ReturnRangeResult> results = MustReturns({
      Return("good", 32, 3),
      Return("stale", 32, 3),
      ReturnRequest("guess", 32, 3, "", 12345),
      ReturnRequest("tokenless", 32, 3),
      Return("tag", 32, 3, "B"),
      Return("negative", 32, -1),
      Return("args", 32, 40),
      Return("", 32, 3),
      Return("below", 64, 20),
  });
  ASSERT_EQ(results.size(), 9u);
  EXPECT_THAT(results[0], Judged(true, 3));
  EXPECT_THAT(results[1], Judged(false, 64));
  EXPECT_THAT(results[2], Judged(false, 32));
  EXPECT_THAT(results[3], Failed(absl::StatusCode::kFailedPrecondition,
                                 "carries no range_token"));
  EXPECT_THAT(results[4], Judged(false, 32));
  EXPECT_THAT(results[5], Failed(absl::StatusCode::kInvalidArgument,
                                 "last is -1; it must not be negative"));
  EXPECT_THAT(results[6],
              Failed(absl::StatusCode::kInvalidArgument, "last 40 is above"));
  EXPECT_THAT(results[7], Failed(absl::StatusCode::kInvalidArgument,
                                 "collection name is empty"));
  EXPECT_THAT(results[8], Judged(false, 64));
  // Exactly one row moved.
  for (const NamedCollectionState& row : Rows()) {
    if (row.name == "good") {
      EXPECT_EQ(row.state.max, 3);
    } else if (row.name == "stale" || row.name == "below") {
      EXPECT_EQ(row.state.max, 64);
      EXPECT_EQ(row.state.return_floor, 32);
    } else {
      EXPECT_EQ(row.state.max, 32) << row.name;
      EXPECT_EQ(row.state.return_floor, 0) << row.name;
      EXPECT_NE(row.state.range_token, 0u) << row.name;
    }
  }
  EXPECT_EQ(Rows().size(), 8u);
}

TEST_F(HiLoServiceTest, ReturnRangesOverTheItemLimitAppliesNothing) {
  MustNext(Next("orders"));
  std::vector<ReturnRangeRequest> items(kMaxReturnRangesItems,
                                        Return("orders", 32, 4));
  items.push_back(Return("orders", 32, 4));  // one too many
  ReturnRangesResponse response;
  const grpc::Status status = CallReturns(items, &response);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(status.error_message(),
              HasSubstr("ReturnRanges carries 1001 items; the limit is 1000"));
  EXPECT_EQ(response.results_size(), 0);
  EXPECT_EQ(Row("orders")->max, 32);
  EXPECT_NE(Row("orders")->range_token, 0u);
  // At the limit it goes through: the first applies, the copies do not.
  items.pop_back();
  const std::vector<ReturnRangeResult> results = MustReturns(items);
  ASSERT_EQ(results.size(), static_cast<size_t>(kMaxReturnRangesItems));
  EXPECT_THAT(results[0], Judged(true, 4));
  EXPECT_THAT(results.back(), Judged(false, 4));
  EXPECT_EQ(Row("orders")->max, 4);
}

TEST_F(HiLoServiceTest, RangeDoublesWhenAskedAgainWithin30Seconds) {
  NextRangeResponse first;
  ASSERT_THAT(CallNext(Next("orders"), &first), IsOk());
  clock_.Advance(absl::Seconds(10));
  NextRangeRequest again = Next("orders", 32, kStart, 32);
  again.mutable_last_range_at()->CopyFrom(first.range_at());
  EXPECT_EQ(MustNext(again), Pair(33, 96));
}

TEST_F(HiLoServiceTest, RangeKeepsSizeBetween30And60Seconds) {
  MustNext(Next("orders"));
  clock_.Advance(absl::Seconds(45));
  EXPECT_EQ(MustNext(Next("orders", 64, kStart, 32)), Pair(33, 96));
}

TEST_F(HiLoServiceTest, RangeHalvesAfterFiveRunways) {
  MustNext(Next("orders"));
  clock_.Advance(absl::Seconds(151));
  EXPECT_EQ(MustNext(Next("orders", 128, kStart, 32)), Pair(33, 96));
}

TEST_F(HiLoServiceTest, RangeSizeIsClampedToLimits) {
  EXPECT_EQ(MustNext(Next("orders", int64_t{1} << 40, kStart)),
            Pair(1, 1 << 20));
  clock_.Advance(absl::Hours(1));
  const int64_t base = 1 << 20;
  EXPECT_EQ(MustNext(Next("orders", 32, kStart, base)),
            Pair(base + 1, base + 32));
}

TEST_F(HiLoServiceTest, FutureLastRangeAtCountsAsNow) {
  EXPECT_EQ(MustNext(Next("orders", 32, kStart + absl::Hours(3))), Pair(1, 64));
}

TEST_F(HiLoServiceTest, LastMaxKeepsRangesFromGoingDown) {
  // The client's previous range came from a node that is further ahead.
  EXPECT_EQ(MustNext(Next("orders", 0, std::nullopt, 1000)), Pair(1001, 1032));
  EXPECT_EQ(MustNext(Next("orders", 0, std::nullopt, 10)), Pair(1033, 1064));
}

TEST_F(HiLoServiceTest, RangeAtEchoesServerClock) {
  clock_.Advance(absl::Milliseconds(1500));
  NextRangeResponse response;
  ASSERT_THAT(CallNext(Next("orders"), &response), IsOk());
  EXPECT_EQ(response.range_at().seconds(), absl::ToUnixSeconds(kStart) + 1);
  EXPECT_EQ(response.range_at().nanos(), 500'000'000);
}

// A request that must be refused with `code`, leaving "orders" (1-32 issued)
// exactly as it was and creating no other row.
struct BadCase {
  std::string label;
  std::function<grpc::Status(HiLoServiceTest*)> call;
  grpc::StatusCode code;
  std::string message_part;
};

std::string Invalid(const char* bytes, size_t n) { return {bytes, n}; }

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.label; }

class HiLoServiceBadInputTest : public HiLoServiceTest,
                                public ::testing::WithParamInterface<BadCase> {
};

TEST_P(HiLoServiceBadInputTest, IsRefusedAndChangesNothing) {
  MustNext(Next("orders"));
  const std::optional<CollectionState> before = Row("orders");
  ASSERT_TRUE(before.has_value());
  clock_.Advance(absl::Seconds(1));

  const grpc::Status status = GetParam().call(this);
  EXPECT_THAT(status, StatusIs(static_cast<absl::StatusCode>(GetParam().code),
                               HasSubstr(GetParam().message_part)));

  const std::optional<CollectionState> after = Row("orders");
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->max, before->max);
  EXPECT_EQ(after->return_floor, before->return_floor);
  EXPECT_EQ(after->range_token, before->range_token);
  EXPECT_EQ(after->previous_token, before->previous_token);
  EXPECT_EQ(after->updated_at, before->updated_at);
  const std::vector<NamedCollectionState> rows = Rows();
  ASSERT_EQ(rows.size(), 1u)
      << "a refused request created a row: " << rows.back().name;
  EXPECT_EQ(rows[0].name, "orders");
}

grpc::Status NextOf(HiLoServiceTest* t, NextRangeRequest request) {
  NextRangeResponse response;
  return t->CallNext(request, &response);
}

grpc::Status ReturnOf(HiLoServiceTest* t, ReturnRangeRequest request) {
  ReturnRangeResponse response;
  return t->CallReturn(request, &response);
}

INSTANTIATE_TEST_SUITE_P(
    Table, HiLoServiceBadInputTest,
    ::testing::Values(
        BadCase{"NextEmptyName",
                [](HiLoServiceTest* t) { return NextOf(t, Next("")); },
                grpc::StatusCode::INVALID_ARGUMENT, "empty"},
        BadCase{"Next257ByteName",
                [](HiLoServiceTest* t) {
                  return NextOf(t, Next(std::string(257, 'o')));
                },
                grpc::StatusCode::INVALID_ARGUMENT, "257 bytes"},
        BadCase{"NextControlCharacter",
                [](HiLoServiceTest* t) { return NextOf(t, Next("orders\n")); },
                grpc::StatusCode::INVALID_ARGUMENT, "control character"},
        BadCase{
            "NextNegativeLastSize",
            [](HiLoServiceTest* t) { return NextOf(t, Next("orders", -1)); },
            grpc::StatusCode::INVALID_ARGUMENT, "last_size"},
        BadCase{"NextNegativeLastMax",
                [](HiLoServiceTest* t) {
                  return NextOf(t, Next("orders", 0, std::nullopt, -5));
                },
                grpc::StatusCode::INVALID_ARGUMENT, "last_max"},
        BadCase{"NextInvalidTimestamp",
                [](HiLoServiceTest* t) {
                  NextRangeRequest r = Next("orders", 32, kStart);
                  r.mutable_last_range_at()->set_nanos(-1);
                  return NextOf(t, r);
                },
                grpc::StatusCode::INVALID_ARGUMENT, "last_range_at"},
        // The guard rail: no request may move Max past 2^62, where one
        // call could leave the collection OUT_OF_RANGE for good.
        BadCase{"NextLastMaxNearInt64Max",
                [](HiLoServiceTest* t) {
                  return NextOf(t,
                                Next("orders", 0, std::nullopt, INT64_MAX - 5));
                },
                grpc::StatusCode::INVALID_ARGUMENT,
                "above the limit 4611686018427387904"},
        BadCase{"NextLastMaxJustAboveTheLimit",
                [](HiLoServiceTest* t) {
                  return NextOf(t, Next("orders", 0, std::nullopt,
                                        (int64_t{1} << 62) + 1));
                },
                grpc::StatusCode::INVALID_ARGUMENT,
                "last_max 4611686018427387905 for collection \"orders\""},
        BadCase{"NextOversizedMessage",
                [](HiLoServiceTest* t) {
                  return NextOf(t, Next(std::string(100'000, 'o')));
                },
                grpc::StatusCode::RESOURCE_EXHAUSTED, ""},
        BadCase{"ReturnEmptyName",
                [](HiLoServiceTest* t) {
                  return ReturnOf(t, t->Return("", 32, 1));
                },
                grpc::StatusCode::INVALID_ARGUMENT, "empty"},
        BadCase{"ReturnLastAboveEnd",
                [](HiLoServiceTest* t) {
                  return ReturnOf(t, t->Return("orders", 32, 33));
                },
                grpc::StatusCode::INVALID_ARGUMENT, "above end"},
        BadCase{"ReturnNegativeLast",
                [](HiLoServiceTest* t) {
                  return ReturnOf(t, t->Return("orders", 32, -1));
                },
                grpc::StatusCode::INVALID_ARGUMENT, "last is -1"},
        BadCase{"ReturnNegativeEnd",
                [](HiLoServiceTest* t) {
                  return ReturnOf(t, t->Return("orders", -32, -40));
                },
                grpc::StatusCode::INVALID_ARGUMENT, "end is -32"},
        BadCase{"ReturnWithoutToken",
                [](HiLoServiceTest* t) {
                  return ReturnOf(t, ReturnRequest("orders", 32, 1));
                },
                grpc::StatusCode::FAILED_PRECONDITION, "range_token"},
        BadCase{"ReturnOfAnotherCollectionWithoutToken",
                [](HiLoServiceTest* t) {
                  return ReturnOf(t, ReturnRequest("other", 32, 0));
                },
                grpc::StatusCode::FAILED_PRECONDITION, "range_token"},
        BadCase{"ReturnZeroEnd",
                [](HiLoServiceTest* t) {
                  return ReturnOf(t, t->Return("orders", 0, 0));
                },
                grpc::StatusCode::INVALID_ARGUMENT, "end is 0"}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      return info.param.label;
    });

// Protobuf refuses a proto3 string that is not UTF-8 while parsing, before
// the service sees it; gRPC's callback server then answers UNIMPLEMENTED
// (gRPC 1.51 fails any request it cannot parse that way). Either way
// nothing changes.
TEST_F(HiLoServiceTest, InvalidUtf8OnTheWireIsRefusedAndChangesNothing) {
  MustNext(Next("orders"));
  NextRangeResponse response;
  grpc::Status next = CallNext(Next(Invalid("ord\xFF", 4)), &response);
  EXPECT_THAT(next, StatusIs(absl::StatusCode::kUnimplemented));
  ReturnRangeResponse returned;
  grpc::Status ret =
      CallReturn(ReturnRequest(Invalid("\xC0\x80", 2), 32, 1), &returned);
  EXPECT_THAT(ret, StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_EQ(Row("orders")->max, 32);
  EXPECT_EQ(Rows().size(), 1u);
}

// The service's own check, which any path that skips protobuf's meets.
TEST(HiLoServiceDirectTest, InvalidUtf8NameIsInvalidArgument) {
  TempDir dir;
  SqliteRangeStoreOptions options;
  options.path = dir.File("h.db");
  auto store = SqliteRangeStore::Open(options);
  ASSERT_THAT(store, IsOk());
  ManualClock clock(kStart);
  HiLoService service(store->get(), RangeSizePolicy({}), "A", &clock);
  NextRangeResponse next;
  absl::Status s = service.DoNextRange(Next(Invalid("ord\xFF", 4)), &next);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          HasSubstr("not valid UTF-8 at byte 3")));
  ReturnRangeResponse returned;
  s = service.DoReturnRange(ReturnRequest(Invalid("\xC0\x80", 2), 32, 1, "", 7),
                            &returned);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE((*store)->Get(Invalid("ord\xFF", 4))->has_value());
}

// A RangeStore that runs `after_get` once a GetAsync has found a row and
// before it answers: a DeleteCollection landing between a service's check
// that a collection exists and its write. With StallReads, every GetAsync
// fails instead, as a read stuck behind a flood on the store's one reading
// thread would. Everything else goes to `store`.
class RacingStore final : public RangeStore {
 public:
  RacingStore(RangeStore* store,
              std::function<void(absl::string_view)> after_get)
      : store_(store), after_get_(std::move(after_get)) {}

  void StallReads() { stall_reads_ = true; }

  void GetAsync(absl::string_view collection,
                StoreCallback<std::optional<CollectionState>> done) override {
    if (stall_reads_) {
      return done(absl::UnavailableError("the reading thread is stalled"));
    }
    absl::StatusOr<std::optional<CollectionState>> row =
        store_->Get(collection);
    if (row.ok() && row->has_value()) after_get_(collection);
    done(std::move(row));
  }
  void DeleteAsync(absl::string_view collection,
                   StoreCallback<CollectionState> done) override {
    store_->DeleteAsync(collection, std::move(done));
  }
  void RetireAsync(absl::string_view collection,
                   StoreCallback<CollectionState> done) override {
    store_->RetireAsync(collection, std::move(done));
  }
  int64_t collection_count() const override {
    return store_->collection_count();
  }
  absl::Status PutForTesting(absl::string_view collection,
                             const CollectionState& state) override {
    return store_->PutForTesting(collection, state);
  }

 protected:
  void DoAllocateAsync(absl::string_view collection, int64_t size,
                       int64_t floor, uint64_t token, int64_t max_floor_jump,
                       bool may_create,
                       StoreCallback<Allocation> done) override {
    if (!may_create) {
      return store_->AllocateExistingAsync(collection, size, floor, token,
                                           max_floor_jump, std::move(done));
    }
    store_->AllocateAsync(collection, size, floor, token, max_floor_jump,
                          std::move(done));
  }
  void DoReturnAsync(absl::string_view collection, int64_t end, int64_t last,
                     uint64_t token,
                     StoreCallback<ReturnOutcome> done) override {
    store_->ReturnAsync(collection, end, last, token, std::move(done));
  }
  void DoListAsync(
      absl::string_view after, int limit,
      StoreCallback<std::vector<NamedCollectionState>> done) override {
    store_->ListAsync(after, limit, std::move(done));
  }
  void DoSetFloorAsync(absl::string_view collection, int64_t floor,
                       StoreCallback<FloorOutcome> done) override {
    store_->SetFloorAsync(collection, floor, std::move(done));
  }

 private:
  RangeStore* const store_;
  std::function<void(absl::string_view)> after_get_;
  std::atomic<bool> stall_reads_{false};
};

// Issue 36 item 3: with the collection limit full (here the creations of
// the minute), a NextRange on an existing collection needs no read of the
// store (which once queued every such call behind the one reading thread):
// it is served with reads stalled, and a new name is refused for the limit
// without a row, all in the allocation's own transaction.
TEST(CollectionLimitRaceTest, AtTheLimitExistingCollectionsNeedNoRead) {
  TempDir dir;
  SqliteRangeStoreOptions options;
  options.path = dir.File("h.db");
  auto store = SqliteRangeStore::Open(options);
  ASSERT_THAT(store, IsOk());
  ManualClock clock(kStart);
  CollectionLimit limit(/*max=*/0, 0, /*max_creations_per_minute=*/1, &clock);
  RacingStore racing(store->get(), [](absl::string_view) {});
  HiLoService service(&racing, RangeSizePolicy({}), "A", &clock, nullptr, false,
                      &limit);
  NextRangeResponse next;
  ASSERT_THAT(service.DoNextRange(Next("a"), &next), IsOk());
  racing.StallReads();
  for (const int64_t low : {33, 65}) {
    ASSERT_THAT(service.DoNextRange(Next("a"), &next), IsOk());
    EXPECT_EQ(next.low(), low);
  }
  EXPECT_THAT(service.DoNextRange(Next("b"), &next),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("collection \"b\" would be new, and this "
                                 "node already created its limit of 1")));
  EXPECT_FALSE((*store)->Get("b")->has_value());
  EXPECT_EQ((*store)->collection_count(), 1);
  EXPECT_EQ(limit.count(), 1);
}

// At --max_collections, NextRange and SetFloor on an existing collection go
// ahead without a reservation. A DeleteCollection between their check and
// their write makes them create the row again; the limit counts that row,
// so the count stays full and a new collection is still refused.
TEST(CollectionLimitRaceTest, ARowCreatedAgainAfterADeleteIsCounted) {
  for (const bool set_floor : {false, true}) {
    SCOPED_TRACE(set_floor ? "SetFloor" : "NextRange");
    TempDir dir;
    SqliteRangeStoreOptions options;
    options.path = dir.File("h.db");
    auto store = SqliteRangeStore::Open(options);
    ASSERT_THAT(store, IsOk());
    // A row exactly like no row, which DeleteCollection takes.
    ASSERT_THAT((*store)->PutForTesting("a", CollectionState{}), IsOk());
    ManualClock clock(kStart);
    CollectionLimit limit(/*max=*/1, (*store)->collection_count(), 0, &clock);
    AdminService admin(store->get(), "A", kDefaultMaxListReplyBytes, &limit);
    RacingStore racing(store->get(), [&](absl::string_view collection) {
      hilo::v1::DeleteCollectionRequest request;
      request.set_collection(std::string(collection));
      hilo::v1::DeleteCollectionResponse response;
      EXPECT_THAT(admin.DoDeleteCollection(request, &response), IsOk());
    });
    HiLoService service(&racing, RangeSizePolicy({}), "A", &clock, nullptr,
                        false, &limit);
    AdminService racing_admin(&racing, "A", kDefaultMaxListReplyBytes, &limit);
    if (set_floor) {
      hilo::v1::SetFloorRequest request;
      request.set_collection("a");
      request.set_floor(5);
      hilo::v1::SetFloorResponse response;
      ASSERT_THAT(racing_admin.DoSetFloor(request, &response), IsOk());
    } else {
      NextRangeResponse next;
      ASSERT_THAT(service.DoNextRange(Next("a"), &next), IsOk());
      EXPECT_EQ(next.low(), 1);
    }
    EXPECT_EQ((*store)->collection_count(), 1);
    EXPECT_EQ(limit.count(), 1);
    NextRangeResponse next;
    EXPECT_THAT(service.DoNextRange(Next("b"), &next),
                StatusIs(absl::StatusCode::kResourceExhausted,
                         HasSubstr("limit of 1 collections")));
  }
}

}  // namespace
}  // namespace hilo
