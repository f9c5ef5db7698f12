#include "hilo/base/shared_mutex.h"

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "gtest/gtest.h"

namespace hilo::base {
namespace {

// How long a thread that should get the lock may take. Far above any honest
// wake-up, even under ThreadSanitizer on a loaded machine.
constexpr std::chrono::seconds kDeadline(10);
// How long a thread that must not get the lock is given to get it anyway.
constexpr std::chrono::milliseconds kWrongfulEntry(100);

TEST(SharedMutexTest, ReadersHoldItTogether) {
  SharedMutex mu;
  std::promise<void> entered;
  std::future<void> second_reader_in = entered.get_future();
  std::thread second_reader;
  {
    ReaderMutexLock lock(&mu);
    second_reader = std::thread([&] {
      ReaderMutexLock lock(&mu);
      entered.set_value();
    });
    EXPECT_EQ(second_reader_in.wait_for(kDeadline), std::future_status::ready)
        << "a second reader waited for the first";
  }
  second_reader.join();
}

// Holds `mu` with a `Held` lock while another thread takes a `Waiting` one,
// and expects that thread to stay out (`why` says which rule it broke) until
// the held lock is released, and to get in then.
template <typename Held, typename Waiting>
void ExpectWaitsWhileHeld(const char* why) {
  SharedMutex mu;
  std::atomic<bool> entered{false};
  std::thread waiting;
  {
    Held lock(&mu);
    waiting = std::thread([&] {
      Waiting lock(&mu);
      entered = true;
    });
    std::this_thread::sleep_for(kWrongfulEntry);
    EXPECT_FALSE(entered.load()) << why;
  }
  waiting.join();
  EXPECT_TRUE(entered.load());
}

TEST(SharedMutexTest, WriterWaitsForReaders) {
  ExpectWaitsWhileHeld<ReaderMutexLock, WriterMutexLock>(
      "the writer did not wait for a reader");
}

TEST(SharedMutexTest, ReadersWaitForTheWriter) {
  ExpectWaitsWhileHeld<WriterMutexLock, ReaderMutexLock>(
      "a reader did not wait for the writer");
}

}  // namespace
}  // namespace hilo::base
