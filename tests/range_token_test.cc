// Range tokens (service/store/range_token.h): what a store keeps is the
// documented SHA-256 digest on every thread, and tokens are never 0, never
// repeat, and are not shared with a child process after fork().
#include "service/store/range_token.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace hilo {
namespace {

// First 8 bytes of SHA-256 over the token's big-endian bytes, lowest bit
// set: computed apart with Python's hashlib.
TEST(RangeTokenDigestTest, IsTheDocumentedSha256Prefix) {
  EXPECT_EQ(RangeTokenDigest(0), 0u);
  EXPECT_EQ(RangeTokenDigest(1), 0xcd2662154e6d76b3u);
  EXPECT_EQ(RangeTokenDigest(0x0123456789abcdefu), 0x55c53f5d49029791u);
  EXPECT_EQ(RangeTokenDigest(UINT64_MAX), 0x12a3ae445661ce5du);
}

TEST(RangeTokenDigestTest, SameOnEveryThreadAndCall) {
  std::vector<uint64_t> seen(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &seen] {
      for (int i = 0; i < 1000; ++i) {
        const uint64_t d = RangeTokenDigest(0x0123456789abcdefu);
        if (i == 0) seen[t] = d;
        if (d != seen[t]) seen[t] = 0;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (uint64_t d : seen) EXPECT_EQ(d, 0x55c53f5d49029791u);
}

// 4 threads x 5,000 tokens, each thread refilling its buffer many times:
// with 64 random bits a repeat among 20,000 has odds of about 1e-11.
TEST(NewRangeTokenTest, NeverZeroNeverRepeatedAcrossThreads) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 5000;
  std::vector<std::vector<uint64_t>> tokens(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &tokens] {
      for (int i = 0; i < kPerThread; ++i) {
        tokens[t].push_back(NewRangeToken());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<uint64_t> all;
  for (const std::vector<uint64_t>& each : tokens) {
    for (uint64_t token : each) {
      EXPECT_NE(token, 0u);
      all.insert(token);
    }
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kPerThread));
}

// A child inherits the parent's memory, so a buffer of tokens drawn before
// fork() would hand the child the very tokens the parent hands out next.
TEST(NewRangeTokenTest, ChildAfterForkDoesNotRepeatTheParentsTokens) {
  NewRangeToken();  // this thread's buffer now holds tokens to come
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    uint64_t child[4];
    for (uint64_t& token : child) token = NewRangeToken();
    const bool written =
        write(pipe_fds[1], child, sizeof(child)) == sizeof(child);
    _exit(written ? 0 : 1);
  }
  close(pipe_fds[1]);
  uint64_t child[4] = {};
  const ssize_t n = read(pipe_fds[0], child, sizeof(child));
  close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof(child)));
  std::set<uint64_t> parent;
  for (int i = 0; i < 4; ++i) parent.insert(NewRangeToken());
  for (uint64_t token : child) {
    EXPECT_NE(token, 0u);
    EXPECT_EQ(parent.count(token), 0u) << "the child drew a parent's token";
  }
}

}  // namespace
}  // namespace hilo
