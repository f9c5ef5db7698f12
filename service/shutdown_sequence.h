// ShutdownSequence: how a node told to stop (SIGTERM or SIGINT) stops, and
// the watchdog that ends the process when the store keeps it from stopping.
//
// Run() reports NOT_SERVING for --drain_delay while the node still serves,
// then shuts the server down with --shutdown_grace for the calls in flight.
// gRPC cancels the calls left at the end of the grace and returns from its
// Shutdown once it has torn each of them down, which can take seconds (an
// HTTP/2 rapid reset of 30,000 streams took 9 s on a starved core) while no
// call is left in the store: half a second (kGrpcTeardownWait) past the
// grace, Run stops waiting for it, ends the calls still inside the services
// (those the store holds), closes the store, and returns.
//
// The watchdog bounds all of it: --drain_delay + --shutdown_grace + 1 s
// after Run began, if Run has not let the process end, it calls `exit` with
// kExitShutdownOverran and a line naming the store and what did not finish
// (the calls still waiting for a commit, or the store's close). A database
// that stops answering or a disk that stops writing never keeps the
// process past what its supervisor was promised.
//
//   hilo::ShutdownSequence shutdown(
//       node.get(), {drain_delay, grace, ShutdownStoreName(options, path)},
//       ExitSaying, hilo::RealTimeShutdownTimer());
//   ExitSaying(EXIT_SUCCESS, shutdown.Run());
//
// Every wait goes through a ShutdownTimer, which tests replace to move time
// by hand. Run is called once, from one thread; the watchdog runs on a
// thread of its own.
#ifndef HILO_SERVICE_SHUTDOWN_SEQUENCE_H_
#define HILO_SERVICE_SHUTDOWN_SEQUENCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hilo/base/mutex.h"
#include "service/server.h"
#include "service/server_options.h"

namespace hilo {

// The exit status when SIGTERM's shutdown overran its bound (calls or the
// store's close stuck on a database or disk that does not answer).
inline constexpr int kExitShutdownOverran = 5;

// How long past the grace Run waits for gRPC's Shutdown to return before
// it stops without it.
inline constexpr absl::Duration kGrpcTeardownWait = absl::Milliseconds(500);

// What of a node the shutdown drives: Server's methods of the same names
// (see server.h), or a test's stand-in.
class StoppableNode {
 public:
  virtual ~StoppableNode() = default;
  virtual void StartDraining() = 0;
  virtual void Shutdown(absl::Duration grace) = 0;
  virtual void EndCalls() = 0;
  virtual void CloseStore() = 0;
  virtual int64_t calls_in_services() const = 0;
};

// `server` as a StoppableNode; it must outlive what is returned.
std::unique_ptr<StoppableNode> StoppableServer(Server* server);

// The store, as the watchdog's line names it: "SQLite database PATH", or
// "PostgreSQL " and the connection without its password.
std::string ShutdownStoreName(const ServerOptions& options,
                              absl::string_view database_path);

// How the shutdown waits. Thread-safe.
class ShutdownTimer {
 public:
  virtual ~ShutdownTimer() = default;
  // With `mu` held: releases it until `until()` is true (returns true) or
  // `timeout` has passed (returns what `until()` then says), and holds it
  // again. `until` runs with `mu` held.
  virtual bool Wait(base::Mutex& mu, absl::FunctionRef<bool()> until,
                    absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;
};

// The timer of hilo_server: the monotonic clock (a condition variable's).
// A process-wide instance; never destroyed.
ShutdownTimer& RealTimeShutdownTimer();

class ShutdownSequence {
 public:
  struct Times {
    absl::Duration drain_delay;  // --drain_delay
    absl::Duration grace;        // --shutdown_grace
    std::string store;           // ShutdownStoreName
  };
  // Called once, by the watchdog, with kExitShutdownOverran and its line;
  // in hilo_server it ends the process and does not return.
  using ExitFunction = std::function<void(int code, std::string line)>;

  // `node` and `timer` must outlive this.
  ShutdownSequence(StoppableNode* node, Times times, ExitFunction exit,
                   ShutdownTimer& timer);
  // Stands the watchdog down and waits for the threads this started; the
  // one in the node's Shutdown as long as that takes. hilo_server ends the
  // process instead of destroying it.
  ~ShutdownSequence();
  ShutdownSequence(const ShutdownSequence&) = delete;
  ShutdownSequence& operator=(const ShutdownSequence&) = delete;

  // Starts the watchdog, drains, stops the node as the top of this file
  // says, and returns the line the process ends with: "hilo_server:
  // stopped", and why it did not wait for gRPC if it did not.
  std::string Run() ABSL_LOCKS_EXCLUDED(mu_);

  // The watchdog's bound: --drain_delay + --shutdown_grace + 1 s.
  absl::Duration watchdog_limit() const;

 private:
  // Where the shutdown is, for the watchdog's line: what did not finish.
  enum class Step { kCalls, kClosingStore };

  void Watch() ABSL_LOCKS_EXCLUDED(mu_);
  std::string WatchdogLine() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  StoppableNode* const node_;
  const Times times_;
  const ExitFunction exit_;
  ShutdownTimer& timer_;

  base::Mutex mu_;
  Step step_ ABSL_GUARDED_BY(mu_) = Step::kCalls;
  bool node_stopped_ ABSL_GUARDED_BY(mu_) = false;  // its Shutdown returned
  bool destroying_ ABSL_GUARDED_BY(mu_) = false;

  std::thread watchdog_;
  std::thread stopper_;  // in node_->Shutdown
};

}  // namespace hilo

#endif  // HILO_SERVICE_SHUTDOWN_SEQUENCE_H_
