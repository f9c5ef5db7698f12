// BenchRun: what hilo_bench's sections share: the options, the scratch
// directory every database goes into, the servers they start and stop,
// the failed calls, and the Markdown and plot data written so far.
//
//   BenchRun run(options, "/tmp/hilo_bench.X");
//   absl::StatusOr<std::unique_ptr<ServerProcess>> server =
//       run.StartServer("default", {});
//   run.Check("NextRange", result.errors, result.first_error);
//   absl::Status s = StopServer(**server);
//
// Servers are hilo::testing's ServerProcess on 127.0.0.1:0 with metrics on
// 127.0.0.1:0 and their stderr echoed. Not thread-safe: one thread runs
// the sections.
#ifndef HILO_BENCH_BENCH_RUN_H_
#define HILO_BENCH_BENCH_RUN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/bench_options.h"
#include "testing/server_process.h"

namespace hilo::bench {

using ::hilo::testing_util::ServerProcess;

class BenchRun {
 public:
  BenchRun(BenchOptions options, std::string dir);

  const BenchOptions& options() const { return options_; }
  const std::string& dir() const { return dir_; }

  // Starts options().server with a new database at <dir>/<name>/hilo.db
  // (--create_db), `extra_flags`, then options().server_flags.
  // ServerProcess::Start's errors.
  absl::StatusOr<std::unique_ptr<ServerProcess>> StartServer(
      const std::string& name, std::vector<std::string> extra_flags);

  // Notes `errors` failed calls of `what` (the first of them
  // `first_error`); any fails the run.
  void Check(const std::string& what, int64_t errors,
             const std::string& first_error);
  int64_t failures() const { return failures_; }

  // The Markdown tables, and the throughput series for the plot (TSV).
  std::string& markdown() { return md_; }
  std::string& data() { return data_; }

 private:
  const BenchOptions options_;
  const std::string dir_;
  std::string md_;
  std::string data_;
  int64_t failures_ = 0;
};

// SIGTERM, then up to 20 s for a clean exit (SIGKILL after that).
// FAILED_PRECONDITION if the server did not exit 0.
absl::Status StopServer(ServerProcess& server);

}  // namespace hilo::bench

#endif  // HILO_BENCH_BENCH_RUN_H_
