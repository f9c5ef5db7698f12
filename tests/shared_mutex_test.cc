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

TEST(SharedMutexTest, WriterWaitsForReaders) {
  SharedMutex mu;
  std::atomic<bool> written{false};
  std::thread writer;
  {
    ReaderMutexLock lock(&mu);
    writer = std::thread([&] {
      WriterMutexLock lock(&mu);
      written = true;
    });
    std::this_thread::sleep_for(kWrongfulEntry);
    EXPECT_FALSE(written.load()) << "the writer did not wait for a reader";
  }
  writer.join();
  EXPECT_TRUE(written.load());
}

TEST(SharedMutexTest, ReadersWaitForTheWriter) {
  SharedMutex mu;
  std::atomic<bool> read{false};
  std::thread reader;
  {
    WriterMutexLock lock(&mu);
    reader = std::thread([&] {
      ReaderMutexLock lock(&mu);
      read = true;
    });
    std::this_thread::sleep_for(kWrongfulEntry);
    EXPECT_FALSE(read.load()) << "a reader did not wait for the writer";
  }
  reader.join();
  EXPECT_TRUE(read.load());
}

}  // namespace
}  // namespace hilo::base
