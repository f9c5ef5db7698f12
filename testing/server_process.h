// ServerProcess: a hilo_server child process that tests, hilo_stress and
// hilo_bench start, stop, kill, pause and restart.
//
//   absl::StatusOr<std::unique_ptr<ServerProcess>> server =
//       ServerProcess::Start("/path/hilo_server",
//                            {"--db=/tmp/x/h.db", "--create_db",
//                             "--node_tag=A"});
//   int port = (*server)->port();
//   (*server)->Kill();     // kill -9, reaped
//   (*server)->Restart();  // same flags (less --create_db), same database,
//                          // same port
//
// The flags get --listen=127.0.0.1:0 and --metrics_listen= (no metrics)
// unless they carry their own: never a fixed port, since tests run side by
// side. Start waits for the start-up line
// ("hilo_server: serving node A on port N (...)") and reads the port from
// it; Launch does not wait, for a server that is expected to refuse to
// start. A thread drains the child's stderr, so a chatty server never
// blocks on a full pipe; the text is kept (the start and the latest 1 MiB)
// for error messages and checks, and can also be echoed line by line.
//
// If the thread that started the child exits, the child gets SIGKILL
// (PR_SET_PDEATHSIG), so a crashed test or tool leaves no server behind.
// SIGKILL, not SIGTERM: a paused (SIGSTOPped) child never acts on a SIGTERM,
// and nobody is left to read a clean exit anyway. Start children from a
// thread that lives as long as they do.
//
// Not thread-safe: one thread drives a ServerProcess.
#ifndef HILO_TESTING_SERVER_PROCESS_H_
#define HILO_TESTING_SERVER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hilo/base/mutex.h"

namespace hilo::testing_util {

class ServerProcess {
 public:
  struct Options {
    // How long Start and Restart wait for the start-up line.
    absl::Duration start_timeout = absl::Seconds(20);
    // If true, each line the server prints after its start-up line also
    // goes to this process's stderr as "  [server <pid>] <line>".
    bool echo_stderr = false;
  };

  // Runs `binary` with `flags` and waits for its start-up line. UNAVAILABLE
  // carrying what the server printed if it exits or stays silent instead.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      std::string binary, std::vector<std::string> flags, Options options);
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      std::string binary, std::vector<std::string> flags) {
    return Start(std::move(binary), std::move(flags), Options());
  }
  // Runs `binary` with `flags` without waiting for anything. INTERNAL if
  // the process cannot be created.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Launch(
      std::string binary, std::vector<std::string> flags, Options options);
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Launch(
      std::string binary, std::vector<std::string> flags) {
    return Launch(std::move(binary), std::move(flags), Options());
  }

  // SIGKILLs the child if it still runs.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // The port of the start-up line (0 before one was seen); kept across
  // restarts.
  int port() const { return port_; }
  // "127.0.0.1:<port>".
  std::string address() const;
  // The child's pid, or -1 when it is not running.
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  // Sends `signal`. FAILED_PRECONDITION if not running.
  absl::Status Signal(int signal);
  // kill -9 and reap. FAILED_PRECONDITION if not running.
  absl::Status Kill();
  // SIGSTOP, then waits (up to 5 s) until every thread of the process is
  // stopped: the kernel stops them asynchronously, and a request sent at once
  // could still be answered. DEADLINE_EXCEEDED if they do not all stop.
  absl::Status Pause();
  // SIGCONT.
  absl::Status Resume();
  // Waits up to `timeout` for the child to exit and returns its exit code
  // (128 + signal if it died of one), once it has closed its stderr.
  // DEADLINE_EXCEEDED (and the child left running) if it does not exit in
  // time; FAILED_PRECONDITION if not running.
  absl::StatusOr<int> WaitForExit(absl::Duration timeout = absl::Seconds(20));
  // SIGTERM, then WaitForExit(timeout); DEADLINE_EXCEEDED (and SIGKILL) if
  // it does not exit in time.
  absl::StatusOr<int> Terminate(absl::Duration timeout = absl::Seconds(20));
  // Starts the stopped server again with the same flags on the same port,
  // less --create_db: the restart must reopen the database the first start
  // made (and fails, saying so, if it is gone).
  // A port still held by the kernel for a moment is retried until
  // `timeout`.
  absl::Status Restart(absl::Duration timeout = absl::Seconds(20));

  // Everything the current incarnation printed on stderr so far.
  std::string StderrText() const;
  // The same, as lines without their newlines.
  std::vector<std::string> StderrLines() const;

 private:
  ServerProcess(std::string binary, std::vector<std::string> flags,
                Options options);

  // Forks and execs `flags`; starts the stderr reader.
  absl::Status Spawn(const std::vector<std::string>& flags);
  // Waits for the start-up line; on failure kills the child.
  absl::Status AwaitStartLine(absl::Duration timeout);
  // Reaps the child (blocking) and joins the stderr reader.
  int Reap();
  // Body of the reader thread for the child `pid`.
  void ReadStderr(int fd, pid_t pid);

  const std::string binary_;
  std::vector<std::string> flags_;
  const Options options_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::thread reader_;

  mutable base::Mutex mu_;
  std::string stderr_ ABSL_GUARDED_BY(mu_);
  bool stderr_closed_ ABSL_GUARDED_BY(mu_) = false;
};

// The port announced by a start-up line in `text` (complete, with its
// newline), or 0 if there is none yet.
int PortOfStartLine(const std::string& text);

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_SERVER_PROCESS_H_
