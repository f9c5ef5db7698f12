#include "stress/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace hilo::stress {
namespace {

constexpr char kStartLine[] = "hilo_server: serving node ";

bool HasFlag(const std::vector<std::string>& flags, absl::string_view name) {
  for (const std::string& f : flags) {
    if (absl::StartsWith(f, absl::StrCat("--", name, "="))) return true;
  }
  return false;
}

// The port in a complete start-up line of `text`, or 0 if there is none yet.
int PortOfStartLine(const std::string& text) {
  const size_t start = text.find(kStartLine);
  if (start == std::string::npos) return 0;
  const size_t end = text.find('\n', start);
  if (end == std::string::npos) return 0;
  const std::string line = text.substr(start, end - start);
  const size_t at = line.find(" on port ");
  if (at == std::string::npos) return 0;
  const std::string rest = line.substr(at + 9);
  int port = 0;
  if (!absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &port)) return 0;
  return port;
}

}  // namespace

ServerProcess::ServerProcess(std::string binary, std::vector<std::string> flags)
    : binary_(std::move(binary)), flags_(std::move(flags)) {}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    std::string binary, std::vector<std::string> flags,
    absl::Duration timeout) {
  if (!HasFlag(flags, "listen")) flags.push_back("--listen=127.0.0.1:0");
  // The default metrics port is fixed; tests run side by side.
  if (!HasFlag(flags, "metrics_listen")) flags.push_back("--metrics_listen=");
  std::unique_ptr<ServerProcess> server(
      new ServerProcess(std::move(binary), std::move(flags)));
  if (absl::Status s = server->Spawn(server->flags_, timeout); !s.ok()) {
    return s;
  }
  return server;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    Reap();
  }
}

std::string ServerProcess::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

std::string ServerProcess::StderrText() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stderr_;
}

void ServerProcess::ReadStderr(int fd) {
  char buffer[4096];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Keep the start and the latest output of a long-lived chatty server.
      if (stderr_.size() > (1 << 20)) stderr_.erase(4096, stderr_.size() / 2);
      stderr_.append(buffer, static_cast<size_t>(n));
    }
    stderr_changed_.notify_all();
  }
  close(fd);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stderr_closed_ = true;
  }
  stderr_changed_.notify_all();
}

absl::Status ServerProcess::Spawn(const std::vector<std::string>& flags,
                                  absl::Duration timeout) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls.
  std::vector<std::string> args = flags;
  args.insert(args.begin(), binary_);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stderr_.clear();
    stderr_closed_ = false;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int null_fd = open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      dup2(null_fd, STDIN_FILENO);
      dup2(null_fd, STDOUT_FILENO);
    }
    dup2(fds[1], STDERR_FILENO);
    execv(argv[0], argv.data());
    const char message[] = "hilo_stress: exec of hilo_server failed\n";
    (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
    _exit(127);
  }
  close(fds[1]);
  pid_ = pid;
  reader_ = std::thread([this, fd = fds[0]] { ReadStderr(fd); });

  int port = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    stderr_changed_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [&] {
      port = PortOfStartLine(stderr_);
      return port > 0 || stderr_closed_;
    });
  }
  if (port > 0) {
    port_ = port;
    return absl::OkStatus();
  }
  kill(pid_, SIGKILL);
  const int code = Reap();
  return absl::UnavailableError(
      absl::StrFormat("%s did not start (exit %d within %s): %s", binary_, code,
                      absl::FormatDuration(timeout), StderrText()));
}

int ServerProcess::Reap() {
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  if (reader_.joinable()) reader_.join();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

absl::Status ServerProcess::Kill() {
  if (pid_ <= 0) return absl::FailedPreconditionError("server is not running");
  if (kill(pid_, SIGKILL) != 0) {
    return absl::InternalError(absl::StrCat("kill: ", strerror(errno)));
  }
  Reap();
  return absl::OkStatus();
}

absl::Status ServerProcess::Pause() {
  if (pid_ <= 0) return absl::FailedPreconditionError("server is not running");
  if (kill(pid_, SIGSTOP) != 0) {
    return absl::InternalError(absl::StrCat("kill: ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status ServerProcess::Resume() {
  if (pid_ <= 0) return absl::FailedPreconditionError("server is not running");
  if (kill(pid_, SIGCONT) != 0) {
    return absl::InternalError(absl::StrCat("kill: ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ServerProcess::Terminate(absl::Duration timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("server is not running");
  kill(pid_, SIGTERM);
  kill(pid_, SIGCONT);  // a paused server must run to drain
  const absl::Time give_up = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      pid_ = -1;
      if (reader_.joinable()) reader_.join();
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (absl::Now() > give_up) {
      Kill().IgnoreError();
      return absl::DeadlineExceededError(
          absl::StrFormat("server did not exit within %s of SIGTERM",
                          absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

absl::Status ServerProcess::Restart(absl::Duration timeout) {
  if (pid_ > 0) {
    return absl::FailedPreconditionError("server is still running");
  }
  std::vector<std::string> flags;
  for (const std::string& f : flags_) {
    if (!absl::StartsWith(f, "--listen=")) flags.push_back(f);
  }
  flags.push_back(absl::StrCat("--listen=", address()));
  const absl::Time give_up = absl::Now() + timeout;
  while (true) {
    const absl::Duration left = give_up - absl::Now();
    absl::Status s = Spawn(flags, std::max(left, absl::Seconds(1)));
    if (s.ok()) return s;
    // The kernel may hold the port for a moment after a kill.
    if (!absl::StrContains(s.message(), "cannot listen") ||
        absl::Now() > give_up) {
      return s;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

}  // namespace hilo::stress
