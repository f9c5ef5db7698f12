// ServerProcess: a hilo_server child process that load and fault tests can
// kill, pause and restart.
//
//   absl::StatusOr<std::unique_ptr<ServerProcess>> server =
//       ServerProcess::Start("/path/hilo_server",
//                            {"--db=/tmp/x/h.db", "--node_tag=A"});
//   int port = (*server)->port();
//   (*server)->Kill();     // kill -9, reaped
//   (*server)->Restart();  // same flags, same database, same port
//
// Start adds --listen=127.0.0.1:0 and --metrics_listen= (no metrics) unless
// the flags carry their own, waits for the start-up line
// ("hilo_server: serving node A on port N (...)") and reads the port from
// it. A thread drains the child's stderr, so a chatty server never blocks on
// a full pipe; the lines are kept for error messages. The child gets SIGKILL
// if the thread that started it exits, so a crashed test leaves no server
// behind; start children from a thread that lives as long as they do.
//
// Not thread-safe: one thread drives a ServerProcess.
#ifndef HILO_STRESS_SERVER_PROCESS_H_
#define HILO_STRESS_SERVER_PROCESS_H_

#include <sys/types.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hilo::stress {

class ServerProcess {
 public:
  // Runs `binary` with `flags` and waits up to `timeout` for its start-up
  // line. UNAVAILABLE carrying what the server printed if it exits or stays
  // silent instead.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      std::string binary, std::vector<std::string> flags,
      absl::Duration timeout = absl::Seconds(20));

  // SIGKILLs the child if it still runs.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // The port of the start-up line; kept across restarts.
  int port() const { return port_; }
  // "127.0.0.1:<port>".
  std::string address() const;
  // The child's pid, or -1 when it is not running.
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  // kill -9 and reap. FAILED_PRECONDITION if not running.
  absl::Status Kill();
  // SIGSTOP / SIGCONT.
  absl::Status Pause();
  absl::Status Resume();
  // SIGTERM, then waits up to `timeout` for the exit; returns the exit code
  // (128 + signal if it died of one). DEADLINE_EXCEEDED (and SIGKILL) if it
  // does not exit in time.
  absl::StatusOr<int> Terminate(absl::Duration timeout = absl::Seconds(20));
  // Starts the stopped server again with the same flags on the same port.
  // A port still held by the kernel for a moment is retried until
  // `timeout`.
  absl::Status Restart(absl::Duration timeout = absl::Seconds(20));

  // Everything the current incarnation printed on stderr so far.
  std::string StderrText() const;

 private:
  ServerProcess(std::string binary, std::vector<std::string> flags);

  // Forks and execs with `flags_`, then waits for the start-up line.
  absl::Status Spawn(const std::vector<std::string>& flags,
                     absl::Duration timeout);
  // Reaps the child (blocking) and joins the stderr reader.
  int Reap();
  void ReadStderr(int fd);

  const std::string binary_;
  std::vector<std::string> flags_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::thread reader_;

  // Guards stderr_ and stderr_closed_, which the reader thread fills;
  // stderr_changed_ is notified after each change.
  mutable std::mutex mu_;
  std::condition_variable stderr_changed_;
  std::string stderr_;
  bool stderr_closed_ = false;
};

}  // namespace hilo::stress

#endif  // HILO_STRESS_SERVER_PROCESS_H_
