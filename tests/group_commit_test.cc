// GroupCommit's contract (service/store/group_commit.h): batches in arrival
// order, at most max_batch, completions only after their batch's commit
// returned, in both modes; in leader mode, a Submit with no batch in flight
// commits on its caller's thread, Submits during a commit only queue, a
// leader past its bound leaves the queue to the next Submit or, if none
// comes, to the spare thread, and at most one thread is ever inside the
// runner.
#include "service/store/group_commit.h"

#include <atomic>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"
#include "hilo/base/mutex.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::Notification;
using ::hilo::testing_util::StatusIs;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::SizeIs;

// Every wait in these tests gives up after this long, failing the test.
constexpr absl::Duration kPatience = absl::Seconds(20);

// Records what happened, in order, from any thread.
class Log {
 public:
  void Add(std::string event) {
    base::MutexLock lock(&mu_);
    events_.push_back(std::move(event));
  }
  std::vector<std::string> events() {
    base::MutexLock lock(&mu_);
    return events_;
  }
  // Waits until at least `n` events are logged; false after kPatience.
  bool WaitForEvents(size_t n) {
    base::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                    mu_) { return events_.size() >= n; },
                                kPatience);
  }

 private:
  base::Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
};

// A BatchRunner that logs each batch as "commit:<ids>" after running the
// bodies, records the thread of each batch, and can hold a batch at its
// start until released (Arm, WaitUntilHeld, Release: one hold per Arm).
class Runner {
 public:
  explicit Runner(Log* log) : log_(log) {}
  GroupCommit::BatchRunner Get() {
    return [this](absl::Span<GroupCommit::Operation* const> batch) {
      MaybeHold();
      std::string ids;
      for (GroupCommit::Operation* op : batch) {
        op->status = op->body(*op);
        ids += ids.empty() ? "" : ",";
        ids += std::string(op->status.message());
      }
      {
        base::MutexLock lock(&mu_);
        threads_.push_back(std::this_thread::get_id());
      }
      log_->Add("commit:" + ids);
    };
  }
  // The next batch waits at its start until Release.
  void Arm() {
    base::MutexLock lock(&mu_);
    armed_ = true;
  }
  // Waits until `n` batches in all have been held; false after kPatience.
  bool WaitUntilHeld(int n = 1) {
    base::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return holds_ >= n; },
        kPatience);
  }
  void Release() {
    base::MutexLock lock(&mu_);
    ++releases_;
  }
  // The thread of each batch, in the order the batches ran.
  std::vector<std::thread::id> threads() {
    base::MutexLock lock(&mu_);
    return threads_;
  }

 private:
  void MaybeHold() {
    base::MutexLock lock(&mu_);
    if (!armed_) return;
    armed_ = false;
    const int mine = ++holds_;
    // A test that never releases fails rather than hangs.
    mu_.AwaitWithTimeout(
        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return releases_ >= mine; },
        kPatience);
  }

  Log* const log_;
  base::Mutex mu_;
  bool armed_ ABSL_GUARDED_BY(mu_) = false;
  int holds_ ABSL_GUARDED_BY(mu_) = 0;
  int releases_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
};

// An operation whose body answers its id (as the status message) and whose
// completion logs "done:<id>".
std::unique_ptr<GroupCommit::Operation> Op(Log* log, const std::string& id,
                                           std::atomic<int>* completions) {
  auto op = std::make_unique<GroupCommit::Operation>();
  op->body = [id](GroupCommit::Operation&) {
    return absl::AbortedError(id);  // any status carries the id
  };
  op->done = [log, id, completions](absl::Status status) {
    // Counted before it is logged: a test that saw the log sees the count.
    completions->fetch_add(1);
    log->Add("done:" + std::string(status.message()));
  };
  return op;
}

// Outcomes by operation id, from any thread.
class Outcomes {
 public:
  // An operation whose body succeeds, with the runner's status recorded
  // under `id` by its completion.
  std::unique_ptr<GroupCommit::Operation> Op(const std::string& id) {
    auto op = std::make_unique<GroupCommit::Operation>();
    op->body = [](GroupCommit::Operation&) { return absl::OkStatus(); };
    op->done = [this, id](absl::Status status) {
      base::MutexLock lock(&mu_);
      statuses_[id].push_back(std::move(status));
    };
    return op;
  }
  // Every status recorded for `id` (one if it was completed once).
  std::vector<absl::Status> of(const std::string& id) {
    base::MutexLock lock(&mu_);
    return statuses_[id];
  }

 private:
  base::Mutex mu_;
  std::map<std::string, std::vector<absl::Status>> statuses_
      ABSL_GUARDED_BY(mu_);
};

// Submits `op` on a thread of its own, which leads when no batch is in
// flight; `returned` is notified when Submit has returned.
struct SubmittingThread {
  SubmittingThread(GroupCommit* queue,
                   std::unique_ptr<GroupCommit::Operation> op)
      : thread([this, queue, op = std::move(op)]() mutable {
          id = std::this_thread::get_id();
          queue->Submit(std::move(op));
          returned.Notify();
        }) {}
  ~SubmittingThread() {
    if (thread.joinable()) thread.join();
  }
  Notification returned;
  std::thread::id id;  // read after `returned`
  std::thread thread;  // last: starts once the rest is ready
};

// What every mode guarantees.
class GroupCommitTest : public ::testing::TestWithParam<GroupCommit::Mode> {};

INSTANTIATE_TEST_SUITE_P(
    Modes, GroupCommitTest,
    ::testing::Values(GroupCommit::Mode::kLeader,
                      GroupCommit::Mode::kDedicatedThread),
    [](const ::testing::TestParamInfo<GroupCommit::Mode>& info) {
      return info.param == GroupCommit::Mode::kLeader ? "Leader" : "Dedicated";
    });

TEST_P(GroupCommitTest, CompletionsRunOnlyAfterTheirBatchCommitted) {
  Log log;
  Runner runner(&log);
  std::atomic<int> completions{0};
  {
    GroupCommit queue({.mode = GetParam(), .max_batch = 8}, runner.Get());
    runner.Arm();
    SubmittingThread first(&queue, Op(&log, "a", &completions));
    ASSERT_TRUE(runner.WaitUntilHeld());
    queue.Submit(Op(&log, "b", &completions));
    queue.Submit(Op(&log, "c", &completions));
    queue.WaitForPendingForTesting(2);
    EXPECT_EQ(completions.load(), 0);  // "a" is held at its commit
    runner.Release();
  }  // the destructor completes what was submitted
  EXPECT_EQ(completions.load(), 3);
  EXPECT_THAT(log.events(), ElementsAre("commit:a", "done:a", "commit:b,c",
                                        "done:b", "done:c"));
}

TEST_P(GroupCommitTest, BatchesTakeTheOldestAtMostMaxBatchAtATime) {
  Log log;
  Runner runner(&log);
  std::atomic<int> completions{0};
  {
    GroupCommit queue({.mode = GetParam(), .max_batch = 2}, runner.Get());
    runner.Arm();
    SubmittingThread first(&queue, Op(&log, "0", &completions));
    ASSERT_TRUE(runner.WaitUntilHeld());
    for (const char* id : {"1", "2", "3", "4", "5"}) {
      queue.Submit(Op(&log, id, &completions));
    }
    queue.WaitForPendingForTesting(5);
    runner.Release();
  }  // drains: every submitted operation completes
  EXPECT_EQ(completions.load(), 6);
  std::vector<std::string> commits;
  for (const std::string& e : log.events()) {
    if (e.rfind("commit:", 0) == 0) commits.push_back(e);
  }
  EXPECT_THAT(commits,
              ElementsAre("commit:0", "commit:1,2", "commit:3,4", "commit:5"));
}

TEST_P(GroupCommitTest, RunReturnsTheStatusTheRunnerSet) {
  Log log;
  Runner runner(&log);
  GroupCommit queue({.mode = GetParam(), .max_batch = 4}, runner.Get());
  absl::Status s = queue.Run(
      [](GroupCommit::Operation&) { return absl::NotFoundError("x"); },
      /*read_only=*/true);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound, "x"));
}

TEST_P(GroupCommitTest, ManyThreadsEachGetTheirOwnOutcome) {
  GroupCommit queue({.mode = GetParam(), .max_batch = 16},
                    [](absl::Span<GroupCommit::Operation* const> batch) {
                      for (GroupCommit::Operation* op : batch) {
                        op->status = op->body(*op);
                      }
                    });
  constexpr int kThreads = 8, kEach = 200;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string id = std::to_string(t * kEach + i);
        absl::Status s = queue.Run(
            [id](GroupCommit::Operation&) { return absl::AbortedError(id); },
            /*read_only=*/false);
        if (s.message() != id) wrong.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(queue.commits(), kThreads * kEach);
}

// Run from a completion would wait for the thread that runs it.
TEST_P(GroupCommitTest, RunFromACompletionFailsInsteadOfWaitingForItself) {
  Log log;
  Runner runner(&log);
  Outcomes outcomes;
  absl::Status nested;
  Notification nested_done;
  {
    GroupCommit queue({.mode = GetParam(), .max_batch = 4}, runner.Get());
    auto op = outcomes.Op("a");
    op->done = [&](absl::Status) {
      nested = queue.Run(
          [](GroupCommit::Operation&) { return absl::OkStatus(); }, false);
      nested_done.Notify();
    };
    queue.Submit(std::move(op));
    ASSERT_TRUE(nested_done.WaitForNotificationWithTimeout(kPatience));
  }
  EXPECT_THAT(nested, StatusIs(absl::StatusCode::kFailedPrecondition,
                               ::testing::HasSubstr("wait for itself")));
}

// A completion may Submit: the operation waits for the next batch.
TEST_P(GroupCommitTest, ASubmitFromACompletionJoinsALaterBatch) {
  Log log;
  Runner runner(&log);
  std::atomic<int> completions{0};
  {
    GroupCommit queue({.mode = GetParam(), .max_batch = 4}, runner.Get());
    auto op = Op(&log, "a", &completions);
    op->done = [&](absl::Status) {
      log.Add("done:a");
      queue.Submit(Op(&log, "b", &completions));
    };
    queue.Submit(std::move(op));
    ASSERT_TRUE(log.WaitForEvents(4));
  }
  EXPECT_THAT(log.events(),
              ElementsAre("commit:a", "done:a", "commit:b", "done:b"));
}

// Leader mode.

GroupCommit::Options LeaderOptions(int max_batch) {
  return {.mode = GroupCommit::Mode::kLeader, .max_batch = max_batch};
}

TEST(GroupCommitLeaderTest, ASubmitWithNoBatchInFlightCommitsOnItsThread) {
  Log log;
  Runner runner(&log);
  GroupCommit queue(LeaderOptions(8), runner.Get());
  // Light load: one operation at a time, each committed and completed by
  // its caller; the spare thread never runs a batch.
  for (int i = 0; i < 20; ++i) {
    const std::string id = std::to_string(i);
    std::atomic<int> completions{0};
    queue.Submit(Op(&log, id, &completions));
    EXPECT_EQ(completions.load(), 1) << "completed before Submit returned";
  }
  EXPECT_THAT(runner.threads(), SizeIs(20));
  EXPECT_THAT(runner.threads(), Each(std::this_thread::get_id()));
}

TEST(GroupCommitLeaderTest, SubmitsDuringACommitReturnBeforeItEnds) {
  Log log;
  Runner runner(&log);
  std::atomic<int> completions{0};
  GroupCommit queue(LeaderOptions(8), runner.Get());
  runner.Arm();
  SubmittingThread leader(&queue, Op(&log, "a", &completions));
  ASSERT_TRUE(runner.WaitUntilHeld());
  // Each returns while "a" is held in its commit: nothing runs, nobody
  // waits.
  queue.Submit(Op(&log, "b", &completions));
  queue.Submit(Op(&log, "c", &completions));
  EXPECT_EQ(completions.load(), 0);
  EXPECT_THAT(log.events(), SizeIs(0));
  EXPECT_FALSE(leader.returned.HasBeenNotified());
  runner.Release();
  ASSERT_TRUE(leader.returned.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(log.WaitForEvents(5));
  EXPECT_EQ(completions.load(), 3);
  EXPECT_THAT(log.events(), ElementsAre("commit:a", "done:a", "commit:b,c",
                                        "done:b", "done:c"));
  for (std::thread::id id : runner.threads()) {
    EXPECT_NE(id, std::this_thread::get_id()) << "a follower ran a batch";
  }
}

// A leader's bound, reached or not; after it, the spare commits what is
// left with no further Submit.
struct BoundCase {
  const char* name;
  int max_batches_per_lead;
  absl::Duration max_lead_time;
  absl::Duration elapsed_during_first_batch;
  bool spare_takes_over;
};

void PrintTo(const BoundCase& c, std::ostream* os) { *os << c.name; }

class GroupCommitBoundTest : public ::testing::TestWithParam<BoundCase> {};

INSTANTIATE_TEST_SUITE_P(
    Bounds, GroupCommitBoundTest,
    ::testing::Values(BoundCase{"TimeBoundReached", 100, absl::Milliseconds(1),
                                absl::Milliseconds(5), true},
                      BoundCase{"BatchBoundReached", 1,
                                absl::InfiniteDuration(), absl::ZeroDuration(),
                                true},
                      BoundCase{"WithinBothBounds", 100, absl::Milliseconds(1),
                                absl::Microseconds(999), false}),
    [](const ::testing::TestParamInfo<BoundCase>& info) {
      return std::string(info.param.name);
    });

TEST_P(GroupCommitBoundTest, ALeaderPastItsBoundHandsTheQueueToTheSpare) {
  const BoundCase& c = GetParam();
  Log log;
  Runner runner(&log);
  std::atomic<int> completions{0};
  ManualClock clock(absl::FromUnixSeconds(1000));
  GroupCommit queue({.mode = GroupCommit::Mode::kLeader,
                     .max_batch = 2,
                     .max_batches_per_lead = c.max_batches_per_lead,
                     .max_lead_time = c.max_lead_time,
                     .clock = &clock},
                    runner.Get());
  runner.Arm();
  SubmittingThread leader(&queue, Op(&log, "a", &completions));
  ASSERT_TRUE(runner.WaitUntilHeld(1));
  for (const char* id : {"b", "c", "d"}) {
    queue.Submit(Op(&log, id, &completions));
  }
  clock.Advance(c.elapsed_during_first_batch);
  runner.Arm();  // holds the second batch, whoever runs it
  runner.Release();
  ASSERT_TRUE(runner.WaitUntilHeld(2));
  if (c.spare_takes_over) {
    // The leader left while its successor's batch is still in its commit.
    EXPECT_TRUE(leader.returned.WaitForNotificationWithTimeout(kPatience));
  } else {
    EXPECT_FALSE(leader.returned.HasBeenNotified());
  }
  runner.Release();
  ASSERT_TRUE(log.WaitForEvents(7));  // no Submit needed to get there
  ASSERT_TRUE(leader.returned.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(completions.load(), 4);
  EXPECT_THAT(log.events(),
              ElementsAre("commit:a", "done:a", "commit:b,c", "done:b",
                          "done:c", "commit:d", "done:d"));
  const std::vector<std::thread::id> threads = runner.threads();
  ASSERT_THAT(threads, SizeIs(3));
  EXPECT_EQ(threads[0], leader.id);
  for (size_t i = 1; i < threads.size(); ++i) {
    EXPECT_NE(threads[i], std::this_thread::get_id());
    if (c.spare_takes_over) {
      EXPECT_NE(threads[i], leader.id) << "batch " << i;
    } else {
      EXPECT_EQ(threads[i], leader.id) << "batch " << i;
    }
  }
}

// A leader past its bound leaves the queue to the next Submit, which leads
// as if nothing were in flight: it commits what waited with its own
// operation, on its own thread, before it returns. (The grace is longer than
// the test, so the spare cannot step in first.)
TEST(GroupCommitLeaderTest, ALeaderPastItsBoundLeavesTheQueueToTheNextSubmit) {
  Log log;
  Runner runner(&log);
  std::atomic<int> completions{0};
  GroupCommit queue({.mode = GroupCommit::Mode::kLeader,
                     .max_batch = 8,
                     .max_batches_per_lead = 1,
                     .spare_grace = absl::Hours(1)},
                    runner.Get());
  runner.Arm();
  SubmittingThread leader(&queue, Op(&log, "a", &completions));
  ASSERT_TRUE(runner.WaitUntilHeld(1));
  for (const char* id : {"b", "c"}) {
    queue.Submit(Op(&log, id, &completions));
  }
  runner.Arm();  // holds the second batch, whoever runs it
  runner.Release();
  ASSERT_TRUE(leader.returned.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(completions.load(), 1);
  SubmittingThread next(&queue, Op(&log, "d", &completions));
  ASSERT_TRUE(runner.WaitUntilHeld(2));
  runner.Release();
  ASSERT_TRUE(next.returned.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(completions.load(), 4) << "d's Submit returned before its commit";
  EXPECT_THAT(log.events(), ElementsAre("commit:a", "done:a", "commit:b,c,d",
                                        "done:b", "done:c", "done:d"));
  const std::vector<std::thread::id> threads = runner.threads();
  ASSERT_THAT(threads, SizeIs(2));
  EXPECT_EQ(threads[0], leader.id);
  EXPECT_EQ(threads[1], next.id) << "the queue went to another thread";
}

TEST(GroupCommitLeaderTest, ALeaderWhoseBatchFailsFailsOnlyThatBatch) {
  Outcomes outcomes;
  std::atomic<int> batches{0};
  Notification held, release;
  GroupCommit queue({.mode = GroupCommit::Mode::kLeader,
                     .max_batch = 2,
                     .max_batches_per_lead = 100,
                     .max_lead_time = absl::InfiniteDuration()},
                    [&](absl::Span<GroupCommit::Operation* const> batch) {
                      const int n = ++batches;
                      if (n == 1) {
                        held.Notify();
                        release.WaitForNotificationWithTimeout(kPatience);
                      }
                      for (GroupCommit::Operation* op : batch) {
                        op->status = op->body(*op);
                        // The second batch's commit fails, as a full disk
                        // would.
                        if (n == 2)
                          op->status = absl::UnavailableError("disk full");
                      }
                    });
  SubmittingThread leader(&queue, outcomes.Op("a"));
  ASSERT_TRUE(held.WaitForNotificationWithTimeout(kPatience));
  for (const char* id : {"b", "c", "d"}) queue.Submit(outcomes.Op(id));
  queue.WaitForPendingForTesting(3);
  release.Notify();
  ASSERT_TRUE(leader.returned.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(batches.load(), 3);  // [a], [b, c], [d]: all by the leader
  EXPECT_THAT(outcomes.of("a"), ElementsAre(IsOk()));
  for (const char* id : {"b", "c"}) {
    EXPECT_THAT(
        outcomes.of(id),
        ElementsAre(StatusIs(absl::StatusCode::kUnavailable, "disk full")))
        << id;
  }
  EXPECT_THAT(outcomes.of("d"), ElementsAre(IsOk()));
  // The lead was given up: the next Submit leads and commits at once.
  queue.Submit(outcomes.Op("e"));
  EXPECT_THAT(outcomes.of("e"), ElementsAre(IsOk()));
  EXPECT_EQ(batches.load(), 4);
}

TEST(GroupCommitLeaderTest, DestructorWaitsForALeaderOnAnotherThread) {
  Log log;
  Runner runner(&log);
  Outcomes outcomes;
  auto* queue = new GroupCommit(LeaderOptions(8), runner.Get());
  runner.Arm();
  SubmittingThread leader(queue, outcomes.Op("a"));
  ASSERT_TRUE(runner.WaitUntilHeld());
  queue->Submit(outcomes.Op("b"));
  queue->Submit(outcomes.Op("c"));
  Notification destroyed;
  std::thread destroyer([&] {
    delete queue;
    destroyed.Notify();
  });
  // Until the destructor has begun, a Submit queues behind "a"; from then
  // on, it is refused at once. The queue lives while "a" is held.
  std::vector<std::string> accepted = {"a", "b", "c"};
  std::string refused;
  const absl::Time deadline = absl::Now() + kPatience;
  for (int i = 0; refused.empty() && absl::Now() < deadline; ++i) {
    const std::string id = "probe" + std::to_string(i);
    queue->Submit(outcomes.Op(id));
    if (outcomes.of(id).empty()) {
      accepted.push_back(id);
      std::this_thread::yield();
    } else {
      refused = id;
    }
  }
  ASSERT_FALSE(refused.empty()) << "the destructor never began";
  EXPECT_THAT(outcomes.of(refused),
              ElementsAre(StatusIs(absl::StatusCode::kUnavailable,
                                   "the store is closing")));
  // Correct code never returns here; a destructor that does not wait for
  // the leader returns within microseconds of the refusal.
  EXPECT_FALSE(
      destroyed.WaitForNotificationWithTimeout(absl::Milliseconds(200)))
      << "returned while a batch committed";
  runner.Release();
  ASSERT_TRUE(destroyed.WaitForNotificationWithTimeout(kPatience))
      << "the destructor never returned";
  destroyer.join();
  // Everything submitted before the destructor began was committed, once.
  for (const std::string& id : accepted) {
    EXPECT_THAT(outcomes.of(id), ElementsAre(IsOk())) << id;
  }
}

TEST(GroupCommitLeaderTest, AtMostOneThreadIsEverInsideTheRunner) {
  std::atomic<int> inside{0}, most{0}, completed{0};
  GroupCommit queue(
      {.mode = GroupCommit::Mode::kLeader,
       .max_batch = 4,
       .max_batches_per_lead = 2},
      [&](absl::Span<GroupCommit::Operation* const> batch) {
        const int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::yield();  // widen the window
        for (GroupCommit::Operation* op : batch) {
          op->status = op->body(*op);
        }
        --inside;
      });
  constexpr int kThreads = 8, kEach = 300;
  std::vector<std::atomic<int>> done(kThreads * kEach);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto op = std::make_unique<GroupCommit::Operation>();
        op->body = [](GroupCommit::Operation&) { return absl::OkStatus(); };
        op->done = [&, n = t * kEach + i](absl::Status) {
          done[n].fetch_add(1);
          completed.fetch_add(1);
        };
        queue.Submit(std::move(op));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const absl::Time deadline = absl::Now() + kPatience;
  while (completed.load() < kThreads * kEach && absl::Now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(most.load(), 1);
  int not_once = 0;
  for (const std::atomic<int>& d : done) not_once += d.load() != 1;
  EXPECT_EQ(not_once, 0) << "operations not completed exactly once";
}

TEST(GroupCommitDedicatedTest, NoSubmitCommitsOnItsCaller) {
  Log log;
  Runner runner(&log);
  std::atomic<int> completions{0};
  {
    GroupCommit queue(
        {.mode = GroupCommit::Mode::kDedicatedThread, .max_batch = 8},
        runner.Get());
    for (int i = 0; i < 5; ++i) {
      queue.Submit(Op(&log, std::to_string(i), &completions));
    }
  }
  EXPECT_EQ(completions.load(), 5);
  for (std::thread::id id : runner.threads()) {
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

}  // namespace
}  // namespace hilo
