// SplitHostPort and IsSchemeAddress (base/hilo/base/host_port.h): the
// addresses hilo_server and hilo are given, read before gRPC reads them.
#include "hilo/base/host_port.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace hilo::base {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;

TEST(HostPortTest, SplitsHostAndPort) {
  for (const auto& [address, host, port] :
       {std::tuple{"127.0.0.1:50051", "127.0.0.1", 50051},
        std::tuple{"localhost:0", "localhost", 0},
        std::tuple{"[::1]:65535", "::1", 65535}, std::tuple{":9464", "", 9464},
        std::tuple{"localhost:https", "localhost", -1}}) {
    absl::StatusOr<HostPort> split = SplitHostPort(address);
    ASSERT_THAT(split, IsOk()) << address;
    EXPECT_EQ(split->host, host) << address;
    EXPECT_EQ(split->port, port) << address;
  }
}

TEST(HostPortTest, PortAbove65535IsOutOfRangeNotWrapped) {
  for (const char* address :
       {"127.0.0.1:80000", "127.0.0.1:65536", "[::1]:99999",
        "localhost:123456789012345678901234567890"}) {
    EXPECT_THAT(SplitHostPort(address),
                StatusIs(absl::StatusCode::kOutOfRange,
                         ::testing::HasSubstr("is out of range: a port is 0 "
                                              "to 65535")))
        << address;
  }
}

TEST(HostPortTest, MissingPortOrBareIpv6IsInvalid) {
  for (const char* address :
       {"localhost", "localhost:", "[::1]", "[::1", "::1:50051", ""}) {
    EXPECT_THAT(SplitHostPort(address),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << address;
  }
  EXPECT_THAT(SplitHostPort("localhost"),
              StatusIs(absl::StatusCode::kInvalidArgument, "it has no port"));
}

TEST(HostPortTest, SchemeAddressesAreGrpcs) {
  EXPECT_TRUE(IsSchemeAddress("unix:/run/hilo.sock"));
  EXPECT_TRUE(IsSchemeAddress("dns:///hilo.example:50051"));
  EXPECT_TRUE(IsSchemeAddress("ipv4:127.0.0.1:50051"));
  EXPECT_FALSE(IsSchemeAddress("127.0.0.1:50051"));
  EXPECT_FALSE(IsSchemeAddress("localhost"));
}

}  // namespace
}  // namespace hilo::base
