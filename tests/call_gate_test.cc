#include "service/rpc/call_gate.h"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace hilo {
namespace {

// Far above any honest wake-up, even under ThreadSanitizer on a loaded
// machine: a Close still waiting then is stuck.
constexpr std::chrono::seconds kDeadline(10);
// How long a Close that must wait is watched still waiting.
constexpr std::chrono::milliseconds kStillWaiting(100);

// Close on a thread of its own, detached: a gate that never opens again
// fails the test instead of hanging it.
std::future<void> CloseInTheBackground(std::shared_ptr<CallGate> gate) {
  auto closed = std::make_shared<std::promise<void>>();
  std::future<void> result = closed->get_future();
  std::thread([gate, closed] {
    gate->Close();
    closed->set_value();
  }).detach();
  return result;
}

TEST(CallGateTest, ClosingAnIdleGateReturnsAndRefusesEveryLaterCall) {
  auto gate = std::make_shared<CallGate>();
  ASSERT_TRUE(gate->Enter());
  gate->Leave();
  EXPECT_EQ(CloseInTheBackground(gate).wait_for(kDeadline),
            std::future_status::ready);
  EXPECT_FALSE(gate->Enter());
  EXPECT_FALSE(gate->Enter());
  // Idempotent, and the refused calls left nothing to wait for.
  EXPECT_EQ(CloseInTheBackground(gate).wait_for(kDeadline),
            std::future_status::ready);
}

TEST(CallGateTest, CloseWaitsForTheCallsInsideAndRefusesNewOnesMeanwhile) {
  auto gate = std::make_shared<CallGate>();
  ASSERT_TRUE(gate->Enter());
  ASSERT_TRUE(gate->Enter());
  std::future<void> closed = CloseInTheBackground(gate);
  EXPECT_EQ(closed.wait_for(kStillWaiting), std::future_status::timeout);
  // Once Close has begun (it is waiting), a new call is refused.
  EXPECT_FALSE(gate->Enter());
  gate->Leave();
  EXPECT_EQ(closed.wait_for(kStillWaiting), std::future_status::timeout);
  gate->Leave();
  EXPECT_EQ(closed.wait_for(kDeadline), std::future_status::ready);
}

TEST(CallGateTest, NoCallIsInsideOnceCloseReturnsWhileManyComeAndGo) {
  CallGate gate;
  std::atomic<int> inside{0};
  std::atomic<bool> closed{false};
  std::atomic<int> entered_after_close{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 8; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        const bool was_closed = closed.load();
        if (!gate.Enter()) continue;
        if (was_closed) entered_after_close.fetch_add(1);
        inside.fetch_add(1);
        inside.fetch_sub(1);
        gate.Leave();
      }
    });
  }
  std::this_thread::yield();
  gate.Close();
  closed.store(true);
  EXPECT_EQ(inside.load(), 0);
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(entered_after_close.load(), 0);
  EXPECT_FALSE(gate.Enter());
}

}  // namespace
}  // namespace hilo
