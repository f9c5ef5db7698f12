// GroupCommit's contract (service/store/group_commit.h): batches in arrival
// order, at most max_batch, completions only after their batch's commit
// returned, every batch run by the queue's one thread and never by a
// caller's, a Submit that returns before its operation commits, a failed
// batch that fails only its own operations, a destructor that commits
// everything submitted before it began and refuses the rest, and the
// completions of two or more operations run as one CompletionBatch.
#include "service/store/group_commit.h"

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/mutex.h"
#include "service/store/completion_batch.h"
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
      ++completions_;
    };
    return op;
  }
  // Every status recorded for `id` (one if it was completed once).
  std::vector<absl::Status> of(const std::string& id) {
    base::MutexLock lock(&mu_);
    return statuses_[id];
  }
  // Waits until at least `n` completions in all have been recorded; false
  // after kPatience.
  bool WaitForCompletions(size_t n) {
    base::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return completions_ >= n; },
        kPatience);
  }

 private:
  base::Mutex mu_;
  std::map<std::string, std::vector<absl::Status>> statuses_
      ABSL_GUARDED_BY(mu_);
  size_t completions_ ABSL_GUARDED_BY(mu_) = 0;
};

// Submits `op` on a thread of its own; `returned` is notified when Submit
// has returned.
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

TEST(GroupCommitTest, CompletionsRunOnlyAfterTheirBatchCommitted) {
  Log log;
  Runner runner(&log);
  std::atomic<int> completions{0};
  {
    GroupCommit queue({.max_batch = 8}, runner.Get());
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

// Logs "end" when a batch it joined ends.
class EndLogger : public CompletionBatch::Listener {
 public:
  explicit EndLogger(Log* log) : log_(log) {}
  void OnBatchEnd(const CompletionBatch&) override { log_->Add("end"); }

 private:
  Log* const log_;
};

TEST(GroupCommitTest, CompletionsOfTwoOrMoreRunAsOneCompletionBatch) {
  Log log;
  Runner runner(&log);
  EndLogger end(&log);
  std::vector<const CompletionBatch*> batches;  // the queue's thread only
  auto op = [&](const std::string& id) {
    auto made = std::make_unique<GroupCommit::Operation>();
    made->body = [id](GroupCommit::Operation&) {
      return absl::AbortedError(id);  // carries the id into the log
    };
    made->done = [&, id](absl::Status) {
      CompletionBatch* batch = CompletionBatch::Current();
      batches.push_back(batch);
      if (batch != nullptr) batch->Join(&end);  // each joins; heard once
      log.Add("done:" + id);
    };
    return made;
  };
  {
    GroupCommit queue({.max_batch = 8}, runner.Get());
    runner.Arm();
    SubmittingThread first(&queue, op("a"));
    ASSERT_TRUE(runner.WaitUntilHeld());
    for (const char* id : {"b", "c", "d"}) queue.Submit(op(id));
    queue.WaitForPendingForTesting(3);
    runner.Release();
  }
  // "a" committed alone: nothing to wait for. b, c and d shared a batch,
  // which ended once, after the last of them.
  EXPECT_THAT(log.events(), ElementsAre("commit:a", "done:a", "commit:b,c,d",
                                        "done:b", "done:c", "done:d", "end"));
  ASSERT_THAT(batches, SizeIs(4));
  EXPECT_EQ(batches[0], nullptr);
  EXPECT_NE(batches[1], nullptr);
  EXPECT_EQ(batches[2], batches[1]);
  EXPECT_EQ(batches[3], batches[1]);
  EXPECT_EQ(CompletionBatch::Current(), nullptr);  // this thread's: none
}

TEST(GroupCommitTest, BatchesTakeTheOldestAtMostMaxBatchAtATime) {
  Log log;
  Runner runner(&log);
  std::atomic<int> completions{0};
  {
    GroupCommit queue({.max_batch = 2}, runner.Get());
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

TEST(GroupCommitTest, RunReturnsTheStatusTheRunnerSet) {
  Log log;
  Runner runner(&log);
  GroupCommit queue({.max_batch = 4}, runner.Get());
  absl::Status s = queue.Run(
      [](GroupCommit::Operation&) { return absl::NotFoundError("x"); },
      /*read_only=*/true);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound, "x"));
}

TEST(GroupCommitTest, ManyThreadsEachGetTheirOwnOutcome) {
  GroupCommit queue({.max_batch = 16},
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
TEST(GroupCommitTest, RunFromACompletionFailsInsteadOfWaitingForItself) {
  Log log;
  Runner runner(&log);
  Outcomes outcomes;
  absl::Status nested;
  Notification nested_done;
  {
    GroupCommit queue({.max_batch = 4}, runner.Get());
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
TEST(GroupCommitTest, ASubmitFromACompletionJoinsALaterBatch) {
  Log log;
  Runner runner(&log);
  std::atomic<int> completions{0};
  {
    GroupCommit queue({.max_batch = 4}, runner.Get());
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

// Every Submit, the first included, only queues: none runs a batch or waits
// for one, even while a batch is held in its commit.
TEST(GroupCommitTest, SubmitsReturnBeforeTheirBatchCommits) {
  Log log;
  Runner runner(&log);
  std::atomic<int> completions{0};
  GroupCommit queue({.max_batch = 8}, runner.Get());
  runner.Arm();
  queue.Submit(Op(&log, "a", &completions));
  ASSERT_TRUE(runner.WaitUntilHeld());
  queue.Submit(Op(&log, "b", &completions));
  queue.Submit(Op(&log, "c", &completions));
  // All three returned while "a" is held in its commit: nothing ran here.
  EXPECT_EQ(completions.load(), 0);
  EXPECT_THAT(log.events(), SizeIs(0));
  runner.Release();
  ASSERT_TRUE(log.WaitForEvents(5));
  EXPECT_EQ(completions.load(), 3);
  EXPECT_THAT(log.events(), ElementsAre("commit:a", "done:a", "commit:b,c",
                                        "done:b", "done:c"));
  for (std::thread::id id : runner.threads()) {
    EXPECT_NE(id, std::this_thread::get_id()) << "a caller ran a batch";
  }
}

// The queue's thread runs batch after batch until nothing waits, with no
// further Submit (and no destructor) needed to get there.
TEST(GroupCommitTest, OneThreadRunsEveryBatchUntilNothingWaits) {
  Log log;
  Runner runner(&log);
  std::atomic<int> completions{0};
  GroupCommit queue({.max_batch = 2}, runner.Get());
  runner.Arm();
  SubmittingThread first(&queue, Op(&log, "a", &completions));
  ASSERT_TRUE(runner.WaitUntilHeld(1));
  for (const char* id : {"b", "c", "d"}) {
    queue.Submit(Op(&log, id, &completions));
  }
  runner.Release();
  ASSERT_TRUE(log.WaitForEvents(7));
  ASSERT_TRUE(first.returned.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(completions.load(), 4);
  EXPECT_THAT(log.events(),
              ElementsAre("commit:a", "done:a", "commit:b,c", "done:b",
                          "done:c", "commit:d", "done:d"));
  const std::vector<std::thread::id> threads = runner.threads();
  ASSERT_THAT(threads, SizeIs(3));
  EXPECT_THAT(threads, Each(threads[0]));
  EXPECT_NE(threads[0], std::this_thread::get_id());
  EXPECT_NE(threads[0], first.id);
}

TEST(GroupCommitTest, AFailedBatchFailsOnlyItsOwnOperations) {
  Outcomes outcomes;
  std::atomic<int> batches{0};
  Notification held, release;
  GroupCommit queue({.max_batch = 2},
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
  queue.Submit(outcomes.Op("a"));
  ASSERT_TRUE(held.WaitForNotificationWithTimeout(kPatience));
  for (const char* id : {"b", "c", "d"}) queue.Submit(outcomes.Op(id));
  queue.WaitForPendingForTesting(3);
  release.Notify();
  ASSERT_TRUE(outcomes.WaitForCompletions(4));
  EXPECT_EQ(batches.load(), 3);  // [a], [b, c], [d]
  EXPECT_THAT(outcomes.of("a"), ElementsAre(IsOk()));
  for (const char* id : {"b", "c"}) {
    EXPECT_THAT(
        outcomes.of(id),
        ElementsAre(StatusIs(absl::StatusCode::kUnavailable, "disk full")))
        << id;
  }
  EXPECT_THAT(outcomes.of("d"), ElementsAre(IsOk()));
  // The queue goes on: the next operation commits.
  queue.Submit(outcomes.Op("e"));
  ASSERT_TRUE(outcomes.WaitForCompletions(5));
  EXPECT_THAT(outcomes.of("e"), ElementsAre(IsOk()));
  EXPECT_EQ(batches.load(), 4);
}

TEST(GroupCommitTest, DestructorWaitsForTheBatchInItsCommit) {
  Log log;
  Runner runner(&log);
  Outcomes outcomes;
  auto* queue = new GroupCommit({.max_batch = 8}, runner.Get());
  runner.Arm();
  queue->Submit(outcomes.Op("a"));
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
  // the batch returns within microseconds of the refusal.
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

TEST(GroupCommitTest, AtMostOneThreadIsEverInsideTheRunner) {
  std::atomic<int> inside{0}, most{0}, completed{0};
  GroupCommit queue(
      {.max_batch = 4}, [&](absl::Span<GroupCommit::Operation* const> batch) {
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

TEST(GroupCommitTest, NoSubmitCommitsOnItsCaller) {
  Log log;
  Runner runner(&log);
  std::atomic<int> completions{0};
  {
    GroupCommit queue({.max_batch = 8}, runner.Get());
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
