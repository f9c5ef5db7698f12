#include "testing/process_threads.h"

#include <dirent.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hilo::testing_util {

absl::StatusOr<std::vector<std::string>> ThreadNames() {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/proc/self/task"),
                                          &closedir);
  if (dir == nullptr) {
    return absl::UnavailableError(
        "cannot list this process's threads: /proc/self/task is unreadable");
  }
  std::vector<std::string> names;
  while (const dirent* entry = readdir(dir.get())) {
    const std::string tid = entry->d_name;
    if (tid == "." || tid == "..") continue;
    // A thread that ends between readdir and here still counted: its name
    // is left empty rather than dropped.
    std::ifstream comm(absl::StrCat("/proc/self/task/", tid, "/comm"));
    std::string name;
    std::getline(comm, name);
    names.push_back(
        absl::StrCat(absl::StripAsciiWhitespace(name), " (tid ", tid, ")"));
  }
  return names;
}

absl::Status WaitForThreadCountAtMost(int threads, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration pause = absl::Milliseconds(1);
  while (true) {
    absl::StatusOr<std::vector<std::string>> names = ThreadNames();
    if (!names.ok()) return names.status();
    if (static_cast<int>(names->size()) <= threads) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(names->size(), " threads are still running after ",
                       absl::FormatDuration(timeout), "; expected at most ",
                       threads, ": ", absl::StrJoin(*names, ", ")));
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(10));
  }
}

std::map<pid_t, int> ThreadPolicies(pid_t pid) {
  std::map<pid_t, int> policies;
  for (const auto& entry : std::filesystem::directory_iterator(
           absl::StrCat("/proc/", pid, "/task"))) {
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;  // the thread ended
    // The fields after the name (which ends at the last ')') start at 3.
    std::istringstream after_name(stat.substr(stat.rfind(')') + 1));
    const std::vector<std::string> fields{
        std::istream_iterator<std::string>(after_name), {}};
    policies[std::stoi(entry.path().filename().string())] =
        std::stoi(fields.at(41 - 3));
  }
  return policies;
}

absl::Status RefuseSystemCallOnThisThread(long nr, int error) {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(nr), 0, 1),
      BPF_STMT(BPF_RET | BPF_K,
               SECCOMP_RET_ERRNO |
                   (static_cast<unsigned>(error) & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  // Without privileges a filter needs no_new_privs, which exec keeps.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    return absl::InternalError(absl::StrCat("cannot install a seccomp filter: ",
                                            std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace hilo::testing_util
