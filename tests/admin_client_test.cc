// hilo::AdminClient against a live in-process server, including the health
// service through a drain.
#include "hilo/admin_client.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/client.h"
#include "tests/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing::TempDir;
using ::testing::HasSubstr;

class AdminClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::StartServer(testing::TestServerOptions(dir_, "D"));
    ASSERT_NE(server_, nullptr);
    auto admin = AdminClient::Create(testing::Address(server_->port()));
    ASSERT_TRUE(admin.ok()) << admin.status();
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
  auto stub = testing::NewStub(server_->port());
  grpc::ClientContext context;
  hilo::v1::NextRangeRequest request;
  request.set_collection("orders");
  hilo::v1::NextRangeResponse response;
  EXPECT_TRUE(stub->NextRange(&context, request, &response).ok());
}

TEST_F(AdminClientTest, HealthOfAnUnknownServiceIsNotFound) {
  absl::StatusOr<ServingStatus> status = admin_->CheckHealth("no.such.Service");
  EXPECT_EQ(status.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(AdminClientTest, GetListAndSetFloorRoundTrip) {
  ASSERT_TRUE(admin_->SetFloor("orders", 70).ok());
  absl::StatusOr<CollectionInfo> info = admin_->GetCollection("orders");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name, "orders");
  EXPECT_EQ(info->max, 70);
  EXPECT_EQ(info->return_floor, 70);
  EXPECT_EQ(info->node_tag, "D");
  absl::StatusOr<CollectionPage> page = admin_->ListCollections(0, "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->collections.size(), 1u);
  EXPECT_EQ(page->collections[0].max, 70);
  EXPECT_EQ(page->next_page_token, "");
  EXPECT_EQ(admin_->GetCollection("x").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(AdminClientCreateTest, UnreachableNodeIsUnavailableNamingIt) {
  auto admin = AdminClient::Create("127.0.0.1:1", nullptr, absl::Seconds(2));
  ASSERT_TRUE(admin.ok());
  absl::StatusOr<ServingStatus> status = (*admin)->CheckHealth();
  EXPECT_EQ(status.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.status().message(), HasSubstr("127.0.0.1:1"));
}

TEST(TlsCredentialsFromFilesTest, NamesTheMissingFileAndRejectsHalfPairs) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> missing =
      TlsCredentialsFromFiles("/nonexistent/ca.pem");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/ca.pem"));
  EXPECT_EQ(TlsCredentialsFromFiles("", "cert.pem", "").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hilo
