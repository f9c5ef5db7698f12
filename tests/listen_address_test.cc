// CheckListenAddress and BindFailure: what hilo_server says of an address
// it cannot serve on, in-process (a port in use is a socket this test
// holds).
#include "service/listen_address.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/held_port.h"
#include "testing/status_matchers.h"

namespace hilo {
namespace {

using ::hilo::testing_util::HeldPort;
using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ListenAddressTest, GoodAddressesPass) {
  for (const char* address :
       {"127.0.0.1:0", "[::1]:50051", "0.0.0.0:65535", "unix:/run/h.sock"}) {
    EXPECT_THAT(CheckListenAddress(kListenFlag, address), IsOk()) << address;
  }
  EXPECT_THAT(CheckListenAddress(kMetricsListenFlag, "9464"), IsOk());
}

TEST(ListenAddressTest, PortOutOfRangeNamesFlagPortAndRange) {
  EXPECT_THAT(
      CheckListenAddress(kListenFlag, "127.0.0.1:80000"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "cannot listen on 127.0.0.1:80000 (--listen): port 80000 is "
               "out of range: a port is 0 to 65535; give HOST:PORT, such as "
               "127.0.0.1:50051 (port 0 picks a free one)"));
  EXPECT_THAT(CheckListenAddress(kMetricsListenFlag, "70000"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("(--metrics_listen): port 70000 is out "
                                       "of range"),
                             HasSubstr("--metrics_listen= (empty) to serve no "
                                       "metrics"))));
}

TEST(ListenAddressTest, MissingPortSaysSo) {
  EXPECT_THAT(CheckListenAddress(kListenFlag, "localhost"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "cannot listen on localhost (--listen): it has no "
                       "port; give HOST:PORT, such as 127.0.0.1:50051 (port "
                       "0 picks a free one)"));
  EXPECT_THAT(CheckListenAddress(kMetricsListenFlag, "nonsense"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cannot serve metrics on nonsense "
                                 "(--metrics_listen): it has no port")));
}

TEST(ListenAddressTest, PortInUseNamesFlagAndPortAndWhatToDo) {
  HeldPort held;
  ASSERT_NE(held.port(), 0);
  const std::string port = std::to_string(held.port());
  EXPECT_THAT(
      BindFailure(kListenFlag, "127.0.0.1:" + port, "fallback"),
      StatusIs(absl::StatusCode::kUnavailable,
               absl::StrCat("cannot listen on 127.0.0.1:", port,
                            " (--listen): port ", port,
                            " is in use by another program (another "
                            "hilo_server?); stop it, or give --listen another "
                            "port (0 picks a free one)")));
  EXPECT_THAT(
      BindFailure(kMetricsListenFlag, "127.0.0.1:" + port, "fallback"),
      StatusIs(
          absl::StatusCode::kUnavailable,
          AllOf(HasSubstr("cannot serve metrics on 127.0.0.1:" + port +
                          " (--metrics_listen): port " + port + " is in use"),
                HasSubstr("give --metrics_listen another port"))));
}

TEST(ListenAddressTest, AddressNotOfThisMachineSaysSo) {
  // TEST-NET-1 (RFC 5737): never an address of this machine.
  EXPECT_THAT(BindFailure(kListenFlag, "192.0.2.1:0", "fallback"),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("192.0.2.1 is not an address of this "
                                 "machine")));
}

TEST(ListenAddressTest, FreeAddressKeepsTheCallersReason) {
  EXPECT_THAT(BindFailure(kListenFlag, "127.0.0.1:0", "something else"),
              StatusIs(absl::StatusCode::kUnavailable,
                       "cannot listen on 127.0.0.1:0 (--listen): something "
                       "else"));
}

}  // namespace
}  // namespace hilo
