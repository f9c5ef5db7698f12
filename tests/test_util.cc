#include "tests/test_util.h"

#include <stdlib.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"

namespace hilo::testing {

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp",
                   "/hilo-test-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp " << pattern << " failed";
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

ServerOptions TestServerOptions(const TempDir& dir,
                                const std::string& node_tag) {
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = dir.File(absl::StrCat("hilo-", node_tag, ".db"));
  options.node_tag = node_tag;
  return options;
}

std::unique_ptr<Server> StartServer(const ServerOptions& options) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return nullptr;
  return *std::move(server);
}

std::string Address(int port) { return absl::StrCat("127.0.0.1:", port); }

std::unique_ptr<hilo::v1::HiLo::Stub> NewStub(int port) {
  return hilo::v1::HiLo::NewStub(
      grpc::CreateChannel(Address(port), grpc::InsecureChannelCredentials()));
}

}  // namespace hilo::testing
