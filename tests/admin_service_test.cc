// hilo.v1.HiLoAdmin over real gRPC: inspect, list, raise a floor.
#include "service/rpc/admin_service.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "service/store/validation.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class AdminServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Start([](ServerOptions&) {});
  }

  // (Re)starts the server on the same database, with options changed by
  // `change`.
  void Start(const std::function<void(ServerOptions&)>& change) {
    hilo_.reset();
    admin_.reset();
    server_.reset();
    ServerOptions options = testing_util::TestServerOptions(dir_, "C");
    options.clock = &clock_;
    options.window_clock = &clock_;  // the creation window too
    change(options);
    server_ = testing_util::StartServer(options);
    ASSERT_NE(server_, nullptr);
    auto channel = grpc::CreateChannel(testing_util::Address(server_->port()),
                                       grpc::InsecureChannelCredentials());
    hilo_ = hilo::v1::HiLo::NewStub(channel);
    admin_ = hilo::v1::HiLoAdmin::NewStub(channel);
  }

  hilo::v1::NextRangeResponse Next(const std::string& collection) {
    grpc::ClientContext context;
    hilo::v1::NextRangeRequest request;
    request.set_collection(collection);
    hilo::v1::NextRangeResponse response;
    EXPECT_THAT(hilo_->NextRange(&context, request, &response), IsOk());
    return response;
  }

  grpc::Status Get(const std::string& collection,
                   hilo::v1::GetCollectionResponse* response) {
    grpc::ClientContext context;
    hilo::v1::GetCollectionRequest request;
    request.set_collection(collection);
    return admin_->GetCollection(&context, request, response);
  }

  grpc::Status SetFloor(const std::string& collection, int64_t floor,
                        hilo::v1::SetFloorResponse* response) {
    grpc::ClientContext context;
    hilo::v1::SetFloorRequest request;
    request.set_collection(collection);
    request.set_floor(floor);
    return admin_->SetFloor(&context, request, response);
  }

  grpc::Status Delete(const std::string& collection) {
    grpc::ClientContext context;
    hilo::v1::DeleteCollectionRequest request;
    request.set_collection(collection);
    hilo::v1::DeleteCollectionResponse response;
    grpc::Status status =
        admin_->DeleteCollection(&context, request, &response);
    if (status.ok()) {
      EXPECT_EQ(response.node_tag(), "C");
    }
    return status;
  }

  // DeleteCollection with retire; the retired Max, or -1 on an error.
  grpc::Status Retire(const std::string& collection, int64_t* retired_max) {
    grpc::ClientContext context;
    hilo::v1::DeleteCollectionRequest request;
    request.set_collection(collection);
    request.set_retire(true);
    hilo::v1::DeleteCollectionResponse response;
    grpc::Status status =
        admin_->DeleteCollection(&context, request, &response);
    *retired_max = status.ok() ? response.retired_max() : -1;
    if (status.ok()) {
      EXPECT_EQ(response.node_tag(), "C");
    }
    return status;
  }

  // A return by the holder of `range` (the reply NextRange gave).
  hilo::v1::ReturnRangeResponse Return(const std::string& collection,
                                       const hilo::v1::NextRangeResponse& range,
                                       int64_t last) {
    grpc::ClientContext context;
    hilo::v1::ReturnRangeRequest request;
    request.set_collection(collection);
    request.set_end(range.high());
    request.set_last(last);
    request.set_range_token(range.range_token());
    hilo::v1::ReturnRangeResponse response;
    grpc::Status status = hilo_->ReturnRange(&context, request, &response);
    EXPECT_THAT(status, IsOk());
    return response;
  }

  grpc::Status List(int page_size, const std::string& token,
                    hilo::v1::ListCollectionsResponse* response) {
    grpc::ClientContext context;
    hilo::v1::ListCollectionsRequest request;
    request.set_page_size(page_size);
    request.set_page_token(token);
    return admin_->ListCollections(&context, request, response);
  }

  TempDir dir_;
  ManualClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  std::unique_ptr<Server> server_;
  std::unique_ptr<hilo::v1::HiLo::Stub> hilo_;
  std::unique_ptr<hilo::v1::HiLoAdmin::Stub> admin_;
};

TEST_F(AdminServiceTest, GetShowsMaxReturnFloorAndTimeOfLastChange) {
  Next("orders");
  clock_.Advance(absl::Seconds(5));
  Next("orders");
  hilo::v1::GetCollectionResponse response;
  ASSERT_THAT(Get("orders", &response), IsOk());
  EXPECT_EQ(response.collection().name(), "orders");
  EXPECT_EQ(response.collection().max(), 64);
  EXPECT_EQ(response.collection().return_floor(), 32);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  EXPECT_EQ(response.collection().last_low(), 33);  // still filled
#pragma GCC diagnostic pop
  EXPECT_EQ(response.collection().updated_at().seconds(), 1'800'000'005);
  EXPECT_EQ(response.node_tag(), "C");
}

TEST_F(AdminServiceTest, GetOfUnknownCollectionIsNotFound) {
  hilo::v1::GetCollectionResponse response;
  const grpc::Status status = Get("nothing", &response);
  EXPECT_THAT(status,
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"nothing\"")));
}

TEST_F(AdminServiceTest, BadNameIsInvalidArgument) {
  hilo::v1::GetCollectionResponse get;
  EXPECT_THAT(Get("", &get), StatusIs(absl::StatusCode::kInvalidArgument));
  hilo::v1::SetFloorResponse floor;
  EXPECT_THAT(SetFloor("a\tb", 5, &floor),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(server_->store()->Get("a\tb")->has_value());
}

TEST_F(AdminServiceTest, ListPagesThroughCollectionsInByteOrder) {
  for (const char* name : {"b", "a", "C", "aa", "\xC3\xA9"}) Next(name);
  std::vector<std::string> names;
  std::vector<int> page_sizes;
  std::string token;
  do {
    hilo::v1::ListCollectionsResponse response;
    ASSERT_THAT(List(2, token, &response), IsOk());
    page_sizes.push_back(response.collections_size());
    for (const auto& c : response.collections()) {
      names.push_back(c.name());
      EXPECT_EQ(c.max(), 32);
    }
    EXPECT_EQ(response.node_tag(), "C");
    token = response.next_page_token();
  } while (!token.empty());
  EXPECT_THAT(names, ElementsAre("C", "a", "aa", "b", "\xC3\xA9"));
  EXPECT_THAT(page_sizes, ElementsAre(2, 2, 1));
}

TEST_F(AdminServiceTest, ListOfEmptyStoreHasNoPages) {
  hilo::v1::ListCollectionsResponse response;
  ASSERT_THAT(List(0, "", &response), IsOk());
  EXPECT_EQ(response.collections_size(), 0);
  EXPECT_EQ(response.next_page_token(), "");
}

TEST_F(AdminServiceTest, ListRejectsBadPageSizeAndToken) {
  hilo::v1::ListCollectionsResponse response;
  EXPECT_THAT(List(-1, "", &response),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(List(1001, "", &response),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(List(10, "\n", &response),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(AdminServiceTest, SetFloorRaisesMaxAndNextRangeStartsAbove) {
  Next("orders");
  hilo::v1::SetFloorResponse response;
  ASSERT_THAT(SetFloor("orders", 5000, &response), IsOk());
  EXPECT_TRUE(response.raised());
  EXPECT_EQ(response.max(), 5000);
  EXPECT_EQ(Next("orders").low(), 5001);
}

TEST_F(AdminServiceTest, SetFloorNeverLowers) {
  Next("orders");
  hilo::v1::SetFloorResponse response;
  ASSERT_THAT(SetFloor("orders", 10, &response), IsOk());
  EXPECT_FALSE(response.raised());
  EXPECT_EQ(response.max(), 32);
  EXPECT_EQ(Next("orders").low(), 33);
}

TEST_F(AdminServiceTest, SetFloorCreatesAMissingCollection) {
  hilo::v1::SetFloorResponse response;
  ASSERT_THAT(SetFloor("imported", 100, &response), IsOk());
  EXPECT_TRUE(response.raised());
  EXPECT_EQ(response.max(), 100);
  EXPECT_EQ(Next("imported").low(), 101);
}

TEST_F(AdminServiceTest, SetFloorNegativeIsInvalidAndChangesNothing) {
  Next("orders");
  hilo::v1::SetFloorResponse response;
  EXPECT_THAT(SetFloor("orders", -1, &response),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(server_->store()->Get("orders")->value().max, 32);
}

TEST_F(AdminServiceTest, ReturnOfARangeIssuedBeforeTheFloorIsRefused) {
  const hilo::v1::NextRangeResponse held = Next("orders");  // 1-32, in use
  hilo::v1::SetFloorResponse floor;
  ASSERT_THAT(SetFloor("orders", 40, &floor), IsOk());
  hilo::v1::ReturnRangeResponse response = Return("orders", held, 5);
  EXPECT_FALSE(response.applied());
  EXPECT_EQ(response.max(), 40);
  EXPECT_EQ(Next("orders").low(), 41);
}

// An import declares numbers taken while a range is still out: the floor
// must bound that range's return too, although Max is already above it.
TEST_F(AdminServiceTest, FloorBelowMaxBoundsTheReturnOfARangeStillOut) {
  Next("orders");                                           // 1-32
  const hilo::v1::NextRangeResponse held = Next("orders");  // 33-64
  hilo::v1::SetFloorResponse floor;
  ASSERT_THAT(SetFloor("orders", 50, &floor), IsOk());
  EXPECT_FALSE(floor.raised());
  EXPECT_EQ(floor.max(), 64);
  hilo::v1::GetCollectionResponse row;
  ASSERT_THAT(Get("orders", &row), IsOk());
  EXPECT_EQ(row.collection().max(), 64);
  EXPECT_EQ(row.collection().return_floor(), 50);
  hilo::v1::ReturnRangeResponse below = Return("orders", held, 40);
  EXPECT_FALSE(below.applied());
  EXPECT_EQ(below.max(), 64);
  const hilo::v1::NextRangeResponse next = Next("orders");
  EXPECT_EQ(next.low(), 65);
  EXPECT_EQ(next.high(), 96);
}

TEST_F(AdminServiceTest, FloorAtMaxKeepsAWholeReturnFromStartingOver) {
  const hilo::v1::NextRangeResponse held = Next("orders");  // 1-32
  hilo::v1::SetFloorResponse floor;
  ASSERT_THAT(SetFloor("orders", 32, &floor), IsOk());
  EXPECT_FALSE(floor.raised());
  EXPECT_EQ(floor.max(), 32);
  hilo::v1::ReturnRangeResponse whole = Return("orders", held, 0);
  EXPECT_FALSE(whole.applied());
  EXPECT_EQ(whole.max(), 32);
  EXPECT_EQ(Next("orders").low(), 33);
}

TEST_F(AdminServiceTest, CreationsPerMinuteAreLimitedAndExistingOnesGoOn) {
  Start([](ServerOptions& o) { o.max_collection_creations_per_minute = 2; });
  Next("a");
  clock_.Advance(absl::Seconds(10));
  hilo::v1::SetFloorResponse floor;
  ASSERT_THAT(SetFloor("b", 0, &floor), IsOk());
  hilo::v1::NextRangeRequest request;
  request.set_collection("c");
  grpc::ClientContext context;
  hilo::v1::NextRangeResponse response;
  const grpc::Status status = hilo_->NextRange(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("collection \"c\" would be new, and this node already "
                        "created its limit of 2 collections in the last "
                        "minute (--max_collection_creations_per_minute); "
                        "retry in 50s"));
  EXPECT_EQ(SetFloor("d", 0, &floor).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  hilo::v1::GetCollectionResponse row;
  EXPECT_EQ(Get("c", &row).error_code(), grpc::StatusCode::NOT_FOUND);
  // Existing collections keep working.
  EXPECT_EQ(Next("a").low(), 33);
  EXPECT_THAT(SetFloor("b", 5, &floor), IsOk());
  // A minute after "a" was created, one more fits.
  clock_.Advance(absl::Seconds(50));
  EXPECT_EQ(Next("c").low(), 1);
  EXPECT_EQ(SetFloor("d", 0, &floor).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(AdminServiceTest, DeleteRemovesAnUnusedCollectionAndFreesItsPlace) {
  Start([](ServerOptions& o) { o.max_collections = 2; });
  hilo::v1::SetFloorResponse floor;
  ASSERT_THAT(SetFloor("typo", 0, &floor), IsOk());
  Next("orders");
  hilo::v1::NextRangeRequest request;
  request.set_collection("third");
  {
    grpc::ClientContext context;
    hilo::v1::NextRangeResponse response;
    EXPECT_EQ(hilo_->NextRange(&context, request, &response).error_code(),
              grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  ASSERT_THAT(Delete("typo"), IsOk());
  hilo::v1::GetCollectionResponse row;
  EXPECT_EQ(Get("typo", &row).error_code(), grpc::StatusCode::NOT_FOUND);
  // Its place under --max_collections is free again.
  EXPECT_EQ(Next("third").low(), 1);
}

TEST_F(AdminServiceTest, DeleteOfAUsedCollectionIsRefusedAndChangesNothing) {
  const hilo::v1::NextRangeResponse range = Next("orders");
  hilo::v1::GetCollectionResponse before;
  ASSERT_THAT(Get("orders", &before), IsOk());
  const grpc::Status status = Delete("orders");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrFormat("collection \"orders\" has Max %d",
                                        range.high())));
  hilo::v1::GetCollectionResponse after;
  ASSERT_THAT(Get("orders", &after), IsOk());
  EXPECT_EQ(after.collection().DebugString(),
            before.collection().DebugString());
  EXPECT_EQ(Next("orders").low(), range.high() + 1);
}

TEST_F(AdminServiceTest, DeleteOfAWhollyReturnedCollectionStartsOverAtOne) {
  const hilo::v1::NextRangeResponse range = Next("orders");
  ASSERT_TRUE(Return("orders", range, 0).applied());
  ASSERT_THAT(Delete("orders"), IsOk());
  EXPECT_EQ(Next("orders").low(), 1);
}

TEST_F(AdminServiceTest, RetireFreesAUsedCollectionsPlaceForGood) {
  Start([](ServerOptions& o) { o.max_collections = 2; });
  Next("flood-a");
  const hilo::v1::NextRangeResponse second = Next("flood-a");
  Next("flood-b");
  hilo::v1::NextRangeRequest request;
  request.set_collection("victim");
  {
    grpc::ClientContext context;
    hilo::v1::NextRangeResponse response;
    ASSERT_EQ(hilo_->NextRange(&context, request, &response).error_code(),
              grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  int64_t retired_max = 0;
  ASSERT_THAT(Retire("flood-a", &retired_max), IsOk());
  EXPECT_EQ(retired_max, second.high());
  hilo::v1::GetCollectionResponse row;
  EXPECT_EQ(Get("flood-a", &row).error_code(), grpc::StatusCode::NOT_FOUND);
  // Its place is free: the victim creates.
  EXPECT_EQ(Next("victim").low(), 1);
  // A return of the retired name's range is refused, and lowers nothing.
  const hilo::v1::ReturnRangeResponse late =
      Return("flood-a", second, second.low() - 1);
  EXPECT_FALSE(late.applied());
  EXPECT_EQ(late.max(), 0);
  ASSERT_THAT(Retire("flood-b", &retired_max), IsOk());
  // The name again: above every number it handed out.
  const hilo::v1::NextRangeResponse again = Next("flood-a");
  EXPECT_EQ(again.low(), second.high() + 1);
}

TEST_F(AdminServiceTest, RetireOfUnknownOrBadNameChangesNothing) {
  Next("orders");
  int64_t retired_max = 0;
  grpc::Status status = Retire("none", &retired_max);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(),
              HasSubstr("collection \"none\" has no row; there is nothing "
                        "to retire"));
  EXPECT_EQ(Retire("", &retired_max).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  hilo::v1::ListCollectionsResponse list;
  ASSERT_THAT(List(0, "", &list), IsOk());
  ASSERT_EQ(list.collections_size(), 1);
  EXPECT_EQ(list.collections(0).name(), "orders");
}

TEST_F(AdminServiceTest, DeleteOfUnknownOrBadNameChangesNothing) {
  EXPECT_EQ(Delete("none").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Delete("").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  hilo::v1::ListCollectionsResponse list;
  ASSERT_THAT(List(0, "", &list), IsOk());
  EXPECT_EQ(list.collections_size(), 0);
}

}  // namespace
}  // namespace hilo

namespace hilo {
namespace {

// 256-byte names: the reply of a 1000-row page would be over 280 KB.
std::string LongName(int i) {
  return absl::StrFormat("%03d", i) + std::string(253, 'n');
}

TEST_F(AdminServiceTest, ListReplyStopsAtItsByteBoundAndPagesOn) {
  Start([](ServerOptions& o) { o.max_list_reply_bytes = 1000; });
  for (int i = 0; i < 10; ++i) Next(LongName(i));
  std::vector<std::string> names;
  std::string token;
  int pages = 0;
  do {
    hilo::v1::ListCollectionsResponse page;
    ASSERT_THAT(List(1000, token, &page), IsOk());
    // Each collection is about 280 bytes: 4 of them pass 1000 bytes.
    EXPECT_LE(page.collections_size(), 3);
    EXPECT_LE(page.ByteSizeLong(), 1000u + 300);  // + node tag and token
    EXPECT_GE(page.collections_size(), 1);
    for (const hilo::v1::Collection& c : page.collections()) {
      names.push_back(c.name());
    }
    token = page.next_page_token();
    ++pages;
  } while (!token.empty() && pages < 20);
  ASSERT_EQ(names.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(names[i], LongName(i));
  EXPECT_GE(pages, 3);
}

TEST_F(AdminServiceTest, ListReplyOfTheDefaultBoundHoldsAtMost64KiB) {
  for (int i = 0; i < 300; ++i) Next(LongName(i));
  hilo::v1::ListCollectionsResponse page;
  ASSERT_THAT(List(1000, "", &page), IsOk());
  EXPECT_LE(page.ByteSizeLong(), 64u * 1024 + 300);  // + node tag and token
  EXPECT_LT(page.collections_size(), 300);
  EXPECT_FALSE(page.next_page_token().empty());
}

TEST_F(AdminServiceTest, SetFloorAboveTheGuardRailIsRefusedAndChangesNothing) {
  Next("orders");
  hilo::v1::SetFloorResponse response;
  for (int64_t floor : {std::numeric_limits<int64_t>::max(), kMaxFloor + 1}) {
    const grpc::Status status = SetFloor("orders", floor, &response);
    EXPECT_THAT(
        status,
        StatusIs(absl::StatusCode::kInvalidArgument,
                 HasSubstr("floor " + std::to_string(floor) +
                           " for collection \"orders\" is above the limit "
                           "4611686018427387904")));
  }
  hilo::v1::GetCollectionResponse row;
  ASSERT_THAT(Get("orders", &row), IsOk());
  EXPECT_EQ(row.collection().max(), 32);
  ASSERT_THAT(SetFloor("orders", kMaxFloor, &response), IsOk());
  EXPECT_EQ(response.max(), kMaxFloor);
}

// A collection an operator floored at the guard rail keeps working: its
// holders report last_max above 2^62, at or below Max, which raises nothing.
TEST_F(AdminServiceTest,
       RangesAboveTheGuardRailGoOnButNoRequestRaisesMaxThere) {
  hilo::v1::SetFloorResponse floored;
  ASSERT_THAT(SetFloor("orders", kMaxFloor, &floored), IsOk());
  const hilo::v1::NextRangeResponse first = Next("orders");
  ASSERT_EQ(first.low(), kMaxFloor + 1);
  auto next_after = [&](int64_t last_max, hilo::v1::NextRangeResponse* r) {
    grpc::ClientContext context;
    hilo::v1::NextRangeRequest request;
    request.set_collection("orders");
    request.set_last_size(first.high() - first.low() + 1);
    request.set_last_max(last_max);
    return hilo_->NextRange(&context, request, r);
  };
  hilo::v1::NextRangeResponse second;
  const grpc::Status ok = next_after(first.high(), &second);
  ASSERT_THAT(ok, IsOk());
  EXPECT_EQ(second.low(), first.high() + 1);
  // Above Max it is refused, and Max stays.
  hilo::v1::NextRangeResponse refused;
  const grpc::Status status = next_after(second.high() + 1000, &refused);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("above the limit")));
  hilo::v1::GetCollectionResponse row;
  ASSERT_THAT(Get("orders", &row), IsOk());
  EXPECT_EQ(row.collection().max(), second.high());
}

TEST_F(AdminServiceTest, SetFloorCreatesNoCollectionBeyondMaxCollections) {
  Start([](ServerOptions& o) { o.max_collections = 2; });
  hilo::v1::SetFloorResponse response;
  ASSERT_THAT(SetFloor("a", 10, &response), IsOk());
  ASSERT_THAT(SetFloor("b", 10, &response), IsOk());
  const grpc::Status status = SetFloor("c", 10, &response);
  EXPECT_THAT(status,
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("collection \"c\" would be new, and this node "
                                 "already stores its limit of 2 collections")));
  // Existing collections keep working.
  ASSERT_THAT(SetFloor("a", 20, &response), IsOk());
  EXPECT_EQ(response.max(), 20);
  hilo::v1::GetCollectionResponse row;
  EXPECT_THAT(Get("c", &row), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace hilo
