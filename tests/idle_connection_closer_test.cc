#include "service/rpc/idle_connection_closer.h"

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "hilo/base/mutex.h"

namespace hilo {
namespace {

// Far above any honest wake-up, even under ThreadSanitizer on a loaded
// machine.
constexpr absl::Duration kDeadline = absl::Seconds(30);

// The calls in the services, as the closer asks for them, and whether it
// dropped the connections.
class FakeServer {
 public:
  int64_t CallsInside() {
    base::MutexLock lock(&mu_);
    ++asked_;
    return calls_;
  }
  void Close() {
    base::MutexLock lock(&mu_);
    ++closed_;
  }
  void SetCalls(int64_t calls) {
    base::MutexLock lock(&mu_);
    calls_ = calls;
  }
  // Waits until the closer asked more than `n` times; false at kDeadline.
  bool AwaitAskedMoreThan(int n) {
    base::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return asked_ > n; },
        kDeadline);
  }
  bool AwaitClosed() {
    base::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ > 0; },
        kDeadline);
  }
  int closed() {
    base::MutexLock lock(&mu_);
    return closed_;
  }
  int asked() {
    base::MutexLock lock(&mu_);
    return asked_;
  }

 private:
  base::Mutex mu_;
  int64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  int asked_ ABSL_GUARDED_BY(mu_) = 0;
  int closed_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(IdleConnectionCloserTest, DropsTheConnectionsOnlyOnceNoCallIsLeft) {
  FakeServer server;
  server.SetCalls(2);
  IdleConnectionCloser closer([&] { return server.CallsInside(); },
                              [&] { server.Close(); }, absl::ZeroDuration());
  // Asked again and again while calls are inside: never closes.
  ASSERT_TRUE(server.AwaitAskedMoreThan(3));
  EXPECT_EQ(server.closed(), 0);
  server.SetCalls(1);
  const int asked = server.asked();
  ASSERT_TRUE(server.AwaitAskedMoreThan(asked + 2));
  EXPECT_EQ(server.closed(), 0);
  server.SetCalls(0);
  ASSERT_TRUE(server.AwaitClosed());
  EXPECT_EQ(server.closed(), 1);
}

TEST(IdleConnectionCloserTest, AServerThatStopsFirstIsNeitherAskedNorClosed) {
  FakeServer server;
  {
    // Shutdown returned before the settle time was over.
    IdleConnectionCloser closer([&] { return server.CallsInside(); },
                                [&] { server.Close(); }, absl::Hours(1));
  }
  EXPECT_EQ(server.asked(), 0);
  EXPECT_EQ(server.closed(), 0);
}

TEST(IdleConnectionCloserTest, AServerThatStopsWithCallsInsideIsNotClosed) {
  FakeServer server;
  server.SetCalls(1);
  {
    IdleConnectionCloser closer([&] { return server.CallsInside(); },
                                [&] { server.Close(); }, absl::ZeroDuration());
    ASSERT_TRUE(server.AwaitAskedMoreThan(1));
  }
  // Its destructor ended the watch with the call still inside.
  EXPECT_EQ(server.closed(), 0);
}

}  // namespace
}  // namespace hilo
