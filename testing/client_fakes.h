// Doubles for testing the C++ client in-process: FakeSource, a RangeSource
// over FakeNodes (the real service rules, no network) that can be paused,
// made to fail or to send wrong tokens; a Client built on it with a manual
// scheduler for its prefetch tasks and a log that records (MakeClient); and
// FinishesWithin, which turns a hang into a failure.
#ifndef HILO_TESTING_CLIENT_FAKES_H_
#define HILO_TESTING_CLIENT_FAKES_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client_cpp/src/client_testing.h"
#include "client_cpp/src/range_source.h"
#include "hilo/base/mutex.h"
#include "hilo/client.h"
#include "hilo/v1/hilo.pb.h"
#include "testing/fake_node.h"

namespace hilo {
namespace testing_util {

using ::hilo::internal::IssuedRange;
using ::hilo::internal::PreviousRange;
using ::hilo::internal::ReturnResult;
using ::testing::Return;

inline const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

// What a client reports after a range of `size` issued at `range_at`, up to
// `max`; it holds nothing (PreviousRange::held empty).
inline PreviousRange Previous(int64_t size, absl::Time range_at, int64_t max) {
  PreviousRange previous;
  previous.size = size;
  previous.range_at = range_at;
  previous.max = max;
  return previous;
}

// A RangeSource over FakeNodes, as GrpcRangeSource is over servers: each
// range comes from the next node in turn (so its tag too), and its return
// goes to the node that issued it. Can be paused, made to fail, and made to
// send wrong tokens. Thread-safe.
class FakeSource final : public internal::RangeSource {
 public:
  struct ReturnCall {
    std::string collection;
    int64_t low, high, last;
    std::string tag;
    bool applied;
    int64_t max;
  };

  // Nodes of its own, one per tag.
  explicit FakeSource(int64_t size, std::vector<std::string> tags = {"A"}) {
    for (std::string& tag : tags) {
      nodes_.push_back(std::make_shared<FakeNode>(std::move(tag), size));
    }
  }
  // Nodes shared with other sources (other clients of the same servers).
  explicit FakeSource(std::vector<std::shared_ptr<FakeNode>> nodes)
      : nodes_(std::move(nodes)) {}

  absl::StatusOr<IssuedRange> Next(absl::string_view collection,
                                   const PreviousRange& previous) override {
    base::MutexLock lock(&mu_);
    ++in_flight_;
    ++calls_;
    previous_.push_back(previous);
    mu_.Await([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !paused_; });
    --in_flight_;
    if (!fail_with_.ok()) return fail_with_;
    const size_t index = (calls_ - 1) % nodes_.size();
    FakeNode& node = *nodes_[index];
    node.SetTime(kT0 + absl::Seconds(calls_));
    hilo::v1::NextRangeResponse response;
    if (absl::Status s = node.service().DoNextRange(
            internal::MakeNextRangeRequest(collection, previous), &response);
        !s.ok()) {
      return s;
    }
    const IssuedRange range = internal::ToIssuedRange(response, index);
    issued_.push_back(range);
    issued_collections_.emplace_back(collection);
    return range;
  }

  absl::StatusOr<ReturnResult> Return(absl::string_view collection,
                                      const IssuedRange& range,
                                      int64_t last) override {
    base::MutexLock lock(&mu_);
    hilo::v1::ReturnRangeRequest request;
    request.set_collection(std::string(collection));
    request.set_end(range.high);
    request.set_last(last);
    request.set_node_tag(range.node_tag);
    uint64_t token = range.token;
    if (wrong_tokens_) token = token + 1 != 0 ? token + 1 : 1;  // not 0
    request.set_range_token(token);
    hilo::v1::ReturnRangeResponse response;
    const absl::Status s =
        nodes_[range.source]->service().DoReturnRange(request, &response);
    if (!s.ok()) return s;
    returns_.push_back({std::string(collection), range.low, range.high, last,
                        range.node_tag, response.applied(), response.max()});
    if (return_log_ != nullptr) {
      return_log_->push_back(absl::StrFormat(
          "%s %d-%d last %d %s %s", collection, range.low, range.high, last,
          range.node_tag, response.applied() ? "applied" : "refused"));
    }
    return ReturnResult{response.applied(), response.max()};
  }

  std::string Describe() const override { return "fake"; }

  std::shared_ptr<FakeNode> node(size_t i = 0) const { return nodes_[i]; }
  // Also records returns in `log`, which may outlive the source.
  void set_return_log(std::shared_ptr<std::vector<std::string>> log) {
    base::MutexLock lock(&mu_);
    return_log_ = std::move(log);
  }
  void SendWrongTokens() {
    base::MutexLock lock(&mu_);
    wrong_tokens_ = true;
  }
  void Pause() {
    base::MutexLock lock(&mu_);
    paused_ = true;
  }
  void Resume() {
    base::MutexLock lock(&mu_);
    paused_ = false;
  }
  void WaitForInFlight(int n) {
    base::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return in_flight_ >= n;
    };
    mu_.Await(enough);
  }
  void FailWith(absl::Status status) {
    base::MutexLock lock(&mu_);
    fail_with_ = std::move(status);
  }
  int calls() {
    base::MutexLock lock(&mu_);
    return calls_;
  }
  std::vector<PreviousRange> previous() {
    base::MutexLock lock(&mu_);
    return previous_;
  }
  std::vector<IssuedRange> issued() {
    base::MutexLock lock(&mu_);
    return issued_;
  }
  // The ranges issued for one collection (each node counts per collection).
  std::vector<IssuedRange> IssuedFor(absl::string_view collection) {
    base::MutexLock lock(&mu_);
    std::vector<IssuedRange> ranges;
    for (size_t i = 0; i < issued_.size(); ++i) {
      if (issued_collections_[i] == collection) ranges.push_back(issued_[i]);
    }
    return ranges;
  }
  std::vector<ReturnCall> returns() {
    base::MutexLock lock(&mu_);
    return returns_;
  }

 private:
  std::vector<std::shared_ptr<FakeNode>> nodes_;  // set once
  base::Mutex mu_;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool wrong_tokens_ ABSL_GUARDED_BY(mu_) = false;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status fail_with_ ABSL_GUARDED_BY(mu_);
  std::vector<PreviousRange> previous_ ABSL_GUARDED_BY(mu_);
  std::vector<IssuedRange> issued_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> issued_collections_ ABSL_GUARDED_BY(mu_);
  std::vector<ReturnCall> returns_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<std::vector<std::string>> return_log_ ABSL_GUARDED_BY(mu_);
};

// Holds prefetch tasks until the test runs them.
class ManualScheduler {
 public:
  void Schedule(std::function<void()> task) {
    base::MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
  }
  // Runs the queued tasks on this thread; returns how many ran.
  int RunAll() {
    std::vector<std::function<void()>> tasks;
    {
      base::MutexLock lock(&mu_);
      tasks.swap(tasks_);
    }
    for (auto& task : tasks) task();
    return static_cast<int>(tasks.size());
  }

 private:
  base::Mutex mu_;
  std::vector<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
};

// Lines a client logged. Thread-safe.
class LogLines {
 public:
  void Add(absl::string_view line) {
    base::MutexLock lock(&mu_);
    lines_.emplace_back(line);
  }
  std::vector<std::string> lines() {
    base::MutexLock lock(&mu_);
    return lines_;
  }

 private:
  base::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

struct TestClient {
  FakeSource* source;
  std::unique_ptr<Client> client;
  std::shared_ptr<ManualScheduler> scheduler;
  std::shared_ptr<LogLines> log;
};

inline TestClient MakeClient(std::unique_ptr<FakeSource> source,
                             char separator = '/', double prefetch_at = 0) {
  FakeSource* raw = source.get();
  auto log = std::make_shared<LogLines>();
  ClientOptions options;
  options.separator = separator;
  options.prefetch_at = prefetch_at;
  options.log = [log](absl::string_view line) { log->Add(line); };
  auto scheduler = std::make_shared<ManualScheduler>();
  auto schedule = [scheduler](std::function<void()> task) {
    scheduler->Schedule(std::move(task));
  };
  return {raw,
          NewClientForTesting(std::move(options), std::move(source), schedule),
          scheduler, log};
}

inline TestClient MakeClient(int64_t size,
                             std::vector<std::string> tags = {"A"},
                             char separator = '/', double prefetch_at = 0) {
  return MakeClient(std::make_unique<FakeSource>(size, std::move(tags)),
                    separator, prefetch_at);
}

// Runs `draw` on a thread of its own and waits up to `limit` for it. On
// time-out the test fails and the thread is left behind (it owns what it
// uses), so a hang shows as a failure, not as a test that never ends.
inline bool FinishesWithin(absl::Duration limit, std::function<void()> draw) {
  struct Done {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto done = std::make_shared<Done>();
  std::thread thread([done, draw = std::move(draw)] {
    draw();
    std::lock_guard<std::mutex> lock(done->mu);
    done->done = true;
    done->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(done->mu);
  const bool finished = done->cv.wait_for(
      lock, absl::ToChronoMilliseconds(limit), [&] { return done->done; });
  lock.unlock();
  if (finished) {
    thread.join();
  } else {
    thread.detach();
  }
  return finished;
}

}  // namespace testing_util
}  // namespace hilo

#endif  // HILO_TESTING_CLIENT_FAKES_H_
