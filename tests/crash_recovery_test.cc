// Restarts after a real crash: a child process allocates ranges from a
// SqliteRangeStore on several threads and is killed with SIGKILL, either
// while it holds a transaction of several operations open just before
// COMMIT, or at whatever moment the kill lands under load. The parent then
// opens the same database in-process, as a restarted server would, and
// checks what the contract promises after any crash: every range the child
// acknowledged (Allocate returned OK) is at or below the stored Max, the
// next range starts above all of them, and no two acknowledged ranges, over
// all the crashes, share a number.
//
// The child is forked from the test's only thread, before the parent starts
// any, and tells the parent everything over one pipe; the parent never
// sleeps to synchronise, and kills and reaps every child it forks.
//
// Returns are checked against the real hilo_server: a return it applied
// survives a kill -9 right after its reply, and cannot apply again.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "testing/server_process.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::ServerProcess;
using ::hilo::testing_util::TempDir;

constexpr char kCollection[] = "orders";
constexpr int kThreads = 8;
// Any token but 0; these tests never return a range.
constexpr uint64_t kToken = 0x6a09e667f3bcc908;
// How long the parent waits for the child's next message before it calls
// the child stuck and fails the test, instead of hanging.
constexpr int kMessageTimeoutMs = 10'000;

// One message from the child. Each is a single write(2) of at most PIPE_BUF
// bytes, so messages of different threads never interleave and a SIGKILL
// never leaves half of one in the pipe.
struct Message {
  enum class Kind : int64_t {
    kAcknowledged = 1,  // Allocate returned OK with `range`
    kHeld = 2,          // a transaction is held open before its COMMIT
    kFailed = 3,        // an Allocate failed (details on the child's stderr)
  };
  Kind kind = Kind::kFailed;
  Range range;            // kAcknowledged
  int64_t committed = 0;  // kHeld: operations this child committed
  int64_t held = 0;       // kHeld: operations in the open transaction
};
static_assert(sizeof(Message) <= PIPE_BUF, "one write must stay atomic");

struct ChildOptions {
  std::string path;
  SyncMode sync = SyncMode::kFull;
  // 0: allocate until killed. Otherwise, once at least this many operations
  // are committed, hold the next transaction of kThreads - 1 operations
  // open right before its COMMIT, send kHeld, and block until killed.
  int64_t hold_after_committed = 0;
};

// The child's side: opens the store and allocates from kThreads threads
// until killed, sending each acknowledged range to `fd`. Never returns.
//
// To hold a transaction of several operations, it first lets every thread
// finish and wait (draining), so no commit is in flight. The last to stop
// goes on alone: its operation is a batch of one, whose before-commit hook
// lets the other kThreads - 1 go and waits until all of them are queued
// behind it. They form the next batch, which the hook holds open.
class AllocatingChild {
 public:
  AllocatingChild(ChildOptions options, int fd)
      : options_(std::move(options)), fd_(fd) {}

  [[noreturn]] void Run() {
    SqliteRangeStoreOptions store_options;
    store_options.path = options_.path;
    store_options.sync = options_.sync;
    store_options.before_commit_for_testing = [this] { return BeforeCommit(); };
    store_options.on_commit = [this](absl::Duration, int operations, int64_t) {
      std::lock_guard<std::mutex> lock(mu_);
      committed_ += operations;
    };
    absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
        SqliteRangeStore::Open(std::move(store_options));
    if (!store.ok()) Fail(store.status());
    store_ = store->get();
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([this, i] { Allocate(i); });
    }
    for (std::thread& t : threads) t.join();
    // Only a child that held a commit ends its threads, and it blocks in
    // the hook; reaching here means the protocol broke.
    _exit(2);
  }

 private:
  enum class Phase { kRunning, kDraining, kOpening, kLiningUp, kHolding };

  void Allocate(int thread) {
    for (int64_t n = 0;; ++n) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (phase_ == Phase::kDraining) {
          if (++parked_ == kThreads) {
            phase_ = Phase::kOpening;  // this thread goes on alone
          } else {
            changed_.wait(lock, [&] {
              return phase_ != Phase::kDraining && phase_ != Phase::kOpening;
            });
          }
        }
        if (phase_ == Phase::kHolding) return;
        ++started_;
      }
      // Sizes from 1 to 50, different on every thread.
      const int64_t size = 1 + (thread * 7 + n * 13) % 50;
      absl::StatusOr<Range> range =
          store_->Allocate(kCollection, size, /*floor=*/0, kToken);
      if (!range.ok()) Fail(range.status());
      Message ack;
      ack.kind = Message::Kind::kAcknowledged;
      ack.range = *range;
      Send(ack);
      std::lock_guard<std::mutex> lock(mu_);
      ++acknowledged_;
      changed_.notify_all();
    }
  }

  // Runs on the write queue's thread before each batch's COMMIT, with all
  // the batch's writes made and not yet committed; one batch at a time.
  absl::Status BeforeCommit() {
    if (options_.hold_after_committed == 0) return absl::OkStatus();
    std::unique_lock<std::mutex> lock(mu_);
    switch (phase_) {
      case Phase::kRunning:
        if (committed_ >= options_.hold_after_committed) {
          phase_ = Phase::kDraining;
        }
        return absl::OkStatus();
      case Phase::kDraining:
      case Phase::kLiningUp:
        return absl::OkStatus();
      case Phase::kOpening:
        // The one operation of the thread that went on alone. Queue the
        // other threads' behind it, then let no thread start another.
        phase_ = Phase::kLiningUp;
        changed_.notify_all();
        lock.unlock();
        store_->WaitForPendingForTesting(kThreads - 1);
        lock.lock();
        phase_ = Phase::kHolding;
        return absl::OkStatus();
      case Phase::kHolding: {
        // Every committed operation's range is in the pipe before kHeld.
        changed_.wait(lock, [&] { return acknowledged_ == committed_; });
        Message held;
        held.kind = Message::Kind::kHeld;
        held.committed = committed_;
        held.held = started_ - committed_;
        Send(held);
        for (;;) pause();
      }
    }
    return absl::OkStatus();
  }

  void Send(const Message& message) {
    ssize_t n;
    do {
      n = write(fd_, &message, sizeof(message));
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(sizeof(message))) _exit(4);
  }

  [[noreturn]] void Fail(const absl::Status& status) {
    std::fprintf(stderr, "crash_recovery_test child: %s\n",
                 status.ToString().c_str());
    Message failed;
    failed.kind = Message::Kind::kFailed;
    Send(failed);
    _exit(3);
  }

  const ChildOptions options_;
  const int fd_;
  SqliteRangeStore* store_ = nullptr;
  std::mutex mu_;
  std::condition_variable changed_;
  Phase phase_ = Phase::kRunning;  // guarded by mu_, as are the counts
  int parked_ = 0;
  int64_t started_ = 0;       // Allocate calls begun
  int64_t committed_ = 0;     // operations committed
  int64_t acknowledged_ = 0;  // ranges sent to the parent
};

// The parent's handle on a forked AllocatingChild. The destructor kills and
// reaps a child still running, so none outlives its test; and the child
// dies with the test process (PR_SET_PDEATHSIG).
class Child {
 public:
  // Forks. Call from the test's only thread.
  explicit Child(ChildOptions options) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe2: " << std::strerror(errno);
      return;
    }
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      close(fds[0]);
      AllocatingChild(std::move(options), fds[1]).Run();
    }
    close(fds[1]);
    if (pid_ < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      close(fds[0]);
      return;
    }
    fd_ = fds[0];
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Reap();
    }
    if (fd_ >= 0) close(fd_);
  }

  // The child's next message; nullopt when the child is gone and everything
  // it sent has been read, or, failing the test, after kMessageTimeoutMs.
  std::optional<Message> Next() {
    if (fd_ < 0) return std::nullopt;
    Message message;
    char* const out = reinterpret_cast<char*>(&message);
    size_t got = 0;
    while (got < sizeof(message)) {
      pollfd p{fd_, POLLIN, 0};
      const int ready = poll(&p, 1, kMessageTimeoutMs);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        ADD_FAILURE() << "the child sent nothing for " << kMessageTimeoutMs
                      << " ms";
        return std::nullopt;
      }
      const ssize_t n = read(fd_, out + got, sizeof(message) - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        EXPECT_EQ(got, 0u) << "the pipe ended inside a message";
        return std::nullopt;
      }
      got += static_cast<size_t>(n);
    }
    return message;
  }

  // SIGKILLs the child and reaps it, failing the test unless SIGKILL is
  // what ended it (a child that failed or crashed on its own is a finding).
  void Kill() {
    ASSERT_GT(pid_, 0);
    ASSERT_EQ(kill(pid_, SIGKILL), 0) << std::strerror(errno);
    const int status = Reap();
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the child ended before the kill: "
        << (WIFEXITED(status) ? "exit code " : "signal ")
        << (WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  }

  // After Kill: every range the child acknowledged before it died that is
  // still in the pipe. Fails the test on any other message.
  std::vector<Range> DrainAcknowledged() {
    std::vector<Range> ranges;
    while (std::optional<Message> m = Next()) {
      EXPECT_EQ(m->kind, Message::Kind::kAcknowledged);
      if (m->kind == Message::Kind::kAcknowledged) ranges.push_back(m->range);
    }
    return ranges;
  }

 private:
  int Reap() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

  pid_t pid_ = -1;
  int fd_ = -1;
};

std::string Describe(const Range& r) {
  return absl::StrFormat("[%d, %d]", r.low, r.high);
}

int64_t HighestHigh(const std::vector<Range>& ranges) {
  int64_t highest = 0;
  for (const Range& r : ranges) highest = std::max(highest, r.high);
  return highest;
}

// Opens the database as a restarted server would and checks it against
// every acknowledged range: the stored Max is at least their highest high
// (exactly `exact_max` when given), and a new Allocate starts right above
// Max, so above all of them. Returns that new, acknowledged range. The
// store is closed, and any thread of its ended, before this returns, so the
// next fork happens with the test's thread alone.
std::optional<Range> CheckRestart(const std::string& path,
                                  const std::vector<Range>& acknowledged,
                                  std::optional<int64_t> exact_max) {
  SqliteRangeStoreOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteRangeStore>> store =
      SqliteRangeStore::Open(std::move(options));
  EXPECT_THAT(store, IsOk()) << "reopening after the kill: " << store.status();
  if (!store.ok()) return std::nullopt;
  absl::StatusOr<std::optional<CollectionState>> state =
      (*store)->Get(kCollection);
  EXPECT_THAT(state, IsOk());
  if (!state.ok()) return std::nullopt;
  const int64_t max = state->has_value() ? (*state)->max : 0;
  const int64_t highest = HighestHigh(acknowledged);
  EXPECT_GE(max, highest) << "an acknowledged range reaches above the "
                             "stored Max after the crash";
  if (exact_max.has_value()) {
    EXPECT_EQ(max, *exact_max)
        << "Max after a kill inside an open transaction: lower loses an "
           "acknowledged range, higher means uncommitted writes survived";
  }
  absl::StatusOr<Range> next =
      (*store)->Allocate(kCollection, 10, /*floor=*/0, kToken);
  EXPECT_THAT(next, IsOk());
  if (!next.ok()) return std::nullopt;
  EXPECT_EQ(next->low, max + 1);
  EXPECT_GT(next->low, highest)
      << "the first range after the crash, " << Describe(*next)
      << ", reaches into acknowledged numbers";
  return *next;
}

// Fails the test for every number two of `ranges` share, and for empty or
// non-positive ranges.
void ExpectDisjoint(std::vector<Range> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.low < b.low; });
  for (size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_GE(ranges[i].low, 1) << Describe(ranges[i]);
    EXPECT_LE(ranges[i].low, ranges[i].high) << Describe(ranges[i]);
    if (i > 0) {
      EXPECT_GT(ranges[i].low, ranges[i - 1].high)
          << "acknowledged ranges " << Describe(ranges[i - 1]) << " and "
          << Describe(ranges[i]) << " overlap";
    }
  }
}

// The child is killed while its store holds a transaction of kThreads - 1
// allocations open just before COMMIT, every earlier commit acknowledged.
// After recovery none of the open batch's writes shows: Max is exactly the
// highest acknowledged high, not lower (an acknowledged range lost) and not
// higher (part of an uncommitted transaction survived).
TEST(CrashRecoveryTest, KillBeforeCommitKeepsEveryAcknowledgedRangeAndNoMore) {
  TempDir dir;
  const std::string path = dir.File("hilo.db");
  std::vector<Range> acknowledged;
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(absl::StrFormat("round %d", round));
    const int64_t hold_after = 30 * (round + 1);
    Child child({.path = path, .hold_after_committed = hold_after});
    std::vector<Range> this_round;
    std::optional<Message> held;
    while (!held.has_value()) {
      std::optional<Message> m = child.Next();
      ASSERT_TRUE(m.has_value()) << "the child ended before it held a commit";
      ASSERT_NE(m->kind, Message::Kind::kFailed) << "an Allocate failed";
      if (m->kind == Message::Kind::kAcknowledged) {
        this_round.push_back(m->range);
      } else {
        held = m;
      }
    }
    EXPECT_EQ(held->held, kThreads - 1)
        << "operations in the transaction held open";
    EXPECT_GE(held->committed, hold_after);
    EXPECT_EQ(held->committed, static_cast<int64_t>(this_round.size()))
        << "every committed operation was acknowledged";
    child.Kill();
    EXPECT_TRUE(child.DrainAcknowledged().empty())
        << "ranges acknowledged after the commit was held";
    acknowledged.insert(acknowledged.end(), this_round.begin(),
                        this_round.end());
    std::optional<Range> next =
        CheckRestart(path, acknowledged, HighestHigh(acknowledged));
    ASSERT_TRUE(next.has_value());
    acknowledged.push_back(*next);
  }
  ExpectDisjoint(acknowledged);
}

// Rounds of load killed at arbitrary moments: while the child opens a new
// database, mid-batch, mid-COMMIT, between commits. With synchronous=NORMAL
// as with FULL: NORMAL may lose commits to a power loss, never to a crash
// of the process.
TEST(CrashRecoveryTest, KillUnderLoadNeverLosesNorReissuesAnAcknowledgedRange) {
  struct Round {
    int kill_after;  // acknowledged ranges read before the kill
    SyncMode sync;
  };
  const Round rounds[] = {
      {0, SyncMode::kFull},     {1, SyncMode::kFull},
      {250, SyncMode::kFull},   {37, SyncMode::kNormal},
      {400, SyncMode::kNormal}, {3, SyncMode::kFull},
      {120, SyncMode::kNormal}, {300, SyncMode::kFull},
  };
  TempDir dir;
  const std::string path = dir.File("hilo.db");
  std::vector<Range> acknowledged;
  for (const Round& round : rounds) {
    SCOPED_TRACE(absl::StrFormat("kill after %d acknowledged, sync %s",
                                 round.kill_after, SyncModeName(round.sync)));
    Child child({.path = path, .sync = round.sync});
    for (int i = 0; i < round.kill_after; ++i) {
      std::optional<Message> m = child.Next();
      ASSERT_TRUE(m.has_value()) << "the child ended before the kill";
      ASSERT_EQ(m->kind, Message::Kind::kAcknowledged) << "an Allocate failed";
      acknowledged.push_back(m->range);
    }
    child.Kill();
    const std::vector<Range> rest = child.DrainAcknowledged();
    acknowledged.insert(acknowledged.end(), rest.begin(), rest.end());
    std::optional<Range> next =
        CheckRestart(path, acknowledged, /*exact_max=*/std::nullopt);
    ASSERT_TRUE(next.has_value());
    acknowledged.push_back(*next);
  }
  ExpectDisjoint(acknowledged);
}

// A NextRange of "orders" from a client that reports nothing earlier.
hilo::v1::NextRangeResponse NextOrders(int port) {
  auto stub = testing_util::NewStub(port);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  hilo::v1::NextRangeRequest request;
  request.set_collection(kCollection);
  hilo::v1::NextRangeResponse response;
  const grpc::Status status = stub->NextRange(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

// ReturnRange of (last, range.high()] of `range` on "orders".
hilo::v1::ReturnRangeResponse ReturnOrders(
    int port, const hilo::v1::NextRangeResponse& range, int64_t last) {
  auto stub = testing_util::NewStub(port);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  hilo::v1::ReturnRangeRequest request;
  request.set_collection(kCollection);
  request.set_end(range.high());
  request.set_last(last);
  request.set_node_tag(range.node_tag());
  request.set_range_token(range.range_token());
  hilo::v1::ReturnRangeResponse response;
  const grpc::Status status = stub->ReturnRange(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

// A client used numbers up to 40 of 33-64 and handed the rest back; the
// server applied it and replied, and is killed -9 at once. The return was
// durable before the reply: the restarted server starts the next range at
// 41, and the same return, sent again, is refused.
TEST(CrashRecoveryTest, AppliedReturnSurvivesKillOfTheServer) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(
      HILO_SERVER_PATH,
      {"--db=" + dir.File("hilo.db"), "--create_db", "--node_tag=A"});
  ASSERT_THAT(server, IsOk());
  const int port = (*server)->port();
  const hilo::v1::NextRangeResponse first = NextOrders(port);
  ASSERT_EQ(first.low(), 1);
  const hilo::v1::NextRangeResponse second = NextOrders(port);
  ASSERT_EQ(second.low(), first.high() + 1);
  const int64_t last = second.low() + 7;
  const hilo::v1::ReturnRangeResponse applied =
      ReturnOrders(port, second, last);
  ASSERT_TRUE(applied.applied());
  EXPECT_EQ(applied.max(), last);

  ASSERT_THAT((*server)->Kill(), IsOk());
  ASSERT_THAT((*server)->Restart(), IsOk());

  const hilo::v1::NextRangeResponse after = NextOrders((*server)->port());
  EXPECT_EQ(after.low(), last + 1);
  const hilo::v1::ReturnRangeResponse again =
      ReturnOrders((*server)->port(), second, last);
  EXPECT_FALSE(again.applied());
  EXPECT_EQ(again.max(), after.high());
}

}  // namespace
}  // namespace hilo
