// Orchestrator: one hilo_stress run. It makes the work directory, starts
// the nodes (with options.server) and the worker processes, injects the
// faults asked for (FaultInjector) spread over the middle of the run,
// stops the workers, then checks everything they recorded (checks.h,
// range_log.h) and what the nodes stored, stops the nodes with SIGTERM
// (each must exit 0), and prints one summary line:
//
//   hilo_stress: PASS ids=1234567 duplicates=0 outside_ranges=0 ...
//
//   StressOptions options = ...;  // ValidateStressOptions(options).ok()
//   return Orchestrator(options).Run();
//
// Not thread-safe: Run drives everything from the calling thread, which
// must live as long as the nodes it starts (see ServerProcess).
#ifndef HILO_STRESS_ORCHESTRATOR_H_
#define HILO_STRESS_ORCHESTRATOR_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "stress/code_counts.h"
#include "stress/faults.h"
#include "stress/node.h"
#include "stress/range_log.h"
#include "stress/report.h"
#include "stress/stress_options.h"

namespace hilo::stress {

class Orchestrator {
 public:
  explicit Orchestrator(StressOptions options);

  // The process's exit code: 0 if every check held, 1 if one did not, 2 if
  // the run could not start.
  int Run();

 private:
  absl::Status Setup();
  absl::Status StartNodes();
  absl::Status StartWorkers();
  // Sleeps until `when`, failing if a worker dies meanwhile.
  void WaitUntil(absl::Time when);
  // Faults in turn, spread over the middle of the run.
  void InjectFaults();
  void StopWorkers();
  // The checks at the end, their problems reported, and the summary line.
  void CheckEverything();
  // What the workers recorded, added up: IDs (none twice, within a worker
  // or across workers), and the codes of their calls.
  struct IdTotals {
    int64_t ids = 0;
    int64_t duplicates = 0;
    int64_t outside = 0;
    int64_t return_failures = 0;
    CodeCounts errors;
    CodeCounts rpc_next;
    CodeCounts rpc_return;
    std::map<std::string, int64_t> ids_by_tag;
  };
  IdTotals CheckIds();
  // Every range came with a token, and every return carried its own.
  void CheckTokens();
  // The ranges replied: none overlaps another of its node, each below what
  // the node stored.
  struct RangeTotals {
    size_t used = 0;
    size_t overlaps = 0;
    int stored_max_checks = 0;
  };
  RangeTotals CheckRanges();
  // SIGTERM to each node, which must exit 0.
  void StopNodes();
  // Used ranges of every worker's log so far, one list per worker, each in
  // the order of its log and under its counter.
  std::vector<std::vector<UsedRange>> UsedRangesByWorker();

  const StressOptions options_;
  Report report_;
  std::string work_dir_;
  bool remove_work_dir_ = false;
  std::string db_dir_;
  std::vector<std::string> targets_;
  std::vector<Node> nodes_;
  std::vector<pid_t> workers_;
  std::unique_ptr<FaultInjector> faults_;
  absl::Time start_;
  absl::Time last_fault_end_ = absl::InfinitePast();
};

}  // namespace hilo::stress

#endif  // HILO_STRESS_ORCHESTRATOR_H_
