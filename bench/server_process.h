// ServerProcess: a hilo_server child process for the load tool, so the
// server's CPU, threads and memory are its own and can be read apart from the
// load generator's.
//
//   absl::StatusOr<std::unique_ptr<ServerProcess>> server =
//       ServerProcess::Start("/path/hilo_server",
//                            {"--listen=127.0.0.1:0", "--db=/tmp/x/h.db"});
//   int port = (*server)->port();
//
// The child gets SIGTERM if this process dies, so a crashed or killed
// benchmark never leaves a server behind. Not thread-safe.
#ifndef HILO_BENCH_SERVER_PROCESS_H_
#define HILO_BENCH_SERVER_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hilo::bench {

class ServerProcess {
 public:
  // Runs `path` with `args` and waits up to `timeout` for its start-up line
  // ("hilo_server: serving node ... on port N ..."). UNAVAILABLE, carrying
  // what the server printed, if it exits or stays silent instead.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::string& path, const std::vector<std::string>& args,
      absl::Duration timeout = absl::Seconds(20));

  // Stop(), if not stopped yet.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }

  // Resident set size now, and its peak, from /proc/<pid>/status; -1 if it
  // cannot be read.
  int64_t RssBytes() const;
  int64_t PeakRssBytes() const;

  // CPU time (user + system) the server has used so far, in seconds; -1 if
  // it cannot be read.
  double CpuSeconds() const;

  // SIGTERM, then waits up to 20 s for a clean exit (SIGKILL after that).
  // FAILED_PRECONDITION if the server did not exit 0.
  absl::Status Stop();

 private:
  ServerProcess(pid_t pid, int stderr_fd) : pid_(pid), stderr_fd_(stderr_fd) {}
  // Keeps reading the child's stderr so it never blocks on a full pipe;
  // lines after start-up are echoed with a prefix.
  void DrainStderr();

  pid_t pid_;
  int stderr_fd_;
  int port_ = 0;
  bool stopped_ = false;
  std::thread drain_;
};

}  // namespace hilo::bench

#endif  // HILO_BENCH_SERVER_PROCESS_H_
