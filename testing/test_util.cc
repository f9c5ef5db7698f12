#include "testing/test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "service/access/tls.h"
#include "testing/status_matchers.h"

namespace hilo::testing_util {

ServerOptions TestServerOptions(const TempDir& dir,
                                const std::string& node_tag) {
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = dir.File(absl::StrCat("hilo-", node_tag, ".db"));
  options.create_db = true;
  options.node_tag = node_tag;
  return options;
}

std::unique_ptr<Server> StartServer(const ServerOptions& options) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  EXPECT_THAT(server.status(), IsOk());
  if (!server.ok()) return nullptr;
  return *std::move(server);
}

std::string Address(int port) { return absl::StrCat("127.0.0.1:", port); }

std::unique_ptr<SqliteRangeStore> OpenTestStore(const TempDir& dir,
                                                const std::string& name) {
  SqliteRangeStoreOptions options;
  options.path = dir.File(name);
  options.sync = SyncMode::kNormal;
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(options);
  EXPECT_THAT(store.status(), IsOk());
  if (!store.ok()) return nullptr;
  return *std::move(store);
}

absl::Status MakeTestCertificates(const TempDir& dir,
                                  const std::string& commands) {
  if (std::system("command -v openssl > /dev/null") != 0) {
    return absl::FailedPreconditionError("openssl is not installed");
  }
  const std::string script = dir.File("make.sh");
  WriteFile(script, absl::StrCat("set -e; cd ", dir.path(), "\n", commands));
  const std::string log = dir.File("openssl.log");
  if (std::system(absl::StrCat("sh ", script, " > ", log, " 2>&1").c_str()) !=
      0) {
    return absl::InternalError(absl::StrCat(
        "openssl could not make the test certificates; see ", log));
  }
  return absl::OkStatus();
}

void CertificateTest::MakeCertificates(const std::string& commands) {
  pki_ = new TempDir();
  const absl::Status made = MakeTestCertificates(*pki_, commands);
  make_error_ = made.ok() ? "" : std::string(made.message());
}

void CertificateTest::TearDownTestSuite() {
  delete pki_;
  pki_ = nullptr;
}

void CertificateTest::SetUp() {
  if (!make_error_.empty()) GTEST_FAIL() << make_error_;
}

std::string CertificateTest::Pki(const std::string& name) {
  return pki_->File(name);
}

ServerOptions CertificateTest::TlsServerOptions(const TempDir& dir, bool mtls) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      ServerCredentialsFromFiles(
          {Pki("server.pem"), Pki("server.key"), mtls ? Pki("ca.pem") : ""});
  EXPECT_THAT(credentials.status(), IsOk());
  ServerOptions options = TestServerOptions(dir);
  options.credentials = credentials.value_or(nullptr);
  return options;
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("connect to port ", port, " failed"));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (write(fd, request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("write failed");
  }
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || body == std::string::npos ||
      response.find(" 200 ") == std::string::npos) {
    return absl::UnavailableError(
        absl::StrCat("bad HTTP response: ", response.substr(0, 100)));
  }
  return response.substr(body + 4);
}

std::unique_ptr<hilo::v1::HiLo::Stub> NewStub(int port) {
  return hilo::v1::HiLo::NewStub(
      grpc::CreateChannel(Address(port), grpc::InsecureChannelCredentials()));
}

}  // namespace hilo::testing_util
