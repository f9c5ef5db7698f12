#include "hilo/base/mutex.h"

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "gtest/gtest.h"

namespace hilo::base {
namespace {

// How long a waiter may take to wake before the test calls it stuck. Far
// above any honest wake-up, even under ThreadSanitizer on a loaded machine.
constexpr std::chrono::seconds kDeadline(10);
// How long a stuck thread gets to finish once the test has made every
// predicate true and unlocked, before it is abandoned.
constexpr std::chrono::seconds kGrace(1);

// A thread whose result the test waits for with a deadline, so a mutex that
// fails to wake it fails the test instead of hanging it.
//
// A thread still running at destruction is detached, not joined: whatever it
// uses must outlive the test, so tests keep their mutex and state in a
// shared_ptr that the thread's body holds.
template <typename T>
class BoundedThread {
 public:
  explicit BoundedThread(std::function<T()> body) {
    std::packaged_task<T()> task(std::move(body));
    result_ = task.get_future();
    thread_ = std::thread(std::move(task));
  }
  BoundedThread(const BoundedThread&) = delete;
  BoundedThread& operator=(const BoundedThread&) = delete;
  ~BoundedThread() {
    if (!result_.valid() || Finished(std::chrono::seconds(0))) {
      thread_.join();
    } else {
      thread_.detach();
    }
  }

  // Whether the body has returned, waiting up to `timeout` for it. Not
  // after Get.
  bool Finished(std::chrono::seconds timeout) {
    return result_.wait_for(timeout) == std::future_status::ready;
  }
  // The body's result; once, after Finished returned true.
  T Get() { return result_.get(); }

 private:
  std::future<T> result_;
  std::thread thread_;
};

// What a waiter saw when Await returned: the predicate's value, read under
// the lock, and how often Await evaluated the predicate.
struct Observation {
  bool predicate_value = false;
  int evaluations = 0;
};

// Waits up to kDeadline for `thread`. If it is stuck, fails the test with
// `what`, runs `unblock` (which makes every predicate true under the lock,
// so a thread lost only by a missed wake-up can still finish) and gives it
// kGrace. Returns its observation, or nullopt if it never returned.
std::optional<Observation> AwaitObservation(
    BoundedThread<Observation>& thread, const char* what,
    const std::function<void()>& unblock) {
  if (!thread.Finished(kDeadline)) {
    ADD_FAILURE() << what << " within " << kDeadline.count() << " s";
    unblock();
    if (!thread.Finished(kGrace)) return std::nullopt;
  }
  return thread.Get();
}

// Whether `signal` was fulfilled within kDeadline.
bool Signalled(std::promise<void>& signal) {
  return signal.get_future().wait_for(kDeadline) == std::future_status::ready;
}

// What the waiter of the first two tests awaits: `ready`. Shared with the
// waiter's thread, which may outlive the test (see BoundedThread).
struct ReadyFlag {
  explicit ReadyFlag(bool initially) : ready(initially) {}
  // Makes the waiter's predicate true: the change, and the unlock after it.
  void Set() {
    MutexLock lock(&mu);
    ready = true;
  }

  Mutex mu;
  bool ready ABSL_GUARDED_BY(mu);
  int evaluations ABSL_GUARDED_BY(mu) = 0;
};

// A waiter's body: awaits flag->ready, fulfilling `blocked` if its first
// look at the predicate finds it false (the waiter then blocks inside
// Await, having released the mutex), and reports what it saw on return.
std::function<Observation()> AwaitReady(
    std::shared_ptr<ReadyFlag> flag,
    std::shared_ptr<std::promise<void>> blocked) {
  return [flag, blocked] {
    MutexLock lock(&flag->mu);
    flag->mu.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(flag->mu) {
      if (++flag->evaluations == 1 && !flag->ready) blocked->set_value();
      return flag->ready;
    });
    return Observation{flag->ready, flag->evaluations};
  };
}

TEST(MutexTest, AwaitReturnsAtOnceWhenThePredicateHolds) {
  auto flag = std::make_shared<ReadyFlag>(/*initially=*/true);
  auto blocked = std::make_shared<std::promise<void>>();
  // Nothing else takes the mutex before the deadline: Await must return on
  // its first look at the predicate, without any wake-up.
  BoundedThread<Observation> waiter(AwaitReady(flag, blocked));
  std::optional<Observation> seen = AwaitObservation(
      waiter, "Await did not return for a predicate that already held",
      [&] { flag->Set(); });
  ASSERT_TRUE(seen.has_value()) << "the waiter stayed blocked";
  EXPECT_TRUE(seen->predicate_value);
  EXPECT_EQ(seen->evaluations, 1);
}

TEST(MutexTest, UnlockWakesAWaiterWhosePredicateNowHolds) {
  auto flag = std::make_shared<ReadyFlag>(/*initially=*/false);
  auto blocked = std::make_shared<std::promise<void>>();
  BoundedThread<Observation> waiter(AwaitReady(flag, blocked));
  ASSERT_TRUE(Signalled(*blocked))
      << "the waiter did not find its predicate false within 10 s";
  // Granted only once the waiter waits: the change and this Unlock are all
  // that can wake it.
  flag->Set();
  std::optional<Observation> seen = AwaitObservation(
      waiter, "Unlock after setting ready did not wake the waiter",
      [&] { flag->Set(); });
  ASSERT_TRUE(seen.has_value()) << "the waiter stayed blocked";
  EXPECT_TRUE(seen->predicate_value);
  // False once before blocking, true once after the wake-up (more only if
  // the condition variable woke it spuriously).
  EXPECT_GE(seen->evaluations, 2);
}

// A thread that waits for something rare (a stop flag) on a mutex that a
// hot path takes must not be woken by each of the hot path's Unlocks: the
// unlocking thread evaluates the waiter's predicate and leaves it asleep
// while it is false. The waiter's own thread evaluates it once before it
// blocks and once after the wake-up that finds it true; a condition
// variable may wake spuriously, which one extra evaluation allows for.
TEST(MutexTest, UnlockLeavesAWaiterAsleepWhilePredicateIsFalse) {
  struct State {
    Mutex mu;
    bool stop ABSL_GUARDED_BY(mu) = false;
    int hot ABSL_GUARDED_BY(mu) = 0;
    int evaluations_elsewhere ABSL_GUARDED_BY(mu) = 0;
  };
  auto state = std::make_shared<State>();
  auto blocked = std::make_shared<std::promise<void>>();
  BoundedThread<Observation> waiter([state, blocked] {
    const std::thread::id self = std::this_thread::get_id();
    int evaluations = 0;
    MutexLock lock(&state->mu);
    state->mu.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state->mu) {
      if (std::this_thread::get_id() != self) {
        ++state->evaluations_elsewhere;
      } else if (++evaluations == 1 && !state->stop) {
        blocked->set_value();
      }
      return state->stop;
    });
    return Observation{state->stop, evaluations};
  });
  ASSERT_TRUE(Signalled(*blocked))
      << "the waiter did not find its predicate false within 10 s";
  constexpr int kHotUnlocks = 1000;
  for (int i = 0; i < kHotUnlocks; ++i) {
    MutexLock lock(&state->mu);
    ++state->hot;
  }
  {
    MutexLock lock(&state->mu);
    // Each hot Unlock evaluated the predicate for the sleeping waiter.
    EXPECT_EQ(state->evaluations_elsewhere, kHotUnlocks);
    state->stop = true;
  }
  std::optional<Observation> seen = AwaitObservation(
      waiter, "Unlock after setting stop did not wake the waiter", [&] {
        MutexLock lock(&state->mu);
        state->stop = true;
      });
  ASSERT_TRUE(seen.has_value()) << "the waiter stayed blocked";
  EXPECT_TRUE(seen->predicate_value);
  EXPECT_GE(seen->evaluations, 2);
  EXPECT_LE(seen->evaluations, 3)
      << "the waiter was woken by Unlocks that left its predicate false";
}

// A timed wait gives up at its deadline with the predicate's last value,
// even while other threads keep taking the mutex.
TEST(MutexTest, AwaitWithTimeoutReturnsFalseAtItsDeadline) {
  Mutex mu;
  MutexLock lock(&mu);
  bool never = false;
  EXPECT_FALSE(mu.AwaitWithTimeout(
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return never; },
      absl::Milliseconds(1)));
}

// A thread that changes state and then waits for something else releases
// the mutex inside Await, not through Unlock; that must still wake a thread
// waiting for the change, or both wait forever. The order is forced: A waits
// first, then B makes its change and waits in turn.
TEST(MutexTest, AwaitWakesOthersForChangesMadeBeforeIt) {
  struct State {
    Mutex mu;
    bool b_arrived ABSL_GUARDED_BY(mu) = false;
    bool a_answered ABSL_GUARDED_BY(mu) = false;
  };
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(round);
    auto state = std::make_shared<State>();
    auto a_blocked = std::make_shared<std::promise<void>>();
    BoundedThread<Observation> a([state, a_blocked] {
      MutexLock lock(&state->mu);
      int evaluations = 0;
      state->mu.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state->mu) {
        if (++evaluations == 1 && !state->b_arrived) a_blocked->set_value();
        return state->b_arrived;
      });
      const Observation seen{state->b_arrived, evaluations};
      state->a_answered = true;
      return seen;
    });
    ASSERT_TRUE(Signalled(*a_blocked))
        << "A did not find its predicate false within 10 s";
    BoundedThread<Observation> b([state] {
      MutexLock lock(&state->mu);
      state->b_arrived = true;
      int evaluations = 0;
      state->mu.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state->mu) {
        ++evaluations;
        return state->a_answered;
      });
      return Observation{state->a_answered, evaluations};
    });
    auto unblock = [&] {
      MutexLock lock(&state->mu);
      state->b_arrived = true;
      state->a_answered = true;
    };
    std::optional<Observation> a_seen = AwaitObservation(
        a, "B's Await did not wake A, which waited for B's change", unblock);
    std::optional<Observation> b_seen =
        AwaitObservation(b, "A's answer did not wake B", unblock);
    ASSERT_TRUE(a_seen.has_value()) << "A stayed blocked";
    ASSERT_TRUE(b_seen.has_value()) << "B stayed blocked";
    EXPECT_TRUE(a_seen->predicate_value);
    EXPECT_GE(a_seen->evaluations, 2);
    EXPECT_TRUE(b_seen->predicate_value);
    // B's change came before B's Await; A answered only after B waited.
    EXPECT_GE(b_seen->evaluations, 2);
    if (::testing::Test::HasFailure()) break;
  }
}

}  // namespace
}  // namespace hilo::base
