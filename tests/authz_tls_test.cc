// The authorization policy over real TLS: certificates made by openssl for
// the run, an in-process server on 127.0.0.1:0, raw gRPC stubs so every
// status is seen exactly as a client sees it.
#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "hilo/v1/hilo.grpc.pb.h"
#include "prometheus/text_serializer.h"
#include "service/access/line_writer.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"
#include "testing/threads_end_before_exit.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::ReadFile;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::hilo::testing_util::WriteFile;
using ::testing::HasSubstr;

// Every call's deadline: a bound, not a speed target (see tls_test.cc).
constexpr std::chrono::seconds kCallBound(60);
constexpr char kToken[] = "b7e1f0c2a9d84e5f8a1b2c3d4e5f6a7b";

// The handshakes ran on gRPC's pool threads: the binary exits only once
// they have ended, or LeakSanitizer may report OpenSSL's per-thread state
// as leaked (see testing/threads_end_before_exit.h).
const ::testing::Environment* const kThreadsEndBeforeExit =
    ::testing::AddGlobalTestEnvironment(new testing_util::ThreadsEndBeforeExit(
        // The servers' shared stderr writer lasts as long as the
        // process: started before the count, it is not a thread a
        // test left behind.
        [] { StderrLines(); }));

class AuthzTlsTest : public testing_util::CertificateTest {
 protected:
  static void SetUpTestSuite() {
    // A CA; a server certificate for 127.0.0.1; client certificates whose
    // identity is a SPIFFE URI SAN, a DNS SAN, or only a subject CN.
    const std::string commands = absl::StrCat(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
        "-nodes -keyout ca.key -out ca.pem -days 2 -subj '/CN=authz test ca'\n",
        "sign() {  # name cn san\n",
        "  if [ -n \"$3\" ]; then printf 'subjectAltName=%s\\n' \"$3\" > "
        "$1.ext; else : > $1.ext; fi\n",
        "  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout $1.key -out $1.csr -subj \"/CN=$2\"\n",
        "  openssl x509 -req -in $1.csr -CA ca.pem -CAkey ca.key "
        "-CAcreateserial -out $1.pem -days 2 -extfile $1.ext\n",
        "}\n", "sign server server 'IP:127.0.0.1'\n",
        "sign orders orders-cn 'URI:spiffe://test/orders'\n",
        "sign reader reader-cn 'DNS:reader.test'\n", "sign ops ops ''\n");
    MakeCertificates(commands);
  }

  void SetUp() override {
    CertificateTest::SetUp();
    if (HasFatalFailure()) return;
    WriteFile(policy_, R"pb(
      grant {
        identity: "uri:spiffe://test/orders"
        collections: "orders"
        collections: "orders/*"
      }
      grant { identity: "dns:reader.test" admin: ADMIN_READ_ONLY }
      grant { identity: "cn:ops" collections: "*" admin: ADMIN_SET_FLOOR }
      grant { identity: "token:billing" collections: "billing" }
    )pb");
    WriteFile(tokens_, absl::StrCat("billing ", kToken, "\n"));
  }

  // mtls: clients must present a certificate from the CA; otherwise TLS
  // alone (a mesh that terminates mTLS in front, and bearer tokens).
  void StartServer(bool mtls) {
    ServerOptions options = TlsServerOptions(dir_, mtls);
    ASSERT_NE(options.credentials, nullptr);
    options.authz_policy = policy_;
    options.authz_tokens = tokens_;
    options.audit_log = dir_.File("audit.jsonl");
    options.max_last_max_jump = 1000;
    server_ = testing_util::StartServer(options);
    ASSERT_NE(server_, nullptr);
  }

  // A channel presenting `who`'s certificate ("" for none).
  std::shared_ptr<grpc::Channel> Channel(const std::string& who) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFile(Pki("ca.pem"));
    if (!who.empty()) {
      ssl.pem_cert_chain = ReadFile(Pki(who + ".pem"));
      ssl.pem_private_key = ReadFile(Pki(who + ".key"));
    }
    return grpc::CreateChannel(testing_util::Address(server_->port()),
                               grpc::SslCredentials(ssl));
  }

  grpc::Status Next(const std::string& who, const std::string& collection,
                    int64_t last_max = 0, const std::string& token = "",
                    hilo::v1::NextRangeResponse* out = nullptr) {
    auto stub = hilo::v1::HiLo::NewStub(Channel(who));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kCallBound);
    if (!token.empty()) {
      context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    }
    hilo::v1::NextRangeRequest request;
    request.set_collection(collection);
    request.set_last_max(last_max);
    hilo::v1::NextRangeResponse response;
    return stub->NextRange(&context, request, out ? out : &response);
  }

  grpc::Status SetFloor(const std::string& who, const std::string& collection,
                        int64_t floor) {
    auto stub = hilo::v1::HiLoAdmin::NewStub(Channel(who));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kCallBound);
    hilo::v1::SetFloorRequest request;
    request.set_collection(collection);
    request.set_floor(floor);
    hilo::v1::SetFloorResponse response;
    return stub->SetFloor(&context, request, &response);
  }

  grpc::Status Get(const std::string& who, const std::string& collection) {
    auto stub = hilo::v1::HiLoAdmin::NewStub(Channel(who));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kCallBound);
    hilo::v1::GetCollectionRequest request;
    request.set_collection(collection);
    hilo::v1::GetCollectionResponse response;
    return stub->GetCollection(&context, request, &response);
  }

  std::string Metrics() {
    return prometheus::TextSerializer().Serialize(
        server_->metrics()->registry()->Collect());
  }

  TempDir dir_;
  std::string policy_ = dir_.File("policy.textproto");
  std::string tokens_ = dir_.File("tokens");
  std::unique_ptr<Server> server_;
};

TEST_F(AuthzTlsTest, SpiffeIdentityUsesItsCollectionsOnly) {
  StartServer(/*mtls=*/true);
  hilo::v1::NextRangeResponse r;
  grpc::Status ok = Next("orders", "orders/eu", 0, "", &r);
  ASSERT_THAT(ok, IsOk());
  EXPECT_EQ(r.low(), 1);
  grpc::Status denied = Next("orders", "users");
  EXPECT_THAT(
      denied,
      StatusIs(absl::StatusCode::kPermissionDenied,
               "uri:spiffe://test/orders may not call NextRange on collection "
               "\"users\""));
  EXPECT_FALSE(server_->store()->Get("users")->has_value());
}

TEST_F(AuthzTlsTest, AdminIsDeniedToAnIdOnlyIdentity) {
  StartServer(/*mtls=*/true);
  grpc::Status denied = SetFloor("orders", "orders", 100);
  EXPECT_THAT(
      denied,
      StatusIs(absl::StatusCode::kPermissionDenied,
               "uri:spiffe://test/orders may not call SetFloor on collection "
               "\"orders\""));
  EXPECT_THAT(Get("orders", "orders"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_FALSE(server_->store()->Get("orders")->has_value());
}

TEST_F(AuthzTlsTest, ReadOnlyAdminReadsButIsRefusedSetFloor) {
  StartServer(/*mtls=*/true);
  ASSERT_THAT(SetFloor("ops", "orders", 100), IsOk());
  EXPECT_THAT(Get("reader", "orders"), IsOk());
  grpc::Status denied = SetFloor("reader", "orders", 200);
  EXPECT_THAT(
      denied,
      StatusIs(
          absl::StatusCode::kPermissionDenied,
          "dns:reader.test may not call SetFloor on collection \"orders\""));
  EXPECT_EQ(server_->store()->Get("orders")->value().max, 100);
}

TEST_F(AuthzTlsTest, BearerTokenCallerRightWrongAndNone) {
  StartServer(/*mtls=*/false);
  EXPECT_THAT(Next("", "billing", 0, kToken), IsOk());
  grpc::Status wrong = Next("", "billing", 0, "not-the-token-0123456789");
  EXPECT_THAT(
      wrong, StatusIs(absl::StatusCode::kUnauthenticated,
                      "anonymous sent a bearer token this server does not know "
                      "(calling NextRange)"));
  grpc::Status none = Next("", "billing");
  EXPECT_THAT(
      none,
      StatusIs(absl::StatusCode::kPermissionDenied,
               "anonymous may not call NextRange on collection \"billing\""));
  EXPECT_EQ(server_->store()->Get("billing")->value().max, 32);
  // The token never reaches the audit trail (whole once the server stops).
  server_->Shutdown(absl::ZeroDuration());
  EXPECT_THAT(ReadFile(dir_.File("audit.jsonl")),
              ::testing::Not(HasSubstr(kToken)));
}

TEST_F(AuthzTlsTest, PolicyReloadRevokesACallerMidRun) {
  StartServer(/*mtls=*/true);
  ASSERT_THAT(Next("orders", "orders"), IsOk());
  WriteFile(policy_, "grant { identity: \"cn:ops\" collections: \"*\" }\n");
  ASSERT_THAT(server_->ReloadAuthz(), IsOk());
  grpc::Status revoked = Next("orders", "orders");
  EXPECT_THAT(
      revoked,
      StatusIs(absl::StatusCode::kPermissionDenied,
               "uri:spiffe://test/orders may not call NextRange on collection "
               "\"orders\""));
  EXPECT_EQ(server_->store()->Get("orders")->value().max, 32);
}

TEST_F(AuthzTlsTest, BadPolicyIsRefusedAndTheOldOneKept) {
  StartServer(/*mtls=*/true);
  WriteFile(policy_, "grant { identity: \"cn:ops\" admin: ADMIN_ROOT }\n");
  absl::Status bad = server_->ReloadAuthz();
  EXPECT_THAT(
      bad,
      StatusIs(absl::StatusCode::kInvalidArgument,
               absl::StrCat("authz policy ", policy_,
                            " line 1 column 46: Unknown enumeration value of "
                            "\"ADMIN_ROOT\" for field \"admin\".")));
  EXPECT_THAT(Next("orders", "orders"), IsOk());
}

TEST_F(AuthzTlsTest, GuardRailOverTheWireAndAdminExempt) {
  StartServer(/*mtls=*/true);
  ASSERT_THAT(Next("orders", "orders"), IsOk());  // Max 32
  grpc::Status over = Next("orders", "orders", 32 + 1001);
  EXPECT_THAT(over, StatusIs(absl::StatusCode::kFailedPrecondition,
                             HasSubstr("last_max 1033 is 1001 above Max 32")));
  EXPECT_THAT(Next("orders", "orders", 32 + 1000), IsOk());
  EXPECT_THAT(Next("ops", "orders", 1'000'000), IsOk());
  EXPECT_EQ(server_->store()->Get("orders")->value().max, 1'000'032);
}

TEST_F(AuthzTlsTest, DeniedCounterAndAuditLineHaveExactValues) {
  StartServer(/*mtls=*/true);
  const std::string before = Metrics();
  EXPECT_THAT(before, HasSubstr("hilo_requests_denied_total{method="
                                "\"NextRange\",reason=\"permission\"} 0\n"));
  ASSERT_THAT(Next("orders", "users"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  ASSERT_THAT(Next("orders", "users"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  ASSERT_THAT(SetFloor("reader", "x", 5),
              StatusIs(absl::StatusCode::kPermissionDenied));
  ASSERT_THAT(Next("orders", "orders", 5000),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  const std::string after = Metrics();
  EXPECT_THAT(after, HasSubstr("hilo_requests_denied_total{method="
                               "\"NextRange\",reason=\"permission\"} 2\n"));
  EXPECT_THAT(after, HasSubstr("hilo_requests_denied_total{method="
                               "\"SetFloor\",reason=\"permission\"} 1\n"));
  EXPECT_THAT(after, HasSubstr("hilo_requests_denied_total{method="
                               "\"NextRange\",reason=\"guard_rail\"} 1\n"));
  EXPECT_THAT(after, HasSubstr("hilo_requests_denied_total{method="
                               "\"GetCollection\",reason=\"permission\"} 0\n"));
  server_->Shutdown(absl::ZeroDuration());  // the audit log is whole
  const std::string audit = ReadFile(dir_.File("audit.jsonl"));
  EXPECT_THAT(audit,
              HasSubstr("\"identity\":\"dns:reader.test\",\"peer\":\"ipv4:127."
                        "0.0.1:"));
  EXPECT_THAT(audit,
              HasSubstr("\"method\":\"SetFloor\",\"collection\":\"x\","
                        "\"request\":{\"floor\":5},\"code\":"
                        "\"PERMISSION_DENIED\",\"message\":\"dns:reader.test "
                        "may not call SetFloor on collection \\\"x\\\"\"}\n"));
  EXPECT_THAT(audit, HasSubstr("\"request\":{\"last_max\":5000,"
                               "\"last_size\":0},\"code\":"
                               "\"FAILED_PRECONDITION\""));
}

}  // namespace
}  // namespace hilo
