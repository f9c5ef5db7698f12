// The files through which a hilo_stress worker tells the orchestrator what
// it saw, in the work directory: its range log (worker-N.log, lines of
// FormatEvent, written while it runs) and its result (worker-N.result,
// written once at the end, renamed into place whole).
//
//   WorkerResult r = ...;
//   absl::Status s = WriteWorkerResult(WorkerResultPath(dir, 0), r);
//   absl::StatusOr<WorkerResult> back = ReadWorkerResult(
//       WorkerResultPath(dir, 0));
#ifndef HILO_STRESS_WORKER_FILES_H_
#define HILO_STRESS_WORKER_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "stress/code_counts.h"
#include "stress/id_ledger.h"
#include "stress/range_log.h"

namespace hilo::stress {

std::string WorkerLogPath(const std::string& dir, int index);
std::string WorkerResultPath(const std::string& dir, int index);

// What one worker saw.
struct WorkerResult {
  int64_t ids = 0;         // IDs it was handed
  int64_t duplicates = 0;  // of them, numbers it had been handed before
  int64_t outside = 0;     // numbers outside every range its client got
  std::vector<std::string> examples;  // descriptions of those
  CodeCounts errors;                  // NextId failures by code
  CodeCounts rpc_next;                // NextRange calls by code
  CodeCounts rpc_return;              // ReturnRange calls by code
  int64_t return_failures = 0;        // returns the client logged as failed
  absl::Time last_ok = absl::InfinitePast();  // its latest ID
  std::string last_error;           // its latest NextId error, with its time
  std::vector<IdLedger::Run> runs;  // every ID
};

// Writes `result` to `path` (through a temporary file renamed into
// place). UNAVAILABLE if it cannot.
absl::Status WriteWorkerResult(const std::string& path,
                               const WorkerResult& result);

// NOT_FOUND if there is no result at `path` (the worker did not finish).
absl::StatusOr<WorkerResult> ReadWorkerResult(const std::string& path);

// Every complete line of a worker log, parsed; lines that are not events
// are described in `problems`. A last line without its newline is still
// being written and is left out.
std::vector<RangeEvent> ReadWorkerLog(const std::string& path,
                                      std::vector<std::string>* problems);

}  // namespace hilo::stress

#endif  // HILO_STRESS_WORKER_FILES_H_
