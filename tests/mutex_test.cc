#include "hilo/base/mutex.h"

#include <thread>

#include "gtest/gtest.h"

namespace hilo::base {
namespace {

TEST(MutexTest, AwaitReturnsAtOnceWhenThePredicateHolds) {
  Mutex mu;
  MutexLock lock(&mu);
  mu.Await([] { return true; });
  SUCCEED();
}

TEST(MutexTest, UnlockWakesAWaiterWhosePredicateNowHolds) {
  Mutex mu;
  bool ready = false;
  std::thread waiter([&] {
    MutexLock lock(&mu);
    mu.Await([&] { return ready; });
  });
  {
    MutexLock lock(&mu);
    ready = true;
  }
  waiter.join();
  EXPECT_TRUE(ready);
}

// A thread that changes state and then waits for something else releases
// the mutex inside Await, not through Unlock; that must still wake a thread
// waiting for the change, or both wait forever.
TEST(MutexTest, AwaitWakesOthersForChangesMadeBeforeIt) {
  for (int round = 0; round < 200; ++round) {
    Mutex mu;
    bool b_arrived = false;
    bool a_answered = false;
    std::thread a([&] {
      MutexLock lock(&mu);
      mu.Await([&] { return b_arrived; });
      a_answered = true;
    });
    std::thread b([&] {
      MutexLock lock(&mu);
      b_arrived = true;
      mu.Await([&] { return a_answered; });
    });
    a.join();
    b.join();
    EXPECT_TRUE(a_answered);
  }
}

}  // namespace
}  // namespace hilo::base
