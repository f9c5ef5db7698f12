#include "testing/server_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace hilo::testing_util {
namespace {

constexpr char kStartLine[] = "hilo_server: serving node ";

bool HasFlag(const std::vector<std::string>& flags, absl::string_view name) {
  for (const std::string& f : flags) {
    if (absl::StartsWith(f, absl::StrCat("--", name, "="))) return true;
  }
  return false;
}

int ExitCode(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status)
                                : 128 + WTERMSIG(wait_status);
}

}  // namespace

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

ServerProcess::ServerProcess(std::string binary, std::vector<std::string> flags,
                             Options options)
    : binary_(std::move(binary)), flags_(std::move(flags)), options_(options) {}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Launch(
    std::string binary, std::vector<std::string> flags, Options options) {
  if (!HasFlag(flags, "listen")) flags.push_back("--listen=127.0.0.1:0");
  if (!HasFlag(flags, "metrics_listen")) flags.push_back("--metrics_listen=");
  std::unique_ptr<ServerProcess> server(
      new ServerProcess(std::move(binary), std::move(flags), options));
  if (absl::Status s = server->Spawn(server->flags_); !s.ok()) return s;
  return server;
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    std::string binary, std::vector<std::string> flags, Options options) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      Launch(std::move(binary), std::move(flags), options);
  if (!server.ok()) return server;
  if (absl::Status s = (*server)->AwaitStartLine(options.start_timeout);
      !s.ok()) {
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
  base::MutexLock lock(&mu_);
  return stderr_;
}

std::vector<std::string> ServerProcess::StderrLines() const {
  const std::string text = StderrText();
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

void ServerProcess::ReadStderr(int fd, pid_t pid) {
  char buffer[4096];
  std::string line;  // for echoing
  bool started = false;
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    {
      base::MutexLock lock(&mu_);
      // Keep the start and the latest output of a long-lived chatty server.
      if (stderr_.size() > (1 << 20)) stderr_.erase(4096, stderr_.size() / 2);
      stderr_.append(buffer, static_cast<size_t>(n));
    }
    if (!options_.echo_stderr) continue;
    for (ssize_t i = 0; i < n; ++i) {
      if (buffer[i] != '\n') {
        line.push_back(buffer[i]);
        continue;
      }
      if (started) {
        std::fprintf(stderr, "  [server %d] %s\n", static_cast<int>(pid),
                     line.c_str());
      }
      started = started || absl::StartsWith(line, kStartLine);
      line.clear();
    }
  }
  close(fd);
  base::MutexLock lock(&mu_);
  stderr_closed_ = true;
}

absl::Status ServerProcess::Spawn(const std::vector<std::string>& flags) {
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
    base::MutexLock lock(&mu_);
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
    if (getppid() != parent) _exit(127);  // the parent is already gone
    // gRPC may block signals in its threads; the server relies on them.
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
    const char message[] = "ServerProcess: exec of hilo_server failed\n";
    (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
    _exit(127);
  }
  close(fds[1]);
  pid_ = pid;
  reader_ = std::thread([this, fd = fds[0], pid] { ReadStderr(fd, pid); });
  return absl::OkStatus();
}

absl::Status ServerProcess::AwaitStartLine(absl::Duration timeout) {
  int port = 0;
  {
    base::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(
        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          port = PortOfStartLine(stderr_);
          return port > 0 || stderr_closed_;
        },
        timeout);
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
  return ExitCode(status);
}

absl::Status ServerProcess::Signal(int signal) {
  if (pid_ <= 0) return absl::FailedPreconditionError("server is not running");
  if (kill(pid_, signal) != 0) {
    return absl::InternalError(absl::StrCat("kill: ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status ServerProcess::Kill() {
  if (absl::Status s = Signal(SIGKILL); !s.ok()) return s;
  Reap();
  return absl::OkStatus();
}

namespace {

// True if every thread of `pid` is stopped (state T or t in
// /proc/PID/task/TID/stat, the field after the command's closing ')').
bool AllThreadsStopped(pid_t pid) {
  const std::string tasks = absl::StrCat("/proc/", pid, "/task");
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) return false;
  bool stopped = true;
  int seen = 0;
  while (struct dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    ++seen;
    std::string stat;
    FILE* f =
        fopen(absl::StrCat(tasks, "/", entry->d_name, "/stat").c_str(), "r");
    if (f == nullptr) continue;  // the thread has exited
    char buffer[512];
    const size_t n = fread(buffer, 1, sizeof(buffer), f);
    fclose(f);
    stat.assign(buffer, n);
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size() ||
        (stat[paren + 2] != 'T' && stat[paren + 2] != 't')) {
      stopped = false;
      break;
    }
  }
  closedir(dir);
  return stopped && seen > 0;
}

}  // namespace

absl::Status ServerProcess::Pause() {
  if (absl::Status s = Signal(SIGSTOP); !s.ok()) return s;
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (!AllThreadsStopped(pid_)) {
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "hilo_server (pid %d) not stopped 5 s after SIGSTOP", pid_));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return absl::OkStatus();
}

absl::Status ServerProcess::Resume() { return Signal(SIGCONT); }

absl::StatusOr<int> ServerProcess::WaitForExit(absl::Duration timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("server is not running");
  const absl::Time give_up = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      pid_ = -1;
      if (reader_.joinable()) reader_.join();
      return ExitCode(status);
    }
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "server did not exit within %s", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
}

absl::StatusOr<int> ServerProcess::Terminate(absl::Duration timeout) {
  if (absl::Status s = Signal(SIGTERM); !s.ok()) return s;
  Signal(SIGCONT).IgnoreError();  // a paused server must run to drain
  absl::StatusOr<int> code = WaitForExit(timeout);
  if (code.status().code() == absl::StatusCode::kDeadlineExceeded) {
    Kill().IgnoreError();
    return absl::DeadlineExceededError(
        absl::StrFormat("server did not exit within %s of SIGTERM",
                        absl::FormatDuration(timeout)));
  }
  return code;
}

absl::Status ServerProcess::Restart(absl::Duration timeout) {
  if (pid_ > 0) {
    return absl::FailedPreconditionError("server is still running");
  }
  // Without --create_db: a restart must find the database its first start
  // made, never quietly begin a new one.
  std::vector<std::string> flags;
  for (const std::string& f : flags_) {
    if (!absl::StartsWith(f, "--listen=") && f != "--create_db") {
      flags.push_back(f);
    }
  }
  flags.push_back(absl::StrCat("--listen=", address()));
  const absl::Time give_up = absl::Now() + timeout;
  while (true) {
    const absl::Duration left = give_up - absl::Now();
    absl::Status s = Spawn(flags);
    if (s.ok()) s = AwaitStartLine(std::max(left, absl::Seconds(1)));
    if (s.ok()) return s;
    // The kernel may hold the port for a moment after a kill.
    if (!absl::StrContains(s.message(), "cannot listen") ||
        absl::Now() > give_up) {
      return s;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

}  // namespace hilo::testing_util
