// FaultInjector: the faults hilo_stress injects into started nodes while
// the load runs, each checked as it happens:
//   - Kill: kill -9 and a restart on the same database and port; while the
//     node is down its stored Max is read from its file (through the store,
//     read-only), after the restart through ListCollections, and both must
//     be at least every number the node replied with before the kill;
//   - Pause: SIGSTOP for options.pause_for, then SIGCONT;
//   - Fill: fills the filesystem of the nodes' databases; while it is full,
//     NextRange may only refuse (RESOURCE_EXHAUSTED or UNAVAILABLE) and a
//     refusal changes nothing, reads and health keep working; once space is
//     back, allocation resumes right above the last range;
//   - RestartStore: runs options.store_restart_command.
// What goes wrong goes to the Report as a problem.
//
//   FaultInjector faults(options, db_dir, &report, used_ranges_by_worker);
//   faults.Kill(node);
//
// Not thread-safe: the orchestrator's one thread drives it.
#ifndef HILO_STRESS_FAULTS_H_
#define HILO_STRESS_FAULTS_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "stress/node.h"
#include "stress/range_log.h"
#include "stress/report.h"
#include "stress/stress_options.h"

namespace hilo::stress {

class FaultInjector {
 public:
  // Every worker's used ranges logged so far (each under its counter), one
  // list per worker in the order of its log.
  using UsedRangesByWorker =
      std::function<std::vector<std::vector<UsedRange>>()>;

  // `db_dir` holds the nodes' databases (Fill fills its filesystem).
  FaultInjector(const StressOptions& options, std::string db_dir,
                Report* report, UsedRangesByWorker used_ranges_by_worker);

  void Kill(Node& node);
  void Pause(Node& node);
  void Fill(Node& node);
  void RestartStore();

  int kills() const { return kills_; }
  int pauses() const { return pauses_; }
  int fills() const { return fills_; }
  int store_restarts() const { return store_restarts_; }
  // Stored Max values checked against a floor.
  int stored_max_checks() const { return stored_max_checks_; }
  // Kills after which stored Max was checked both in the file (or with a
  // shared store, not at all while down) and through the restarted node.
  int kills_checked() const { return kills_checked_; }

 private:
  // Fill's steps: writes `fill_path` until the filesystem is full (false,
  // with the problem reported, if it cannot be filled); then, while full,
  // a new collection, the `probe` collection (Max known_max) and the reads
  // and health, each call judged and its problems reported; then, once
  // freed, the probe's next range right above known_max.
  bool FillFilesystem(const std::string& fill_path);
  void CheckWhileFull(Node& node, const std::string& probe, int64_t* known_max);
  grpc::Status CheckNewCollectionWhileFull(Node& node, const std::string& name);
  grpc::Status CheckProbeWhileFull(Node& node, const std::string& probe,
                                   int64_t* known_max);
  // Whether health said SERVING (ListCollections and health must answer).
  bool CheckReadsWhileFull(Node& node);
  void CheckAfterFreeing(Node& node, const std::string& probe,
                         int64_t known_max);

  // CheckStoredMax for `node`, its problems reported; how many it checked.
  int CheckStoredMaxOf(const Node& node,
                       const std::map<std::string, int64_t>& stored_max,
                       const std::map<CollectionAndTag, int64_t>& floors,
                       absl::string_view when);

  const StressOptions& options_;
  const std::string db_dir_;
  Report* const report_;
  const UsedRangesByWorker used_ranges_by_worker_;
  int kills_ = 0;
  int pauses_ = 0;
  int fills_ = 0;
  int store_restarts_ = 0;
  int stored_max_checks_ = 0;
  int kills_checked_ = 0;
};

}  // namespace hilo::stress

#endif  // HILO_STRESS_FAULTS_H_
