// A call with more than one authorization header (issue 36 item 9: with
// two, the first was read, so a proxy that appends its own header after a
// client's let the client's token through). Through a real server with a
// policy and a token file: refused UNAUTHENTICATED, naming the count,
// whichever header is valid; one header works as before.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "hilo/v1/hilo.grpc.pb.h"
#include "service/server.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::ReadFile;
using ::hilo::testing_util::TempDir;
using ::hilo::testing_util::WriteFile;
using ::testing::HasSubstr;

constexpr char kGood[] = "good-token-0123456789abcdef";
constexpr char kOther[] = "other-token-0123456789abcdef";

class AuthorizationHeadersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(dir_.File("policy.textproto"),
              "grant { identity: \"token:good\" collections: \"orders\" }\n"
              "grant { identity: \"token:other\" collections: \"other\" }\n");
    WriteFile(dir_.File("tokens"),
              absl::StrCat("good ", kGood, "\nother ", kOther, "\n"));
    ServerOptions options = testing_util::TestServerOptions(dir_);
    options.authz_policy = dir_.File("policy.textproto");
    options.authz_tokens = dir_.File("tokens");
    options.audit_log = dir_.File("audit.jsonl");
    server_ = testing_util::StartServer(options);
    ASSERT_NE(server_, nullptr);
    stub_ = testing_util::NewStub(server_->port());
  }

  grpc::Status Next(const std::vector<std::string>& tokens) {
    grpc::ClientContext context;
    for (const std::string& token : tokens) {
      context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    }
    hilo::v1::NextRangeRequest request;
    request.set_collection("orders");
    hilo::v1::NextRangeResponse response;
    return stub_->NextRange(&context, request, &response);
  }

  TempDir dir_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<hilo::v1::HiLo::Stub> stub_;
};

TEST_F(AuthorizationHeadersTest, OneHeaderIsReadAsBefore) {
  EXPECT_TRUE(Next({kGood}).ok());
  EXPECT_EQ(Next({kOther}).error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(AuthorizationHeadersTest, TwoHeadersAreRefusedWhicheverIsValid) {
  for (const std::vector<std::string>& tokens :
       std::vector<std::vector<std::string>>{{kGood, "unknown-token-000000"},
                                             {"unknown-token-000000", kGood},
                                             {kOther, kGood},
                                             {kGood, kGood}}) {
    SCOPED_TRACE(absl::StrCat(tokens[0], " ", tokens[1]));
    const grpc::Status status = Next(tokens);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(status.error_message(),
              "anonymous sent 2 authorization headers; a call may carry one "
              "at most (calling NextRange)");
  }
  server_->Shutdown(absl::ZeroDuration());  // the audit log is whole
  const std::string audit = ReadFile(dir_.File("audit.jsonl"));
  EXPECT_THAT(audit, HasSubstr("\"code\":\"UNAUTHENTICATED\",\"message\":"
                               "\"anonymous sent 2 authorization headers"));
  // Never a token in the log.
  EXPECT_THAT(audit, ::testing::Not(HasSubstr(kGood)));
}

}  // namespace
}  // namespace hilo
