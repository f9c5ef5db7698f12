#include "bench/bench_run.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace hilo::bench {

BenchRun::BenchRun(BenchOptions options, std::string dir)
    : options_(std::move(options)), dir_(std::move(dir)) {}

absl::StatusOr<std::unique_ptr<ServerProcess>> BenchRun::StartServer(
    const std::string& name, std::vector<std::string> extra_flags) {
  std::vector<std::string> args = {
      "--listen=127.0.0.1:0",
      absl::StrCat("--db=", dir_, "/", name, "/hilo.db"),
      "--metrics_listen=127.0.0.1:0"};
  args.insert(args.end(), extra_flags.begin(), extra_flags.end());
  args.insert(args.end(), options_.server_flags.begin(),
              options_.server_flags.end());
  // A new SQLite file needs --create_db; a server on a shared store
  // (--store) has no file and refuses the flag.
  if (std::none_of(args.begin(), args.end(), [](const std::string& a) {
        return absl::StartsWith(a, "--store=");
      })) {
    args.push_back("--create_db");
  }
  absl::FPrintF(stderr, "hilo_bench: starting %s %s\n", options_.server,
                absl::StrJoin(args, " "));
  ServerProcess::Options options;
  options.echo_stderr = true;
  return ServerProcess::Start(options_.server, args, options);
}

void BenchRun::Check(const std::string& what, int64_t errors,
                     const std::string& first_error) {
  if (errors == 0) return;
  failures_ += errors;
  absl::FPrintF(stderr, "hilo_bench: %s: %d calls failed; first: %s\n", what,
                errors, first_error);
}

absl::Status StopServer(ServerProcess& server) {
  const pid_t pid = server.pid();
  absl::StatusOr<int> code = server.Terminate(absl::Seconds(20));
  if (!code.ok()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "hilo_server (pid %d): %s", pid, code.status().message()));
  }
  if (*code != 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("hilo_server (pid %d) ended with exit %d", pid, *code));
  }
  return absl::OkStatus();
}

}  // namespace hilo::bench
