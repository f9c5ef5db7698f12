// StressOptions: everything a hilo_stress run is told, read from its flags
// once (hilo_stress.cc) and passed to the orchestrator and the workers.
// The flags' help says what each field does; the defaults here are theirs.
#ifndef HILO_STRESS_STRESS_OPTIONS_H_
#define HILO_STRESS_STRESS_OPTIONS_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hilo::stress {

struct StressOptions {
  // Where the load goes: running servers (targets), or servers started
  // here (server, nodes and what follows).
  std::vector<std::string> targets;
  std::string server;
  int nodes = 1;
  int64_t server_max_range_size = 4096;
  std::vector<std::string> server_args;
  // A PostgreSQL URI the started servers share; empty: a file each.
  std::string store;
  int store_restarts = 0;
  std::string store_restart_command;

  std::string work_dir;  // empty: a new directory under $TMPDIR
  std::string db_dir;    // empty: <work_dir>/db
  bool keep_work_dir = false;

  // The load.
  int processes = 2;
  int threads = 4;
  int collections = 3;
  absl::Duration duration = absl::Seconds(10);
  int64_t ids_per_thread = 0;
  absl::Duration rpc_deadline = absl::Seconds(2);
  int64_t return_every = 0;
  int64_t new_collection_every = 0;

  // The faults.
  int kill9 = 0;
  int pause = 0;
  absl::Duration pause_for = absl::Seconds(3);
  bool fill = false;
  absl::Duration fill_for = absl::Seconds(2);
  absl::Duration recovery = absl::Seconds(2);

  // The checks.
  std::set<int> allowed_errors;         // NextId codes that fail nothing
  std::vector<int> expected_rpc_codes;  // NextRange codes that must occur
  bool check_no_gaps = false;

  // The servers share one store, so numbers are counted with tags ignored.
  bool shared_store() const { return !store.empty(); }
  // Any fault is asked for.
  bool faults() const {
    return kill9 > 0 || pause > 0 || fill || store_restarts > 0;
  }
};

// INVALID_ARGUMENT, saying which, for flags that do not go together or are
// out of range (for the orchestrator; a worker is told only its part).
absl::Status ValidateStressOptions(const StressOptions& options);

}  // namespace hilo::stress

#endif  // HILO_STRESS_STRESS_OPTIONS_H_
