// Report: what hilo_stress found and did, printed as it happens and kept.
//
//   Report report;
//   report.Note("kill -9 #1 of node A");       // progress, on stderr
//   report.Problem("worker 0 died early");     // fails the run
//   if (!report.problems().empty()) ...
//
// Not thread-safe: the orchestrator's one thread uses it.
#ifndef HILO_STRESS_REPORT_H_
#define HILO_STRESS_REPORT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

namespace hilo::stress {

class Report {
 public:
  // Prints "hilo_stress: PROBLEM: <text>" and keeps it.
  void Problem(std::string text) {
    absl::FPrintF(stderr, "hilo_stress: PROBLEM: %s\n", text);
    problems_.push_back(std::move(text));
  }
  // Prints "hilo_stress: <text>".
  void Note(const std::string& text) {
    absl::FPrintF(stderr, "hilo_stress: %s\n", text);
  }
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

}  // namespace hilo::stress

#endif  // HILO_STRESS_REPORT_H_
