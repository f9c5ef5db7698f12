#include "stress/range_log.h"

#include <algorithm>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace hilo::stress {

RangeEvent RangeEvent::Range(std::string collection, std::string tag,
                             int64_t low, int64_t high) {
  RangeEvent e;
  e.kind = Kind::kRange;
  e.collection = std::move(collection);
  e.node_tag = std::move(tag);
  e.a = low;
  e.b = high;
  return e;
}

RangeEvent RangeEvent::ReturnIntent(std::string collection, std::string tag,
                                    int64_t end, int64_t last) {
  RangeEvent e = Range(std::move(collection), std::move(tag), end, last);
  e.kind = Kind::kReturnIntent;
  return e;
}

RangeEvent RangeEvent::ReturnOutcome(std::string collection, std::string tag,
                                     int64_t end, int64_t last, int code,
                                     bool applied) {
  RangeEvent e = Range(std::move(collection), std::move(tag), end, last);
  e.kind = Kind::kReturnOutcome;
  e.code = code;
  e.applied = applied;
  return e;
}

std::string FormatEvent(const RangeEvent& e) {
  // An empty tag (a return meaning "this node") is written as "-".
  const std::string tag = e.node_tag.empty() ? "-" : e.node_tag;
  std::string line =
      absl::StrCat(std::string(1, static_cast<char>(e.kind)), " ", e.collection,
                   " ", tag, " ", e.a, " ", e.b);
  if (e.kind == RangeEvent::Kind::kReturnOutcome) {
    absl::StrAppend(&line, " ", e.code, " ", e.applied ? 1 : 0);
  }
  line.push_back('\n');
  return line;
}

absl::StatusOr<RangeEvent> ParseEvent(absl::string_view line) {
  const std::vector<absl::string_view> f =
      absl::StrSplit(line, ' ', absl::SkipEmpty());
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("not a range log line: \"", line, "\""));
  };
  if (f.size() < 5 || f[0].size() != 1) return bad();
  RangeEvent e;
  e.kind = static_cast<RangeEvent::Kind>(f[0][0]);
  e.collection = std::string(f[1]);
  e.node_tag = f[2] == "-" ? "" : std::string(f[2]);
  if (!absl::SimpleAtoi(f[3], &e.a) || !absl::SimpleAtoi(f[4], &e.b)) {
    return bad();
  }
  switch (e.kind) {
    case RangeEvent::Kind::kRange:
    case RangeEvent::Kind::kReturnIntent:
      if (f.size() != 5) return bad();
      return e;
    case RangeEvent::Kind::kReturnOutcome: {
      int applied = 0;
      if (f.size() != 7 || !absl::SimpleAtoi(f[5], &e.code) ||
          !absl::SimpleAtoi(f[6], &applied)) {
        return bad();
      }
      e.applied = applied != 0;
      return e;
    }
  }
  return bad();
}

std::vector<UsedRange> UsedRanges(const std::vector<RangeEvent>& events) {
  std::vector<UsedRange> ranges;
  // The range each return is about: the latest one of its collection with
  // that high that has no return yet (a client returns each range once).
  std::vector<bool> returned;
  auto find = [&](const RangeEvent& e,
                  bool was_returned) -> std::optional<size_t> {
    for (size_t i = ranges.size(); i-- > 0;) {
      const UsedRange& r = ranges[i];
      if (r.collection == e.collection && r.high == e.a &&
          (e.node_tag.empty() || r.node_tag == e.node_tag) &&
          returned[i] == was_returned) {
        return i;
      }
    }
    return std::nullopt;
  };
  for (const RangeEvent& e : events) {
    switch (e.kind) {
      case RangeEvent::Kind::kRange:
        ranges.push_back(
            UsedRange{e.collection, e.node_tag, e.a, e.b, e.b, e.b, false});
        returned.push_back(false);
        break;
      case RangeEvent::Kind::kReturnIntent: {
        std::optional<size_t> i = find(e, false);
        if (!i.has_value()) break;  // checked by the caller's ID coverage
        ranges[*i].used_high = std::min(ranges[*i].used_high, e.b);
        ranges[*i].held_high = std::min(ranges[*i].held_high, e.b);
        ranges[*i].return_unknown = true;
        returned[*i] = true;
        break;
      }
      case RangeEvent::Kind::kReturnOutcome: {
        std::optional<size_t> i = find(e, true);
        if (!i.has_value()) break;
        // OK says for sure whether it applied; an error leaves it unknown.
        if (e.code == 0) {
          ranges[*i].return_unknown = false;
          if (!e.applied) ranges[*i].held_high = ranges[*i].high;
        }
        break;
      }
    }
  }
  return ranges;
}

namespace {

// Ranges grouped by (collection, tag), each group sorted by low, those the
// node holds nothing of (all returned) left out.
std::map<CollectionAndTag, std::vector<const UsedRange*>> Grouped(
    const std::vector<UsedRange>& ranges) {
  std::map<CollectionAndTag, std::vector<const UsedRange*>> groups;
  for (const UsedRange& r : ranges) {
    if (r.held_high < r.low) continue;
    groups[{r.collection, r.node_tag}].push_back(&r);
  }
  for (auto& [key, group] : groups) {
    std::sort(
        group.begin(), group.end(),
        [](const UsedRange* a, const UsedRange* b) { return a->low < b->low; });
  }
  return groups;
}

}  // namespace

std::vector<std::string> FindOverlaps(const std::vector<UsedRange>& ranges) {
  std::vector<std::string> problems;
  for (const auto& [key, group] : Grouped(ranges)) {
    const UsedRange* widest = nullptr;  // the one reaching highest so far
    for (const UsedRange* r : group) {
      if (widest != nullptr && r->low <= widest->held_high) {
        problems.push_back(absl::StrFormat(
            "collection %s node %s: range %d-%d (held to %d) overlaps "
            "%d-%d (held to %d)",
            key.first, key.second, r->low, r->high, r->held_high, widest->low,
            widest->high, widest->held_high));
      }
      if (widest == nullptr || r->held_high > widest->held_high) widest = r;
    }
  }
  return problems;
}

std::map<CollectionAndTag, int64_t> Floors(
    const std::vector<UsedRange>& ranges) {
  std::map<CollectionAndTag, int64_t> floors;
  for (const UsedRange& r : ranges) {
    if (r.held_high < r.low) continue;
    int64_t& floor = floors[{r.collection, r.node_tag}];
    floor = std::max(floor, r.held_high);
  }
  return floors;
}

std::vector<std::string> FindGaps(
    const std::vector<UsedRange>& ranges,
    const std::map<CollectionAndTag, int64_t>& maxes) {
  std::vector<std::string> problems;
  std::map<CollectionAndTag, std::vector<const UsedRange*>> all;
  for (const UsedRange& r : ranges) {
    all[{r.collection, r.node_tag}].push_back(&r);
  }
  for (auto& [key, group] : all) {
    auto max = maxes.find(key);
    if (max == maxes.end()) continue;
    // Covered: held parts; excused: tails of returns with unknown outcome.
    std::vector<std::pair<int64_t, int64_t>> covered;
    for (const UsedRange* r : group) {
      if (r->held_high >= r->low) covered.emplace_back(r->low, r->held_high);
      if (r->return_unknown && r->held_high < r->high) {
        covered.emplace_back(std::max(r->low, r->held_high + 1), r->high);
      }
    }
    std::sort(covered.begin(), covered.end());
    int64_t next = 1;  // the lowest number not yet covered
    for (const auto& [low, high] : covered) {
      if (low > next) {
        problems.push_back(absl::StrFormat(
            "collection %s node %s: numbers %d-%d were taken from the node "
            "(Max %d) but no client was given them",
            key.first, key.second, next, low - 1, max->second));
      }
      next = std::max(next, high + 1);
    }
    if (next <= max->second) {
      problems.push_back(absl::StrFormat(
          "collection %s node %s: numbers %d-%d are below Max %d but no "
          "client was given them",
          key.first, key.second, next, max->second, max->second));
    }
  }
  return problems;
}

}  // namespace hilo::stress
