// The hilo.v1.HiLo contract, exercised over real gRPC against an in-process
// server on 127.0.0.1:0 with a manual clock.
#include "service/hilo_service.h"

#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "hilo/v1/conversions.h"
#include "testing/status_matchers.h"
#include "tests/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::hilo::v1::NextRangeRequest;
using ::hilo::v1::NextRangeResponse;
using ::hilo::v1::ReturnRangeRequest;
using ::hilo::v1::ReturnRangeResponse;
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

TEST_F(HiLoServiceTest, RangeHalvesAfter60Seconds) {
  MustNext(Next("orders"));
  clock_.Advance(absl::Seconds(61));
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

}  // namespace
}  // namespace hilo
