// Stop signals: how hilo_server learns it should stop or reload.
//
// SIGINT and SIGTERM stop the node (ShutdownSequence); SIGHUP reloads the
// authorization policy (AuthzReloader), as does every
// --authz_reload_interval. The three are blocked in every thread, so that
// no thread is interrupted by them, and the main thread takes them one at
// a time with sigwait:
//
//   const sigset_t signals = hilo::BlockStopSignals();  // before any thread
//   ...
//   const int stop = hilo::WaitForStopSignal(signals, interval, reload);
//
// Blocking is per thread and inherited by the threads a thread starts:
// call BlockStopSignals before the first thread of the process starts.
#ifndef HILO_SERVICE_STOP_SIGNALS_H_
#define HILO_SERVICE_STOP_SIGNALS_H_

#include <signal.h>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"

namespace hilo {

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread and returns them.
sigset_t BlockStopSignals();

// Waits for SIGINT or SIGTERM (blocked by BlockStopSignals) and returns
// it. Meanwhile calls `reload` on every SIGHUP and, when `reload_interval`
// is positive, whenever that long has passed without a signal.
int WaitForStopSignal(const sigset_t& signals, absl::Duration reload_interval,
                      absl::FunctionRef<void()> reload);

}  // namespace hilo

#endif  // HILO_SERVICE_STOP_SIGNALS_H_
