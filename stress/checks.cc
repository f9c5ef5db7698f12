#include "stress/checks.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"

namespace hilo::stress {

std::string CounterOf(absl::string_view node_tag, bool shared_store) {
  return shared_store ? "*" : std::string(node_tag);
}

std::vector<UsedRange> ByCounter(std::vector<UsedRange> ranges,
                                 bool shared_store) {
  for (UsedRange& r : ranges) r.node_tag = CounterOf(r.node_tag, shared_store);
  return ranges;
}

IdFindings FindIdsOutsideRanges(const std::vector<IdLedger::Run>& runs,
                                const std::vector<UsedRange>& used,
                                size_t max_problems) {
  std::map<CollectionAndTag, std::vector<std::pair<int64_t, int64_t>>> given;
  for (const UsedRange& r : used) {
    if (r.used_high >= r.low) {
      given[{r.collection, r.node_tag}].emplace_back(r.low, r.used_high);
    }
  }
  for (auto& [key, intervals] : given) {
    std::sort(intervals.begin(), intervals.end());
  }
  IdFindings findings;
  for (const IdLedger::Run& run : runs) {
    const auto& intervals = given[{run.collection, run.node_tag}];
    // Walk the run through the sorted intervals, counting uncovered numbers.
    int64_t next = run.start;
    const int64_t end = run.start + run.count - 1;
    int64_t missing = 0;
    for (const auto& [low, high] : intervals) {
      if (high < next) continue;
      if (low > end) break;
      if (low > next) missing += low - next;
      next = std::max(next, high + 1);
      if (next > end) break;
    }
    if (next <= end) missing += end - next + 1;
    if (missing > 0 && findings.problems.size() < max_problems) {
      findings.problems.push_back(absl::StrFormat(
          "%s/%d..%d-%s: %d number(s) outside every range this client was "
          "given",
          run.collection, run.start, end, run.node_tag, missing));
    }
    findings.numbers += missing;
  }
  return findings;
}

IdFindings FindIdsHandedToTwoWorkers(
    const std::vector<std::vector<IdLedger::Run>>& runs_by_worker) {
  std::map<CollectionAndTag, std::vector<std::pair<int64_t, int64_t>>> runs;
  for (const std::vector<IdLedger::Run>& worker_runs : runs_by_worker) {
    for (const IdLedger::Run& run : worker_runs) {
      runs[{run.collection, run.node_tag}].emplace_back(
          run.start, run.start + run.count - 1);
    }
  }
  IdFindings findings;
  for (auto& [key, intervals] : runs) {
    std::sort(intervals.begin(), intervals.end());
    int64_t reach = 0;  // highest number covered so far
    for (const auto& [low, high] : intervals) {
      if (low <= reach) {
        const int64_t twice = std::min(reach, high) - low + 1;
        findings.numbers += twice;
        findings.problems.push_back(absl::StrFormat(
            "%d number(s) of %s node %s from %d were handed to two workers",
            twice, key.first, key.second, low));
      }
      reach = std::max(reach, high);
    }
  }
  return findings;
}

StoredMaxFindings CheckStoredMax(
    absl::string_view node_tag, absl::string_view counter,
    const std::map<std::string, int64_t>& stored_max,
    const std::map<CollectionAndTag, int64_t>& floors, absl::string_view when) {
  StoredMaxFindings findings;
  for (const auto& [key, floor] : floors) {
    if (key.second != counter) continue;
    ++findings.checked;
    auto it = stored_max.find(key.first);
    if (it == stored_max.end()) {
      findings.problems.push_back(absl::StrFormat(
          "%s: node %s has no row for %s, though it replied with %d", when,
          node_tag, key.first, floor));
    } else if (it->second < floor) {
      findings.problems.push_back(absl::StrFormat(
          "%s: node %s stored Max of %s is %d, below %d, a number it "
          "replied with",
          when, node_tag, key.first, it->second, floor));
    }
  }
  return findings;
}

}  // namespace hilo::stress
