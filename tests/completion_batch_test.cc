// CompletionBatch (service/store/completion_batch.h): a thread knows the
// batch it runs and no other thread does; each listener that joined hears
// the end once, in the order it first joined, with the batch no longer
// current; a batch inside another on one thread is refused.
#include "service/store/completion_batch.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hilo {
namespace {

using ::testing::ElementsAre;

// Records its name, and whether a batch was current, when a batch ends.
class Recorder : public CompletionBatch::Listener {
 public:
  Recorder(std::string name, std::vector<std::string>* heard)
      : name_(std::move(name)), heard_(heard) {}
  void OnBatchEnd(const CompletionBatch& batch) override {
    heard_->push_back(name_);
    ended_ = &batch;
    current_at_end_ = CompletionBatch::Current();
  }
  const CompletionBatch* ended() const { return ended_; }
  const CompletionBatch* current_at_end() const { return current_at_end_; }

 private:
  const std::string name_;
  std::vector<std::string>* const heard_;
  const CompletionBatch* ended_ = nullptr;
  const CompletionBatch* current_at_end_ = nullptr;
};

TEST(CompletionBatchTest, OnlyTheThreadThatRunsABatchSeesIt) {
  EXPECT_EQ(CompletionBatch::Current(), nullptr);
  {
    CompletionBatch batch;
    EXPECT_EQ(CompletionBatch::Current(), &batch);
    const CompletionBatch* elsewhere = &batch;
    std::thread([&] { elsewhere = CompletionBatch::Current(); }).join();
    EXPECT_EQ(elsewhere, nullptr);
  }
  EXPECT_EQ(CompletionBatch::Current(), nullptr);
}

TEST(CompletionBatchTest, EachListenerHearsTheEndOnceInTheOrderItJoined) {
  std::vector<std::string> heard;
  Recorder a("a", &heard), b("b", &heard), idle("idle", &heard);
  const CompletionBatch* made = nullptr;
  {
    CompletionBatch batch;
    made = &batch;
    batch.Join(&b);
    batch.Join(&a);
    batch.Join(&b);  // again: heard once
    EXPECT_THAT(heard, ElementsAre());
  }
  EXPECT_THAT(heard, ElementsAre("b", "a"));
  EXPECT_EQ(a.ended(), made);
  // What a listener does at the end runs outside the batch: a reply it
  // writes then is not held for a batch that is over.
  EXPECT_EQ(a.current_at_end(), nullptr);
  EXPECT_EQ(b.current_at_end(), nullptr);
  EXPECT_EQ(idle.ended(), nullptr);
}

TEST(CompletionBatchTest, ABatchAfterAnEndedOneStartsWithNoListeners) {
  std::vector<std::string> heard;
  Recorder a("a", &heard);
  {
    CompletionBatch batch;
    batch.Join(&a);
  }
  { CompletionBatch batch; }
  EXPECT_THAT(heard, ElementsAre("a"));
}

TEST(CompletionBatchDeathTest, ABatchInsideAnotherOnOneThreadIsRefused) {
  // Re-executes the test binary for the death: this process has run a
  // thread of its own before.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        CompletionBatch outer;
        CompletionBatch inner;
      },
      "CompletionBatch opened inside another on the same thread");
}

}  // namespace
}  // namespace hilo
