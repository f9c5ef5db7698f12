#include "service/stop_signals.h"

#include <cerrno>
#include <csignal>
#include <ctime>

namespace hilo {

sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

int WaitForStopSignal(const sigset_t& signals, absl::Duration reload_interval,
                      absl::FunctionRef<void()> reload) {
  for (;;) {
    int signal_number = 0;
    if (reload_interval > absl::ZeroDuration()) {
      const timespec timeout = absl::ToTimespec(reload_interval);
      signal_number = sigtimedwait(&signals, nullptr, &timeout);
    } else {
      sigwait(&signals, &signal_number);
    }
    if (signal_number == SIGINT || signal_number == SIGTERM) {
      return signal_number;
    }
    if (signal_number < 0 && errno != EAGAIN) continue;  // EINTR
    reload();
  }
}

}  // namespace hilo
