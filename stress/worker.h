// The hilo_stress worker: one process, one hilo::Client shared by
// options.threads threads, each drawing IDs from options.collections
// collections of options.targets until SIGTERM (or options.ids_per_thread).
// Every ID goes into an IdLedger (a repeat is counted at once); a
// RangeRecorder logs every range the client was given and every return it
// sent to WorkerLogPath(options.work_dir, index). At the end the client
// hands its unused ranges back, the worker checks its IDs against its own
// ranges (FindIdsOutsideRanges) and writes its WorkerResult.
//
// The orchestrator runs it as `hilo_stress --worker=N ...` (see
// Orchestrator::StartWorkers).
#ifndef HILO_STRESS_WORKER_H_
#define HILO_STRESS_WORKER_H_

#include "stress/stress_options.h"

namespace hilo::stress {

// Runs worker `index`; returns the process's exit code: 0 once its result
// is written, 2 if it could not start or write it.
int RunWorker(const StressOptions& options, int index);

}  // namespace hilo::stress

#endif  // HILO_STRESS_WORKER_H_
