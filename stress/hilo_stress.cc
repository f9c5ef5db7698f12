// hilo_stress: load and faults against hilo servers, with every ID checked.
//
// P worker processes (--processes), each one hilo::Client shared by T
// threads (--threads) drawing IDs from C collections (--collections), run
// against servers given by --targets or started here (--server, --nodes).
// Each worker keeps every ID it was handed (IdLedger), and a global gRPC
// interceptor logs every range a server replied with and every return it
// sent (RangeRecorder). At the end the orchestrator checks:
//   - no (collection, number, node tag) was handed out twice, in one worker
//     or across workers;
//   - every ID lies in a range its own client was given (and below the
//     `last` of any return it sent for that range);
//   - every range came with a range_token, and every return carried the
//     token of the range it hands back;
//   - ranges one node replied with for one collection never overlap;
//   - each node's stored Max is at least every number it replied with and
//     still counts as handed out;
//   - NextId failed only with the codes of --allow_errors, and every worker
//     took IDs again after the last fault.
// With servers started here it can also inject faults while the load runs:
// --kill9 (kill -9 and restart on the same database and port; the stored
// Max is read from the file while the node is down, and again through the
// admin RPC after the restart), --pause (SIGSTOP for --pause_for, then
// SIGCONT) and --fill (fill the filesystem of --db_dir, probe the node
// while it is full, free the space, and check that allocation resumes with
// no number lost). With --store the started servers share one PostgreSQL
// database: then every node draws from the same counter, so the checks
// above hold across nodes with tags ignored, and --store_restarts runs
// --store_restart_command (say, an immediate stop and start of the
// database) during the load. It prints one summary line and exits 0 only if
// every check held:
//
//   hilo_stress: PASS ids=1234567 duplicates=0 outside_ranges=0 ...
//
// Short form (seconds):  hilo_stress --server=build/service/hilo_server
//
// This file is the shell: the flags, read once into StressOptions. The
// run is Orchestrator (orchestrator.h), the faults FaultInjector
// (faults.h), each worker process RunWorker (worker.h), the end-of-run
// checks checks.h and range_log.h.
#include <signal.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "stress/code_counts.h"
#include "stress/orchestrator.h"
#include "stress/stress_options.h"
#include "stress/worker.h"

ABSL_FLAG(std::string, targets, "",
          "comma-separated addresses of running hilo servers; every worker's "
          "client gets all of them, in order (faults need --server instead)");
ABSL_FLAG(std::string, server, "",
          "path of hilo_server: start --nodes servers on 127.0.0.1:0 with "
          "their databases under --db_dir, and stop them at the end");
ABSL_FLAG(int, nodes, 1, "servers to start with --server (tags A, B, ...)");
ABSL_FLAG(int64_t, server_max_range_size, 4096,
          "--max_range_size of the started servers; small ranges make "
          "clients ask often (0: the server's default)");
ABSL_FLAG(std::string, server_args, "",
          "comma-separated extra flags for the started servers");
ABSL_FLAG(std::string, store, "",
          "a PostgreSQL URI the started servers share (--store of "
          "hilo_server) instead of a database file each; numbers are then "
          "checked per collection across nodes, tags ignored");
ABSL_FLAG(int, store_restarts, 0,
          "run --store_restart_command this many times during the load");
ABSL_FLAG(std::string, store_restart_command, "",
          "a shell command that stops and starts the shared database");
ABSL_FLAG(std::string, work_dir, "",
          "where workers write their logs and results; default a new "
          "directory under $TMPDIR, removed at the end");
ABSL_FLAG(std::string, db_dir, "",
          "where started servers keep their databases; default "
          "<work_dir>/db");
ABSL_FLAG(bool, keep_work_dir, false, "keep the work directory at the end");
ABSL_FLAG(int, processes, 2, "worker processes (one hilo::Client each)");
ABSL_FLAG(int, threads, 4, "threads per worker, sharing its client");
ABSL_FLAG(int, collections, 3, "collections each thread draws IDs from");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10),
          "how long the load runs (longer if faults need it)");
ABSL_FLAG(int64_t, ids_per_thread, 0,
          "stop a thread after this many IDs (0: run for --duration)");
ABSL_FLAG(absl::Duration, rpc_deadline, absl::Seconds(2),
          "the clients' deadline per RPC attempt");
ABSL_FLAG(int64_t, return_every, 0,
          "thread 0 of each worker hands unused ranges back after every this "
          "many of its IDs (0: only at the end)");
ABSL_FLAG(int64_t, new_collection_every, 0,
          "every this many draws of a thread go to a collection never used "
          "before, so the database keeps growing (0: never)");
ABSL_FLAG(int, kill9, 0,
          "kill -9 a started server this many times during the load and "
          "restart it on the same database and port");
ABSL_FLAG(int, pause, 0,
          "SIGSTOP a started server this many times during the load");
ABSL_FLAG(absl::Duration, pause_for, absl::Seconds(3),
          "how long each pause lasts; longer than --rpc_deadline makes "
          "clients hit their deadline");
ABSL_FLAG(bool, fill, false,
          "fill the filesystem of --db_dir during the load (it must be a "
          "small one, such as a tmpfs of a few MiB), then free it");
ABSL_FLAG(absl::Duration, fill_for, absl::Seconds(2),
          "how long the disk stays full after the node first refuses");
ABSL_FLAG(absl::Duration, recovery, absl::Seconds(2),
          "load that runs after the last fault; every worker must take IDs "
          "in it");
ABSL_FLAG(std::string, allow_errors, "",
          "comma-separated status codes NextId may return without failing "
          "the run, e.g. UNAVAILABLE,RESOURCE_EXHAUSTED");
ABSL_FLAG(std::string, expect_rpc_codes, "",
          "comma-separated status codes that NextRange calls must have met "
          "at least once, e.g. DEADLINE_EXCEEDED for a pause");
ABSL_FLAG(bool, check_no_gaps, false,
          "also require that the numbers below each stored Max were all "
          "given to some client (true with one node and no lost replies)");
ABSL_FLAG(int, worker, -1, "internal: run as worker N");

namespace hilo::stress {
namespace {

std::vector<std::string> SplitList(const std::string& text) {
  return absl::StrSplit(text, ',', absl::SkipWhitespace());
}

// Every flag but --worker, read once. INVALID_ARGUMENT for a status code
// name that is not one.
absl::StatusOr<StressOptions> OptionsFromFlags() {
  StressOptions o;
  o.targets = SplitList(absl::GetFlag(FLAGS_targets));
  o.server = absl::GetFlag(FLAGS_server);
  o.nodes = absl::GetFlag(FLAGS_nodes);
  o.server_max_range_size = absl::GetFlag(FLAGS_server_max_range_size);
  o.server_args = SplitList(absl::GetFlag(FLAGS_server_args));
  o.store = absl::GetFlag(FLAGS_store);
  o.store_restarts = absl::GetFlag(FLAGS_store_restarts);
  o.store_restart_command = absl::GetFlag(FLAGS_store_restart_command);
  o.work_dir = absl::GetFlag(FLAGS_work_dir);
  o.db_dir = absl::GetFlag(FLAGS_db_dir);
  o.keep_work_dir = absl::GetFlag(FLAGS_keep_work_dir);
  o.processes = absl::GetFlag(FLAGS_processes);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.collections = absl::GetFlag(FLAGS_collections);
  o.duration = absl::GetFlag(FLAGS_duration);
  o.ids_per_thread = absl::GetFlag(FLAGS_ids_per_thread);
  o.rpc_deadline = absl::GetFlag(FLAGS_rpc_deadline);
  o.return_every = absl::GetFlag(FLAGS_return_every);
  o.new_collection_every = absl::GetFlag(FLAGS_new_collection_every);
  o.kill9 = absl::GetFlag(FLAGS_kill9);
  o.pause = absl::GetFlag(FLAGS_pause);
  o.pause_for = absl::GetFlag(FLAGS_pause_for);
  o.fill = absl::GetFlag(FLAGS_fill);
  o.fill_for = absl::GetFlag(FLAGS_fill_for);
  o.recovery = absl::GetFlag(FLAGS_recovery);
  for (const std::string& name : SplitList(absl::GetFlag(FLAGS_allow_errors))) {
    absl::StatusOr<int> code = CodeOf(name);
    if (!code.ok()) return code.status();
    o.allowed_errors.insert(*code);
  }
  for (const std::string& name :
       SplitList(absl::GetFlag(FLAGS_expect_rpc_codes))) {
    absl::StatusOr<int> code = CodeOf(name);
    if (!code.ok()) return code.status();
    o.expected_rpc_codes.push_back(*code);
  }
  o.check_no_gaps = absl::GetFlag(FLAGS_check_no_gaps);
  return o;
}

}  // namespace
}  // namespace hilo::stress

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Load and faults against hilo servers, with every ID checked.\n"
      "Short form:  hilo_stress --server=PATH/hilo_server\n"
      "See docs/reliability.md for the long form and the fault flags.");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    absl::FPrintF(stderr, "hilo_stress: unexpected argument \"%s\"\n", rest[1]);
    return 2;
  }
  absl::StatusOr<hilo::stress::StressOptions> options =
      hilo::stress::OptionsFromFlags();
  if (!options.ok()) {
    absl::FPrintF(stderr, "hilo_stress: %s\n", options.status().message());
    return 2;
  }
  if (const int worker = absl::GetFlag(FLAGS_worker); worker >= 0) {
    return hilo::stress::RunWorker(*options, worker);
  }
  if (absl::Status s = hilo::stress::ValidateStressOptions(*options); !s.ok()) {
    absl::FPrintF(stderr, "hilo_stress: %s\n", s.message());
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  return hilo::stress::Orchestrator(*std::move(options)).Run();
}
