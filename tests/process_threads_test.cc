// testing/process_threads.h: this process's threads, and the bounded wait
// until few enough are left.
#include "testing/process_threads.h"

#include <pthread.h>

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo::testing_util {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ProcessThreadsTest, WaitNamesTheThreadStillRunningThenSeesItEnd) {
  absl::StatusOr<std::vector<std::string>> before = ThreadNames();
  ASSERT_THAT(before, IsOk());
  const int count_before = static_cast<int>(before->size());
  ASSERT_GE(count_before, 1);  // this one

  Notification named;
  Notification may_end;
  std::thread lingering([&] {
    pthread_setname_np(pthread_self(), "lingering");
    named.Notify();
    may_end.WaitForNotification();
  });
  named.WaitForNotification();

  absl::StatusOr<std::vector<std::string>> during = ThreadNames();
  ASSERT_THAT(during, IsOk());
  EXPECT_EQ(static_cast<int>(during->size()), count_before + 1);
  EXPECT_THAT(*during, Contains(StartsWith("lingering (tid ")));
  // The thread cannot end before it is told to: the wait must give up.
  EXPECT_THAT(WaitForThreadCountAtMost(count_before, absl::Milliseconds(20)),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("lingering (tid ")));

  may_end.Notify();
  lingering.join();
  EXPECT_THAT(WaitForThreadCountAtMost(count_before, absl::Seconds(30)),
              IsOk());
}

}  // namespace
}  // namespace hilo::testing_util
