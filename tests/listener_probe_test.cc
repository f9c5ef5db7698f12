// ListenerProbe: a listener that accepts answers the probe; one that has
// stopped accepting (connections left in the kernel's backlog, as gRPC
// 1.51's after EMFILE) does not, and enough failures in a row call on_deaf.
#include "service/observe/listener_probe.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/held_port.h"
#include "testing/status_matchers.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;
using ::testing::HasSubstr;

// A TCP socket listening on 127.0.0.1:0 that never accepts by itself.
class DeafListener : public testing_util::HeldPort {
 public:
  DeafListener() : HeldPort(/*backlog=*/16) { EXPECT_NE(port(), 0); }
};

TEST(ListenerProbeTest, AListenerThatAcceptsAnswers) {
  DeafListener listener;
  std::thread acceptor([&] {
    const int fd = accept(listener.fd(), nullptr, nullptr);
    close(fd);  // an orderly close is an answer, as a TLS alert is
  });
  EXPECT_THAT(
      ListenerProbe::ProbeOnce("127.0.0.1", listener.port(), absl::Seconds(5)),
      IsOk());
  acceptor.join();
}

TEST(ListenerProbeTest, AListenerThatNoLongerAcceptsIsUnavailable) {
  DeafListener listener;
  const absl::Status status = ListenerProbe::ProbeOnce(
      "127.0.0.1", listener.port(), absl::Milliseconds(200));
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable,
                               HasSubstr("no longer accepts")));
}

TEST(ListenerProbeTest, CallsOnDeafOnceAfterFailuresInARow) {
  DeafListener listener;
  std::atomic<int> calls{0};
  {
    auto probe = ListenerProbe::Start(
        {.host = "127.0.0.1",
         .port = listener.port(),
         .interval = absl::Milliseconds(10),
         .timeout = absl::Milliseconds(50),
         .failures = 3,
         .on_deaf = [&](const absl::Status&) { ++calls; }});
    absl::SleepFor(absl::Seconds(1));
  }
  EXPECT_EQ(calls.load(), 1);
}

TEST(ListenerProbeTest, ListenHostMapsWildcardsToLoopback) {
  EXPECT_EQ(ListenHost("0.0.0.0:50051"), "127.0.0.1");
  EXPECT_EQ(ListenHost("[::]:50051"), "::1");
  EXPECT_EQ(ListenHost("[::1]:0"), "::1");
  EXPECT_EQ(ListenHost("localhost:50051"), "localhost");
  EXPECT_EQ(ListenHost("127.0.0.1:0"), "127.0.0.1");
}

}  // namespace
}  // namespace hilo
