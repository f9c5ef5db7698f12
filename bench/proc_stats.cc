#include "bench/proc_stats.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace hilo::bench {
namespace {

// The number after `key` in the status file `path`; -1 if absent.
int64_t StatusNumber(const std::string& path, absl::string_view key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, key)) continue;
    absl::string_view rest = absl::string_view(line).substr(key.size());
    rest = absl::StripAsciiWhitespace(rest);
    if (absl::EndsWith(rest, "kB")) rest.remove_suffix(2);
    int64_t n = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &n)) return n;
  }
  return -1;
}

// The number after `key` in /proc/<pid>/status; -1 if absent.
int64_t ProcStatusNumber(pid_t pid, absl::string_view key) {
  return StatusNumber(absl::StrCat("/proc/", pid, "/status"), key);
}

// The value in kB of `key` in /proc/<pid>/status, in bytes; -1 if absent.
int64_t ProcStatusBytes(pid_t pid, absl::string_view key) {
  const int64_t kb = ProcStatusNumber(pid, key);
  return kb < 0 ? -1 : kb * 1024;
}

}  // namespace

int64_t RssBytes(pid_t pid) { return ProcStatusBytes(pid, "VmRSS:"); }

int64_t PeakRssBytes(pid_t pid) { return ProcStatusBytes(pid, "VmHWM:"); }

int64_t ThreadCount(pid_t pid) { return ProcStatusNumber(pid, "Threads:"); }

double CpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
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

int64_t ContextSwitches(pid_t pid) {
  std::error_code error;
  std::filesystem::directory_iterator tasks(
      absl::StrCat("/proc/", pid, "/task"), error);
  if (error) return -1;
  int64_t sum = 0;
  bool any = false;
  for (const std::filesystem::directory_entry& task : tasks) {
    const std::string status = (task.path() / "status").string();
    const int64_t voluntary = StatusNumber(status, "voluntary_ctxt_switches:");
    const int64_t involuntary =
        StatusNumber(status, "nonvoluntary_ctxt_switches:");
    // A thread that ended since the listing has no file left.
    if (voluntary < 0 || involuntary < 0) continue;
    sum += voluntary + involuntary;
    any = true;
  }
  return any ? sum : -1;
}

}  // namespace hilo::bench
