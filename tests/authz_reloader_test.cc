// AuthzReloader: what hilo_server says when it reloads its authorization
// files, against an in-process server (no process, no signal).
#include "service/authz_reloader.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::TempDir;
using ::testing::Eq;
using ::testing::Optional;

constexpr char kAnonymousOrders[] =
    "grant { identity: \"anonymous\" collections: \"orders\" }\n";

TEST(AuthzReloaderTest, SaysAChangeOnceAndARefusalOncePerReason) {
  TempDir dir;
  const std::string policy = dir.File("policy.textproto");
  std::ofstream(policy) << kAnonymousOrders;
  ServerOptions options = testing_util::TestServerOptions(dir);
  options.authz_policy = policy;
  std::unique_ptr<Server> server = testing_util::StartServer(options);
  ASSERT_NE(server, nullptr);
  AuthzReloader reloader(server.get());

  EXPECT_EQ(reloader.Reload(), std::nullopt);  // unchanged

  std::ofstream(policy, std::ios::trunc) << "grant { identity: anonymous }\n";
  const std::string refused =
      "hilo_server: authz policy " + policy +
      " line 1 column 19: Expected string, got: anonymous; keeping the "
      "policy in force";
  EXPECT_THAT(reloader.Reload(), Optional(Eq(refused)));
  EXPECT_EQ(reloader.Reload(), std::nullopt);  // the same reason again

  std::ofstream(policy, std::ios::trunc) << "grant { identity: \"cn:ops\" }\n";
  EXPECT_THAT(reloader.Reload(), Optional(Eq("hilo_server: authz policy " +
                                             policy + " reloaded")));
  EXPECT_EQ(reloader.Reload(), std::nullopt);

  // After a reload that worked, the same refusal is news again.
  std::ofstream(policy, std::ios::trunc) << "grant { identity: anonymous }\n";
  EXPECT_THAT(reloader.Reload(), Optional(Eq(refused)));
}

TEST(AuthzReloaderTest, SaysWhenTheTokenFileIsGone) {
  TempDir dir;
  const std::string policy = dir.File("policy.textproto");
  const std::string tokens = dir.File("tokens");
  std::ofstream(policy) << kAnonymousOrders;
  std::ofstream(tokens) << "ops 0123456789abcdef0123\n";
  ServerOptions options = testing_util::TestServerOptions(dir);
  options.authz_policy = policy;
  options.authz_tokens = tokens;
  std::unique_ptr<Server> server = testing_util::StartServer(options);
  ASSERT_NE(server, nullptr);
  AuthzReloader reloader(server.get());

  ASSERT_EQ(std::remove(tokens.c_str()), 0);
  EXPECT_THAT(reloader.Reload(),
              Optional(Eq("hilo_server: authz policy " + policy +
                          " reloaded; authz token file " + tokens +
                          " is gone: every bearer token is refused until it "
                          "is back")));
}

TEST(AuthzReloaderTest, WithoutAPolicyNothingIsSaid) {
  TempDir dir;
  std::unique_ptr<Server> server =
      testing_util::StartServer(testing_util::TestServerOptions(dir));
  ASSERT_NE(server, nullptr);
  AuthzReloader reloader(server.get());
  EXPECT_EQ(reloader.Reload(), std::nullopt);
}

}  // namespace
}  // namespace hilo
