// ThreadsEndBeforeExit: a GoogleTest environment that keeps a test binary
// from exiting while threads its tests left behind are still ending.
//
//   // In a test file whose tests use TLS through gRPC:
//   const ::testing::Environment* const kThreadsEndBeforeExit =
//       ::testing::AddGlobalTestEnvironment(
//           new hilo::testing_util::ThreadsEndBeforeExit());
//
// Why: gRPC 1.51 runs work, TLS handshakes included, on detached
// "event_engine" pool threads, and its shutdown stops waiting for such a
// thread once the thread has left its work loop, before the thread has
// ended. OpenSSL 3 frees a thread's own state (its error queue, its random
// generators) when the thread ends, unless exit() has already run
// OPENSSL_cleanup, which drops those per-thread cleanups. A test binary that
// returns from main while such a thread is still ending loses that state,
// and LeakSanitizer reports it (CRYPTO_zalloc, EVP_RAND_CTX_new, ...) as
// leaked whenever the thread ends before the leak check. Waiting here, after
// the last test and before main returns, closes that window.
//
// Header-only, so that hilo::testing does not depend on GoogleTest; its
// users link GTest::gtest.
#ifndef HILO_TESTING_THREADS_END_BEFORE_EXIT_H_
#define HILO_TESTING_THREADS_END_BEFORE_EXIT_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "testing/process_threads.h"

namespace hilo::testing_util {

// A global test environment: SetUp counts the threads before the first
// test; TearDown, after the last, waits (up to `timeout`) until no more are
// left, and fails the run naming those that are: a thread still running
// then is one some test did not stop.
//
// `start_lasting` runs before the count: it starts what is meant to last as
// long as the process (a writer thread shared by every server in it, say),
// so that its threads count as there before the first test.
class ThreadsEndBeforeExit : public ::testing::Environment {
 public:
  explicit ThreadsEndBeforeExit(std::function<void()> start_lasting = nullptr,
                                absl::Duration timeout = absl::Seconds(30))
      : start_lasting_(std::move(start_lasting)), timeout_(timeout) {}

  void SetUp() override {
    if (start_lasting_) start_lasting_();
    absl::StatusOr<std::vector<std::string>> names = ThreadNames();
    ASSERT_TRUE(names.ok()) << names.status();
    threads_before_ = static_cast<int>(names->size());
  }

  void TearDown() override {
    if (threads_before_ == 0) return;  // SetUp failed and said why
    const absl::Status ended =
        WaitForThreadCountAtMost(threads_before_, timeout_);
    EXPECT_TRUE(ended.ok()) << ended;
  }

 private:
  const std::function<void()> start_lasting_;
  const absl::Duration timeout_;
  int threads_before_ = 0;
};

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_THREADS_END_BEFORE_EXIT_H_
