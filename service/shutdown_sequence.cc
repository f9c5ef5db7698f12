#include "service/shutdown_sequence.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/store/postgres/postgres_range_store.h"

namespace hilo {
namespace {

class ServerNode final : public StoppableNode {
 public:
  explicit ServerNode(Server* server) : server_(server) {}
  void StartDraining() override { server_->StartDraining(); }
  void Shutdown(absl::Duration grace) override { server_->Shutdown(grace); }
  void EndCalls() override { server_->EndCalls(); }
  void CloseStore() override { server_->CloseStore(); }
  int64_t calls_in_services() const override {
    return server_->calls_in_services();
  }

 private:
  Server* const server_;
};

class RealTimeTimer final : public ShutdownTimer {
 public:
  bool Wait(base::Mutex& mu, absl::FunctionRef<bool()> until,
            absl::Duration timeout) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return mu.AwaitWithTimeout(until, timeout);
  }
};

}  // namespace

std::unique_ptr<StoppableNode> StoppableServer(Server* server) {
  return std::make_unique<ServerNode>(server);
}

std::string ShutdownStoreName(const ServerOptions& options,
                              absl::string_view database_path) {
  if (options.postgres_uri.empty()) {
    return absl::StrCat("SQLite database ", database_path);
  }
  return absl::StrCat(
      "PostgreSQL ",
      DescribePostgresConnection(options.postgres_uri).value_or("database"));
}

ShutdownTimer& RealTimeShutdownTimer() {
  static RealTimeTimer* const timer = new RealTimeTimer();
  return *timer;
}

ShutdownSequence::ShutdownSequence(StoppableNode* node, Times times,
                                   ExitFunction exit, ShutdownTimer& timer)
    : node_(node),
      times_(std::move(times)),
      exit_(std::move(exit)),
      timer_(timer) {}

ShutdownSequence::~ShutdownSequence() {
  {
    base::MutexLock lock(&mu_);
    destroying_ = true;
  }
  if (watchdog_.joinable()) watchdog_.join();
  if (stopper_.joinable()) stopper_.join();
}

absl::Duration ShutdownSequence::watchdog_limit() const {
  return times_.drain_delay + times_.grace + absl::Seconds(1);
}

std::string ShutdownSequence::Run() {
  watchdog_ = std::thread([this] { Watch(); });
  node_->StartDraining();
  {
    base::MutexLock lock(&mu_);
    timer_.Wait(
        mu_, [] { return false; }, times_.drain_delay);
  }
  stopper_ = std::thread([this] {
    node_->Shutdown(times_.grace);
    base::MutexLock lock(&mu_);
    node_stopped_ = true;
  });
  {
    base::MutexLock lock(&mu_);
    if (timer_.Wait(
            mu_,
            [this]()
                ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return node_stopped_; },
            times_.grace + kGrpcTeardownWait)) {
      return "hilo_server: stopped";
    }
  }
  node_->EndCalls();
  {
    base::MutexLock lock(&mu_);
    step_ = Step::kClosingStore;
  }
  node_->CloseStore();
  return absl::StrFormat(
      "hilo_server: stopped (gRPC was still tearing down the calls it "
      "cancelled %s after --shutdown_grace; no call was left in the store, "
      "and it is closed)",
      absl::FormatDuration(kGrpcTeardownWait));
}

void ShutdownSequence::Watch() {
  std::string line;
  {
    base::MutexLock lock(&mu_);
    if (timer_.Wait(
            mu_,
            [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return destroying_; },
            watchdog_limit())) {
      return;
    }
    line = WatchdogLine();
  }
  exit_(kExitShutdownOverran, std::move(line));
}

std::string ShutdownSequence::WatchdogLine() {
  std::string what;
  if (step_ == Step::kClosingStore) {
    what = absl::StrFormat(
        "closing the store (%s) has not finished, every call had ended "
        "and what they committed is durable",
        times_.store);
  } else {
    const int64_t calls = node_->calls_in_services();
    what = absl::StrFormat(
        "%d call%s still wait%s for the store (%s), a commit that has not "
        "returned; no answer is sent",
        calls, calls == 1 ? "" : "s", calls == 1 ? "s" : "", times_.store);
  }
  return absl::StrFormat(
      "hilo_server: shutdown did not finish within --drain_delay + "
      "--shutdown_grace + 1s (%s): %s; exiting with status %d",
      absl::FormatDuration(watchdog_limit()), what, kExitShutdownOverran);
}

}  // namespace hilo
