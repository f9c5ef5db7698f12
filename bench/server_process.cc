#include "bench/server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace hilo::bench {
namespace {

constexpr char kPortMarker[] = " on port ";

// The value in kB of `key` in /proc/<pid>/status, in bytes; -1 if absent.
int64_t ProcStatusBytes(pid_t pid, absl::string_view key) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, key)) continue;
    absl::string_view rest = absl::string_view(line).substr(key.size());
    rest = absl::StripAsciiWhitespace(rest);
    if (absl::EndsWith(rest, "kB")) rest.remove_suffix(2);
    int64_t kb = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &kb)) {
      return kb * 1024;
    }
  }
  return -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::string& path, const std::vector<std::string>& args,
    absl::Duration timeout) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::UnavailableError(
        absl::StrCat("pipe for hilo_server's stderr: ", strerror(errno)));
  }
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls.
  std::vector<std::string> argv_storage = {path};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::UnavailableError(
        absl::StrCat("fork for hilo_server: ", strerror(errno)));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // the parent is already gone
    // gRPC may block these in its threads; the server relies on them.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(fds[1], STDERR_FILENO);
    execv(path.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  std::unique_ptr<ServerProcess> server(new ServerProcess(pid, fds[0]));

  // Read the start-up line.
  std::string output;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const size_t marker = output.find(kPortMarker);
    if (marker != std::string::npos &&
        output.find('\n', marker) != std::string::npos) {
      const size_t begin = marker + sizeof(kPortMarker) - 1;
      const size_t end = output.find_first_not_of("0123456789", begin);
      int port = 0;
      if (absl::SimpleAtoi(absl::string_view(output).substr(begin, end - begin),
                           &port) &&
          port > 0) {
        server->port_ = port;
        break;
      }
    }
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    pollfd pfd = {fds[0], POLLIN, 0};
    const int ready =
        left_ms > 0 ? poll(&pfd, 1, static_cast<int>(left_ms)) : 0;
    char buf[4096];
    const ssize_t n = ready > 0 ? read(fds[0], buf, sizeof(buf)) : 0;
    if (n <= 0) {
      server->Stop().IgnoreError();
      return absl::UnavailableError(absl::StrFormat(
          "%s did not report its port within %s; it printed: %s", path,
          absl::FormatDuration(timeout), output));
    }
    output.append(buf, static_cast<size_t>(n));
  }
  server->drain_ = std::thread([s = server.get()] { s->DrainStderr(); });
  return server;
}

ServerProcess::~ServerProcess() { Stop().IgnoreError(); }

void ServerProcess::DrainStderr() {
  std::string line;
  char buf[4096];
  ssize_t n;
  while ((n = read(stderr_fd_, buf, sizeof(buf))) > 0 ||
         (n < 0 && errno == EINTR)) {
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') {
        line.push_back(buf[i]);
        continue;
      }
      std::fprintf(stderr, "  [server %d] %s\n", static_cast<int>(pid_),
                   line.c_str());
      line.clear();
    }
  }
}

int64_t ServerProcess::RssBytes() const {
  return ProcStatusBytes(pid_, "VmRSS:");
}

int64_t ServerProcess::PeakRssBytes() const {
  return ProcStatusBytes(pid_, "VmHWM:");
}

double ServerProcess::CpuSeconds() const {
  std::ifstream in(absl::StrCat("/proc/", pid_, "/stat"));
  std::string stat;
  std::getline(in, stat);
  // Fields after the command name, which is in parentheses and may hold
  // spaces: state is field 3, utime 14 and stime 15.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::vector<std::string> fields =
      absl::StrSplit(absl::string_view(stat).substr(close + 2), ' ');
  int64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return -1;
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

absl::Status ServerProcess::Stop() {
  if (stopped_) return absl::OkStatus();
  stopped_ = true;
  kill(pid_, SIGTERM);
  int status = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  pid_t done = 0;
  while ((done = waitpid(pid_, &status, WNOHANG)) == 0 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (done == 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
  if (drain_.joinable()) drain_.join();
  close(stderr_fd_);
  if (done == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "hilo_server (pid %d) did not stop within 20 s of SIGTERM", pid_));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "hilo_server (pid %d) ended with status 0x%x", pid_, status));
  }
  return absl::OkStatus();
}

}  // namespace hilo::bench
