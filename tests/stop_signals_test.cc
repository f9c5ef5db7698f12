// Stop signals: which signal ends the wait and when the policy is reloaded,
// with the signals sent to the waiting thread itself (pending while
// blocked, so sigwait takes them in order: no sleep, no other thread sees
// them).
#include "service/stop_signals.h"

#include <pthread.h>

#include <csignal>
#include <thread>

#include "gtest/gtest.h"

namespace hilo {
namespace {

struct Waited {
  int signal_number = 0;
  int reloads = 0;
};

// On a thread of its own (blocking is per thread): blocks the stop
// signals, sends itself `pending`, and waits as hilo_server's main does;
// `on_reload` runs at each reload.
template <typename OnReload>
Waited WaitOnOwnThread(std::initializer_list<int> pending,
                       absl::Duration reload_interval, OnReload on_reload) {
  Waited waited;
  std::thread([&] {
    const sigset_t signals = BlockStopSignals();
    for (int signal_number : pending)
      pthread_kill(pthread_self(), signal_number);
    waited.signal_number = WaitForStopSignal(signals, reload_interval, [&] {
      ++waited.reloads;
      on_reload();
    });
  }).join();
  return waited;
}

TEST(StopSignalsTest, SigtermEndsTheWaitAndSighupReloadsFirst) {
  const Waited waited =
      WaitOnOwnThread({SIGHUP, SIGTERM}, absl::ZeroDuration(), [] {});
  EXPECT_EQ(waited.signal_number, SIGTERM);
  EXPECT_EQ(waited.reloads, 1);
}

TEST(StopSignalsTest, SigintEndsTheWaitWithoutAReload) {
  // A reload would be wrong; it sends SIGTERM so that the wait still ends.
  const Waited waited = WaitOnOwnThread(
      {SIGINT}, absl::Hours(1), [] { pthread_kill(pthread_self(), SIGTERM); });
  EXPECT_EQ(waited.signal_number, SIGINT);
  EXPECT_EQ(waited.reloads, 0);
}

TEST(StopSignalsTest, ReloadsWhenTheIntervalPassesWithoutASignal) {
  // Nothing pending: the (tiny) interval passes at once and reloads; the
  // third reload sends SIGTERM.
  int reloads = 0;
  const Waited waited = WaitOnOwnThread({}, absl::Nanoseconds(1), [&] {
    if (++reloads == 3) pthread_kill(pthread_self(), SIGTERM);
  });
  EXPECT_EQ(waited.signal_number, SIGTERM);
  EXPECT_EQ(waited.reloads, 3);
}

}  // namespace
}  // namespace hilo
