// hilo::AdminClient against a live in-process server, including the health
// service through a drain.
#include "hilo/admin_client.h"

#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/client.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::testing::HasSubstr;

class AdminClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ =
        testing_util::StartServer(testing_util::TestServerOptions(dir_, "D"));
    ASSERT_NE(server_, nullptr);
    auto admin = AdminClient::Create(testing_util::Address(server_->port()));
    ASSERT_THAT(admin, IsOk());
    admin_ = *std::move(admin);
  }

  TempDir dir_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<AdminClient> admin_;
};

TEST_F(AdminClientTest, HealthIsServingThenNotServingWhileDraining) {
  EXPECT_EQ(*admin_->CheckHealth(), ServingStatus::kServing);
  server_->StartDraining();
  EXPECT_EQ(*admin_->CheckHealth(), ServingStatus::kNotServing);
  // Draining still serves calls until shutdown.
  auto stub = testing_util::NewStub(server_->port());
  grpc::ClientContext context;
  hilo::v1::NextRangeRequest request;
  request.set_collection("orders");
  hilo::v1::NextRangeResponse response;
  EXPECT_THAT(stub->NextRange(&context, request, &response), IsOk());
}

// The database file deleted under the server: health NOT_SERVING and
// every call UNAVAILABLE, naming no path (hilo_server also exits: see
// server_main_test).
TEST_F(AdminClientTest, HealthIsNotServingOnceTheDatabaseFileIsDeleted) {
  EXPECT_EQ(*admin_->CheckHealth(), ServingStatus::kServing);
  ASSERT_EQ(unlink(dir_.File("hilo-D.db").c_str()), 0);
  EXPECT_THAT(server_->CheckDatabaseFileForTesting(),
              StatusIs(absl::StatusCode::kUnavailable,
                       "the server's database file was removed or replaced; "
                       "this node stops serving"));
  EXPECT_EQ(*admin_->CheckHealth(), ServingStatus::kNotServing);
  auto stub = testing_util::NewStub(server_->port());
  grpc::ClientContext context;
  hilo::v1::NextRangeRequest request;
  request.set_collection("orders");
  hilo::v1::NextRangeResponse response;
  const grpc::Status status = stub->NextRange(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(),
            "the server's database file was removed or replaced; this node "
            "stops serving");
}

TEST_F(AdminClientTest, HealthOfAnUnknownServiceIsNotFound) {
  absl::StatusOr<ServingStatus> status = admin_->CheckHealth("no.such.Service");
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(AdminClientTest, GetListAndSetFloorRoundTrip) {
  ASSERT_THAT(admin_->SetFloor("orders", 70), IsOk());
  absl::StatusOr<CollectionInfo> info = admin_->GetCollection("orders");
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->name, "orders");
  EXPECT_EQ(info->max, 70);
  EXPECT_EQ(info->return_floor, 70);
  EXPECT_EQ(info->node_tag, "D");
  absl::StatusOr<CollectionPage> page = admin_->ListCollections(0, "");
  ASSERT_THAT(page, IsOk());
  ASSERT_EQ(page->collections.size(), 1u);
  EXPECT_EQ(page->collections[0].max, 70);
  EXPECT_EQ(page->next_page_token, "");
  EXPECT_THAT(admin_->GetCollection("x"),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(AdminClientCreateTest, UnreachableNodeIsUnavailableNamingIt) {
  auto admin = AdminClient::Create("127.0.0.1:1", nullptr, absl::Seconds(2));
  ASSERT_THAT(admin, IsOk());
  absl::StatusOr<ServingStatus> status = (*admin)->CheckHealth();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable,
                               HasSubstr("127.0.0.1:1")));
}

TEST(TlsCredentialsFromFilesTest, NamesTheMissingFileAndRejectsHalfPairs) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> missing =
      TlsCredentialsFromFiles("/nonexistent/ca.pem");
  EXPECT_THAT(missing, StatusIs(absl::StatusCode::kUnavailable,
                                HasSubstr("/nonexistent/ca.pem")));
  EXPECT_THAT(TlsCredentialsFromFiles("", "cert.pem", ""),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace hilo
