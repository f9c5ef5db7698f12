// ShutdownSequence: the order of a node's stop, the bound gRPC's teardown
// gets past the grace, and the watchdog's exit and line, with time moved by
// hand (a timer whose waits end when the test says) and a node that holds
// its Shutdown or its store's close for as long as the test wants: no
// process, no signal, no sleep.
#include "service/shutdown_sequence.h"

#include <algorithm>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/mutex.h"

namespace hilo {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// How long a test waits for something the sequence's threads are about to
// do before it fails (rather than hangs); nothing here takes that long.
constexpr absl::Duration kPatience = absl::Seconds(10);

// A timer whose waits end only when the test expires their timeout (or
// their condition holds); a timeout of zero or less has already passed, as
// with a real clock. Each distinct timeout stands for one wait.
class ManualTimer final : public ShutdownTimer {
 public:
  bool Wait(base::Mutex& mu, absl::FunctionRef<bool()> until,
            absl::Duration timeout) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    {
      base::MutexLock lock(&own_);
      waits_.push_back(timeout);
      mutexes_.insert(&mu);
    }
    mu.Await([&] { return until() || Expired(timeout); });
    {
      base::MutexLock lock(&own_);
      mutexes_.erase(mutexes_.find(&mu));
    }
    return until();
  }

  // Whether a wait for `timeout` began (within kPatience).
  bool AwaitWait(absl::Duration timeout) {
    base::MutexLock lock(&own_);
    return own_.AwaitWithTimeout(
        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(own_) {
          return std::find(waits_.begin(), waits_.end(), timeout) !=
                 waits_.end();
        },
        kPatience);
  }

  // `timeout` has passed: the waits for it end.
  void Expire(absl::Duration timeout) {
    {
      base::MutexLock lock(&own_);
      expired_.insert(timeout);
    }
    WakeWaiters();
  }
  // Every wait ends (a test's clean-up).
  void ExpireAll() {
    {
      base::MutexLock lock(&own_);
      all_expired_ = true;
    }
    WakeWaiters();
  }

 private:
  bool Expired(absl::Duration timeout) {
    base::MutexLock lock(&own_);
    return all_expired_ || timeout <= absl::ZeroDuration() ||
           expired_.count(timeout) > 0;
  }
  // Each waiter re-checks its condition when its mutex is unlocked.
  void WakeWaiters() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    std::multiset<base::Mutex*> mutexes;
    {
      base::MutexLock lock(&own_);
      mutexes = mutexes_;
    }
    for (base::Mutex* mu : mutexes) {
      mu->Lock();
      mu->Unlock();
    }
  }

  base::Mutex own_;
  std::vector<absl::Duration> waits_ ABSL_GUARDED_BY(own_);
  std::set<absl::Duration> expired_ ABSL_GUARDED_BY(own_);
  bool all_expired_ ABSL_GUARDED_BY(own_) = false;
  // The mutex of each wait in progress.
  std::multiset<base::Mutex*> mutexes_ ABSL_GUARDED_BY(own_);
};

// A node that says what was done to it, in order, and whose Shutdown and
// CloseStore return only once the test lets them (if it holds them).
class FakeNode final : public StoppableNode {
 public:
  FakeNode(bool hold_shutdown, bool hold_close)
      : shutdown_released_(!hold_shutdown), close_released_(!hold_close) {}

  void StartDraining() override { Note("StartDraining"); }
  void Shutdown(absl::Duration grace) override {
    Note(absl::StrCat("Shutdown(", absl::FormatDuration(grace), ")"));
    base::MutexLock lock(&mu_);
    mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return shutdown_released_;
    });
  }
  void EndCalls() override { Note("EndCalls"); }
  void CloseStore() override {
    Note("CloseStore");
    base::MutexLock lock(&mu_);
    mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return close_released_;
    });
  }
  int64_t calls_in_services() const override {
    base::MutexLock lock(&mu_);
    return calls_;
  }

  void set_calls(int64_t calls) {
    base::MutexLock lock(&mu_);
    calls_ = calls;
  }
  void ReleaseShutdown() {
    base::MutexLock lock(&mu_);
    shutdown_released_ = true;
  }
  void ReleaseClose() {
    base::MutexLock lock(&mu_);
    close_released_ = true;
  }
  // Whether `event` was noted (within kPatience).
  bool AwaitEvent(const std::string& event) {
    base::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return std::find(events_.begin(), events_.end(), event) !=
                 events_.end();
        },
        kPatience);
  }
  std::vector<std::string> events() {
    base::MutexLock lock(&mu_);
    return events_;
  }

 private:
  void Note(std::string event) {
    base::MutexLock lock(&mu_);
    events_.push_back(std::move(event));
  }

  mutable base::Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
  int64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_released_ ABSL_GUARDED_BY(mu_);
  bool close_released_ ABSL_GUARDED_BY(mu_);
};

using Exit = std::pair<int, std::string>;

// What the watchdog asked the process to do.
class Exits {
 public:
  ShutdownSequence::ExitFunction Function() {
    return [this](int code, std::string line) {
      base::MutexLock lock(&mu_);
      exits_.emplace_back(code, std::move(line));
    };
  }
  // Whether an exit was asked for (within kPatience).
  bool AwaitOne() {
    base::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
        [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !exits_.empty(); },
        kPatience);
  }
  std::vector<Exit> all() {
    base::MutexLock lock(&mu_);
    return exits_;
  }

 private:
  base::Mutex mu_;
  std::vector<Exit> exits_ ABSL_GUARDED_BY(mu_);
};

constexpr absl::Duration kDrain = absl::Seconds(2);
constexpr absl::Duration kGrace = absl::Seconds(10);
// What the sequence is documented to wait: the grace plus half a second for
// gRPC's teardown, and drain + grace + 1 s for everything.
constexpr absl::Duration kTeardownBound = absl::Milliseconds(10500);
constexpr absl::Duration kWatchdogLimit = absl::Seconds(13);
constexpr char kStore[] = "SQLite database /data/hilo.db";
constexpr char kStopped[] = "hilo_server: stopped";
constexpr char kStoppedWithoutGrpc[] =
    "hilo_server: stopped (gRPC was still tearing down the calls it "
    "cancelled 500ms after --shutdown_grace; no call was left in the store, "
    "and it is closed)";

// A sequence over a FakeNode, its Run() on a thread of its own. Whatever a
// test leaves held, the fixture lets go of before it waits for the threads.
class ShutdownSequenceTest : public ::testing::Test {
 protected:
  ~ShutdownSequenceTest() override {
    if (node_ != nullptr) {
      node_->ReleaseShutdown();
      node_->ReleaseClose();
    }
    timer_.ExpireAll();
    if (runner_.joinable()) runner_.join();
    sequence_.reset();
  }

  void Start(absl::Duration drain, bool hold_shutdown, bool hold_close) {
    node_ = std::make_unique<FakeNode>(hold_shutdown, hold_close);
    sequence_ = std::make_unique<ShutdownSequence>(
        node_.get(), ShutdownSequence::Times{drain, kGrace, kStore},
        exits_.Function(), timer_);
    runner_ = std::thread([this] {
      std::string line = sequence_->Run();
      base::MutexLock lock(&mu_);
      line_ = std::move(line);
    });
  }
  // Run()'s line, once it has returned (within kPatience); "" before.
  std::string RunLine() {
    base::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(
        [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !line_.empty(); },
        kPatience);
    return line_;
  }

  ManualTimer timer_;
  Exits exits_;
  std::unique_ptr<FakeNode> node_;
  std::unique_ptr<ShutdownSequence> sequence_;

 private:
  base::Mutex mu_;
  std::string line_ ABSL_GUARDED_BY(mu_);
  std::thread runner_;
};

TEST_F(ShutdownSequenceTest, DrainsThenStopsAndSaysStoppedWhenGrpcReturns) {
  Start(kDrain, /*hold_shutdown=*/false, /*hold_close=*/false);
  EXPECT_EQ(sequence_->watchdog_limit(), kWatchdogLimit);
  ASSERT_TRUE(timer_.AwaitWait(kDrain));
  // Draining: health says NOT_SERVING, calls are still served.
  EXPECT_THAT(node_->events(), ElementsAre("StartDraining"));
  timer_.Expire(kDrain);
  EXPECT_EQ(RunLine(), kStopped);
  EXPECT_THAT(node_->events(), ElementsAre("StartDraining", "Shutdown(10s)"));
  ASSERT_TRUE(timer_.AwaitWait(kWatchdogLimit));
  // Destroyed before its limit, the watchdog ends nothing.
  sequence_.reset();
  EXPECT_THAT(exits_.all(), IsEmpty());
}

TEST_F(ShutdownSequenceTest, StopsWithoutGrpcHalfASecondPastTheGrace) {
  Start(absl::ZeroDuration(), /*hold_shutdown=*/true, /*hold_close=*/false);
  ASSERT_TRUE(timer_.AwaitWait(kTeardownBound));
  ASSERT_TRUE(node_->AwaitEvent("Shutdown(10s)"));
  // gRPC's Shutdown has not returned, and the bound has not passed.
  EXPECT_THAT(node_->events(), ElementsAre("StartDraining", "Shutdown(10s)"));
  timer_.Expire(kTeardownBound);
  EXPECT_EQ(RunLine(), kStoppedWithoutGrpc);
  EXPECT_THAT(node_->events(), ElementsAre("StartDraining", "Shutdown(10s)",
                                           "EndCalls", "CloseStore"));
  EXPECT_THAT(exits_.all(), IsEmpty());
}

TEST_F(ShutdownSequenceTest, WatchdogExitsFiveNamingAStoreCloseThatHangs) {
  Start(kDrain, /*hold_shutdown=*/true, /*hold_close=*/true);
  ASSERT_TRUE(timer_.AwaitWait(kDrain));
  timer_.Expire(kDrain);
  ASSERT_TRUE(timer_.AwaitWait(kTeardownBound));
  timer_.Expire(kTeardownBound);
  ASSERT_TRUE(node_->AwaitEvent("CloseStore"));
  timer_.Expire(kWatchdogLimit);
  ASSERT_TRUE(exits_.AwaitOne());
  EXPECT_THAT(exits_.all(),
              ElementsAre(Exit(
                  5,
                  "hilo_server: shutdown did not finish within --drain_delay + "
                  "--shutdown_grace + 1s (13s): closing the store (SQLite "
                  "database /data/hilo.db) has not finished, every call had "
                  "ended and what they committed is durable; exiting with "
                  "status 5")));
}

struct StuckCalls {
  int64_t calls;
  const char* says;
};

void PrintTo(const StuckCalls& stuck, std::ostream* out) {
  *out << stuck.calls << " stuck";
}

class ShutdownWatchdogCallsTest
    : public ShutdownSequenceTest,
      public ::testing::WithParamInterface<StuckCalls> {};

TEST_P(ShutdownWatchdogCallsTest, ExitsFiveNamingTheCallsAndTheStore) {
  Start(kDrain, /*hold_shutdown=*/true, /*hold_close=*/false);
  node_->set_calls(GetParam().calls);
  ASSERT_TRUE(timer_.AwaitWait(kDrain));
  timer_.Expire(kDrain);
  ASSERT_TRUE(timer_.AwaitWait(kTeardownBound));
  timer_.Expire(kWatchdogLimit);
  ASSERT_TRUE(exits_.AwaitOne());
  EXPECT_THAT(
      exits_.all(),
      ElementsAre(Exit(
          5, absl::StrCat("hilo_server: shutdown did not finish within "
                          "--drain_delay + --shutdown_grace + 1s (13s): ",
                          GetParam().says,
                          " for the store (SQLite database /data/hilo.db), a "
                          "commit that has not returned; no answer is sent; "
                          "exiting with status 5"))));
  // gRPC's Shutdown returns after all (in a process, nobody is left to see).
  node_->ReleaseShutdown();
  EXPECT_EQ(RunLine(), kStopped);
}

INSTANTIATE_TEST_SUITE_P(OneOrMany, ShutdownWatchdogCallsTest,
                         ::testing::Values(StuckCalls{1, "1 call still waits"},
                                           StuckCalls{2, "2 calls still wait"}),
                         [](const ::testing::TestParamInfo<StuckCalls>& info) {
                           return absl::StrCat(info.param.calls, "Calls");
                         });

TEST(ShutdownStoreNameTest, NamesTheSqliteFileOrThePostgresqlDatabase) {
  ServerOptions sqlite;
  EXPECT_EQ(ShutdownStoreName(sqlite, "/var/lib/hilo/hilo.db"),
            "SQLite database /var/lib/hilo/hilo.db");
  ServerOptions postgres;
  postgres.postgres_uri = "postgresql://hilo:secret@db.internal:5433/ids";
  EXPECT_EQ(ShutdownStoreName(postgres, ""),
            "PostgreSQL postgresql://hilo@db.internal:5433/ids");
}

}  // namespace
}  // namespace hilo
