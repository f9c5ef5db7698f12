// GroupCommit's contract: batches in arrival order, at most max_batch,
// completions only after their batch's commit returned.
#include "service/store/group_commit.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/mutex.h"
#include "testing/status_matchers.h"
#include "tests/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::StatusIs;
using ::testing::ElementsAre;

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

 private:
  base::Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
};

// A BatchRunner that logs each batch as "commit:<ids>" after running the
// bodies, and can hold the next batch until released.
class Runner {
 public:
  explicit Runner(Log* log) : log_(log) {}
  GroupCommit::BatchRunner Get() {
    return [this](absl::Span<GroupCommit::Operation* const> batch) {
      if (hold_.exchange(false)) {
        held_.Notify();
        release_.WaitForNotification();
      }
      std::string ids;
      for (GroupCommit::Operation* op : batch) {
        op->status = op->body(*op);
        ids += ids.empty() ? "" : ",";
        ids += std::string(op->status.message());
      }
      log_->Add("commit:" + ids);
    };
  }
  void HoldNext() { hold_ = true; }
  void WaitUntilHeld() { held_.WaitForNotification(); }
  void Release() { release_.Notify(); }

 private:
  Log* const log_;
  std::atomic<bool> hold_{false};
  testing_util::Notification held_, release_;
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
    log->Add("done:" + std::string(status.message()));
    completions->fetch_add(1);
  };
  return op;
}

TEST(GroupCommitTest, CompletionsRunOnlyAfterTheirBatchCommitted) {
  Log log;
  Runner runner(&log);
  std::atomic<int> completions{0};
  {
    GroupCommit queue(/*max_batch=*/8, runner.Get());
    runner.HoldNext();
    queue.Submit(Op(&log, "a", &completions));
    runner.WaitUntilHeld();
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

TEST(GroupCommitTest, BatchesTakeTheOldestAtMostMaxBatchAtATime) {
  Log log;
  Runner runner(&log);
  std::atomic<int> completions{0};
  {
    GroupCommit queue(/*max_batch=*/2, runner.Get());
    runner.HoldNext();
    queue.Submit(Op(&log, "0", &completions));
    runner.WaitUntilHeld();
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
  GroupCommit queue(/*max_batch=*/4, runner.Get());
  absl::Status s = queue.Run(
      [](GroupCommit::Operation&) { return absl::NotFoundError("x"); },
      /*read_only=*/true);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound, "x"));
}

TEST(GroupCommitTest, ManyThreadsEachGetTheirOwnOutcome) {
  Log log;
  GroupCommit queue(/*max_batch=*/16,
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

}  // namespace
}  // namespace hilo
