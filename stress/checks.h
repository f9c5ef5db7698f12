// Checks: what hilo_stress concludes from what it recorded, as pure
// functions. Each takes the IDs workers were handed (IdLedger runs), the
// ranges their clients were given (UsedRange, from the range log) or the
// Max a node stored, and gives its findings: numbers, and descriptions of
// what is wrong. No finding means the contract held:
//   - no number of a (collection, counter) is handed out twice;
//   - every number lies in a range its own client was given;
//   - a node's stored Max is at least every number it replied with.
// (Ranges that overlap are FindOverlaps of range_log.h; returns with a
// wrong token, FindTokenProblems.)
//
//   std::vector<UsedRange> used = ByCounter(UsedRanges(events), shared);
//   IdFindings outside = FindIdsOutsideRanges(ledger.Runs(), used);
//   if (outside.numbers > 0) ...
//
// A counter is what numbers are drawn from: a node's own (its tag), or
// with a store the nodes share, one for all ("*").
#ifndef HILO_STRESS_CHECKS_H_
#define HILO_STRESS_CHECKS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "stress/id_ledger.h"
#include "stress/range_log.h"

namespace hilo::stress {

// The counter `node_tag` draws from: the tag, or "*" if `shared_store`.
std::string CounterOf(absl::string_view node_tag, bool shared_store);

// `ranges` with each node tag replaced by its counter.
std::vector<UsedRange> ByCounter(std::vector<UsedRange> ranges,
                                 bool shared_store);

// Numbers found wrong, and a description of each finding.
struct IdFindings {
  int64_t numbers = 0;
  std::vector<std::string> problems;
};

// Numbers of `runs` (one client's IDs) that no range of `used` (the ranges
// the same client was given, up to its used_high) of the same collection
// and counter covers. Describes at most `max_problems` runs.
IdFindings FindIdsOutsideRanges(const std::vector<IdLedger::Run>& runs,
                                const std::vector<UsedRange>& used,
                                size_t max_problems = 5);

// Numbers handed out twice: IDs of one collection and counter in the runs
// of two workers (`runs_by_worker`, one list each; a worker's own runs
// never overlap, its IdLedger having counted its repeats).
IdFindings FindIdsHandedToTwoWorkers(
    const std::vector<std::vector<IdLedger::Run>>& runs_by_worker);

// Collections checked and what was wrong.
struct StoredMaxFindings {
  int checked = 0;
  std::vector<std::string> problems;
};

// Checks the Max node `node_tag` stored (`stored_max`, by collection)
// against `floors` (the highest number held per collection and counter):
// a floor of the node's counter with no row, or a Max below it, is a
// finding. `when` opens each description.
StoredMaxFindings CheckStoredMax(
    absl::string_view node_tag, absl::string_view counter,
    const std::map<std::string, int64_t>& stored_max,
    const std::map<CollectionAndTag, int64_t>& floors, absl::string_view when);

}  // namespace hilo::stress

#endif  // HILO_STRESS_CHECKS_H_
