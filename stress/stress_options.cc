#include "stress/stress_options.h"

namespace hilo::stress {

absl::Status ValidateStressOptions(const StressOptions& options) {
  if (options.store_restarts > 0 &&
      (options.store.empty() || options.store_restart_command.empty())) {
    return absl::InvalidArgumentError(
        "--store_restarts needs --store and --store_restart_command");
  }
  if (options.shared_store() && options.fill) {
    return absl::InvalidArgumentError(
        "--fill fills the servers' own disk; with --store they have none");
  }
  if (options.server.empty()) {
    if (options.targets.empty()) {
      return absl::InvalidArgumentError(
          "give --server (start servers here) or --targets");
    }
    if (options.faults() || options.check_no_gaps) {
      return absl::InvalidArgumentError(
          "--kill9, --pause, --fill and --check_no_gaps need servers "
          "started here (--server)");
    }
  } else if (!options.targets.empty()) {
    return absl::InvalidArgumentError("give --server or --targets, not both");
  }
  if (options.processes < 1 || options.threads < 1 || options.collections < 1 ||
      options.nodes < 1 || options.nodes > 26) {
    return absl::InvalidArgumentError(
        "--processes, --threads and --collections must be at least 1, "
        "--nodes 1 to 26");
  }
  return absl::OkStatus();
}

}  // namespace hilo::stress
