// TLS and mTLS on the gRPC port, with a throwaway CA and certificates made by
// openssl for each test run.
#include "service/access/tls.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/admin_client.h"
#include "hilo/client.h"
#include "service/access/line_writer.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"
#include "testing/threads_end_before_exit.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// The handshakes ran on gRPC's pool threads: the binary exits only once
// they have ended, or LeakSanitizer may report OpenSSL's per-thread state
// as leaked (see testing/threads_end_before_exit.h).
const ::testing::Environment* const kThreadsEndBeforeExit =
    ::testing::AddGlobalTestEnvironment(new testing_util::ThreadsEndBeforeExit(
        // The servers' shared stderr writer lasts as long as the
        // process: started before the count, it is not a thread a
        // test left behind.
        [] { StderrLines(); }));

class TlsTest : public testing_util::CertificateTest {
 protected:
  static void SetUpTestSuite() {
    // A CA, a server certificate for 127.0.0.1 signed by it, a client
    // certificate signed by it, and a client certificate from another CA.
    const std::string commands = absl::StrCat(
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext\n",
        "for ca in ca other; do\n",
        "  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
        "-nodes -keyout $ca.key -out $ca.pem -days 2 -subj \"/CN=$ca test\"\n",
        "done\n", "sign() {  # name ca extfile\n",
        "  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout $1.key -out $1.csr -subj \"/CN=$1\"\n",
        "  openssl x509 -req -in $1.csr -CA $2.pem -CAkey $2.key "
        "-CAcreateserial -out $1.pem -days 2 $3\n",
        "}\n", "sign server ca '-extfile san.ext'\n", "sign client ca ''\n",
        "sign stranger other ''\n");
    MakeCertificates(commands);
  }

  // Starts a server; mtls also demands client certificates from our CA.
  void StartServer(bool mtls) {
    ServerOptions options = TlsServerOptions(dir_, mtls);
    ASSERT_NE(options.credentials, nullptr);
    server_ = testing_util::StartServer(options);
    ASSERT_NE(server_, nullptr);
  }

  // NextId through a client with `creds` (null: plaintext).
  absl::StatusOr<Id> NextIdWith(
      std::shared_ptr<grpc::ChannelCredentials> creds) {
    ClientOptions options;
    options.targets = {testing_util::Address(server_->port())};
    options.credentials = std::move(creds);
    // A bound, not a speed target: a refusal ends the call as soon as the
    // handshake fails, and under ASan on a loaded machine connecting and
    // handshaking took more than 5 s (DEADLINE_EXCEEDED on the accepted
    // mTLS client, one ctest -j2 round in seven).
    options.rpc_deadline = absl::Seconds(60);
    options.log = [](absl::string_view) {};
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
    if (!client.ok()) return client.status();
    return (*client)->NextId("orders");
  }

  std::shared_ptr<grpc::ChannelCredentials> Tls(const std::string& cert = "",
                                                const std::string& key = "") {
    auto creds =
        TlsCredentialsFromFiles(Pki("ca.pem"), cert.empty() ? "" : Pki(cert),
                                key.empty() ? "" : Pki(key));
    EXPECT_THAT(creds, IsOk());
    return creds.value_or(nullptr);
  }

  TempDir dir_;
  std::unique_ptr<Server> server_;
};

TEST_F(TlsTest, ClientTrustingTheCaGetsIds) {
  StartServer(/*mtls=*/false);
  absl::StatusOr<Id> id = NextIdWith(Tls());
  ASSERT_THAT(id, IsOk());
  EXPECT_EQ(id->number, 1);
}

// The refusal says what is likely wrong: gRPC alone says only "Socket
// closed".
TEST_F(TlsTest, PlaintextClientIsRefusedByTlsServer) {
  StartServer(/*mtls=*/false);
  EXPECT_THAT(NextIdWith(nullptr),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("this client speaks plaintext: if the server "
                                 "speaks TLS, give the client TLS "
                                 "credentials")));
}

TEST_F(TlsTest, ClientNotTrustingTheServerRefusesIt) {
  StartServer(/*mtls=*/false);
  auto creds = TlsCredentialsFromFiles(Pki("other.pem"));
  ASSERT_THAT(creds, IsOk());
  // A TLS client is not told to use TLS.
  EXPECT_THAT(NextIdWith(*creds),
              StatusIs(absl::StatusCode::kUnavailable,
                       Not(HasSubstr("this client speaks plaintext"))));
}

TEST_F(TlsTest, MtlsServerAcceptsClientCertificateFromItsCa) {
  StartServer(/*mtls=*/true);
  absl::StatusOr<Id> id = NextIdWith(Tls("client.pem", "client.key"));
  ASSERT_THAT(id, IsOk());
  EXPECT_EQ(id->number, 1);
}

TEST_F(TlsTest, MtlsServerRefusesClientWithoutCertificate) {
  StartServer(/*mtls=*/true);
  EXPECT_THAT(NextIdWith(Tls()), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(TlsTest, MtlsServerRefusesCertificateFromAnotherCa) {
  StartServer(/*mtls=*/true);
  EXPECT_THAT(NextIdWith(Tls("stranger.pem", "stranger.key")),
              StatusIs(absl::StatusCode::kUnavailable));
  // Nothing was handed out to the refused clients.
  EXPECT_FALSE(server_->store()->Get("orders")->has_value());
}

TEST(ServerCredentialsFromFilesTest, NoFilesMeansPlaintext) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds =
      ServerCredentialsFromFiles({});
  ASSERT_THAT(creds, IsOk());
  EXPECT_EQ(*creds, nullptr);
}

TEST(ServerCredentialsFromFilesTest, BadCombinationsAndFilesAreNamed) {
  EXPECT_THAT(ServerCredentialsFromFiles({"cert.pem", "", ""}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ServerCredentialsFromFiles({"", "", "ca.pem"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> missing =
      ServerCredentialsFromFiles(
          {"/nonexistent/s.pem", "/nonexistent/s.key", ""});
  EXPECT_THAT(missing, StatusIs(absl::StatusCode::kUnavailable,
                                HasSubstr("/nonexistent/s.pem")));
}

}  // namespace
}  // namespace hilo
