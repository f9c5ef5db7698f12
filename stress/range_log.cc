#include "stress/range_log.h"

#include <algorithm>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace hilo::stress {

RangeEvent RangeEvent::Range(std::string collection, std::string tag,
                             int64_t low, int64_t high, uint64_t token) {
  RangeEvent e;
  e.kind = Kind::kRange;
  e.collection = std::move(collection);
  e.node_tag = std::move(tag);
  e.a = low;
  e.b = high;
  e.token = token;
  return e;
}

RangeEvent RangeEvent::ReturnIntent(std::string collection, std::string tag,
                                    int64_t end, int64_t last, uint64_t token) {
  RangeEvent e = Range(std::move(collection), std::move(tag), end, last, token);
  e.kind = Kind::kReturnIntent;
  return e;
}

RangeEvent RangeEvent::ReturnOutcome(std::string collection, std::string tag,
                                     int64_t end, int64_t last, uint64_t token,
                                     int code, bool applied) {
  RangeEvent e = Range(std::move(collection), std::move(tag), end, last, token);
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
                   " ", tag, " ", e.a, " ", e.b, " ", e.token);
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
  if (f.size() < 6 || f[0].size() != 1) return bad();
  RangeEvent e;
  e.kind = static_cast<RangeEvent::Kind>(f[0][0]);
  e.collection = std::string(f[1]);
  e.node_tag = f[2] == "-" ? "" : std::string(f[2]);
  if (!absl::SimpleAtoi(f[3], &e.a) || !absl::SimpleAtoi(f[4], &e.b) ||
      !absl::SimpleAtoi(f[5], &e.token)) {
    return bad();
  }
  switch (e.kind) {
    case RangeEvent::Kind::kRange:
    case RangeEvent::Kind::kReturnIntent:
      if (f.size() != 6) return bad();
      return e;
    case RangeEvent::Kind::kReturnOutcome: {
      int applied = 0;
      if (f.size() != 8 || !absl::SimpleAtoi(f[6], &e.code) ||
          !absl::SimpleAtoi(f[7], &applied)) {
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
  // Per range: a return was sent; one of its copies failed with an RPC
  // error (and so may have applied); one was answered applied.
  struct Returns {
    bool sent = false;
    bool failed = false;
    bool applied = false;
  };
  std::vector<Returns> returns;
  auto find = [&](const RangeEvent& e,
                  bool was_returned) -> std::optional<size_t> {
    for (size_t i = ranges.size(); i-- > 0;) {
      const UsedRange& r = ranges[i];
      if (e.token != 0) {
        // The token names the range, retries of its return included.
        if (r.token == e.token) return i;
        continue;
      }
      if (r.collection == e.collection && r.high == e.a &&
          (e.node_tag.empty() || r.node_tag == e.node_tag) &&
          returns[i].sent == was_returned) {
        return i;
      }
    }
    return std::nullopt;
  };
  for (const RangeEvent& e : events) {
    switch (e.kind) {
      case RangeEvent::Kind::kRange:
        ranges.push_back(UsedRange{e.collection, e.node_tag, e.a, e.b, e.token,
                                   e.b, e.b, false});
        returns.emplace_back();
        break;
      case RangeEvent::Kind::kReturnIntent: {
        std::optional<size_t> i = find(e, false);
        if (!i.has_value()) break;  // checked by the caller's ID coverage
        ranges[*i].used_high = std::min(ranges[*i].used_high, e.b);
        ranges[*i].held_high = std::min(ranges[*i].held_high, e.b);
        if (!returns[*i].applied) ranges[*i].return_unknown = true;
        returns[*i].sent = true;
        break;
      }
      case RangeEvent::Kind::kReturnOutcome: {
        std::optional<size_t> i = find(e, true);
        if (!i.has_value()) break;
        Returns& r = returns[*i];
        if (e.code != 0) {
          r.failed = true;  // may have applied: stays unknown
        } else if (e.applied) {
          r.applied = true;
          ranges[*i].return_unknown = false;
        } else if (!r.failed && !r.applied) {
          // Refused, and no earlier copy can have applied.
          ranges[*i].return_unknown = false;
          ranges[*i].held_high = ranges[*i].high;
        }
        break;
      }
    }
  }
  return ranges;
}

std::vector<std::string> FindTokenProblems(
    const std::vector<RangeEvent>& events) {
  std::vector<std::string> problems;
  std::vector<const RangeEvent*> ranges;
  for (const RangeEvent& e : events) {
    switch (e.kind) {
      case RangeEvent::Kind::kRange:
        if (e.token == 0) {
          problems.push_back(
              absl::StrFormat("node %s replied %s %d-%d without a range_token",
                              e.node_tag, e.collection, e.a, e.b));
        }
        ranges.push_back(&e);
        break;
      case RangeEvent::Kind::kReturnIntent: {
        if (e.token == 0) {
          problems.push_back(absl::StrFormat(
              "a return of %s (%d, %d] was sent without a range_token",
              e.collection, e.b, e.a));
          break;
        }
        auto it = std::find_if(
            ranges.rbegin(), ranges.rend(),
            [&](const RangeEvent* r) { return r->token == e.token; });
        if (it == ranges.rend()) {
          problems.push_back(absl::StrFormat(
              "a return of %s (%d, %d] carries a token of no range this "
              "client was given",
              e.collection, e.b, e.a));
        } else if ((*it)->collection != e.collection || (*it)->b != e.a ||
                   (!e.node_tag.empty() && (*it)->node_tag != e.node_tag)) {
          problems.push_back(absl::StrFormat(
              "a return of %s (%d, %d] node %s carries the token of %s %d-%d "
              "node %s",
              e.collection, e.b, e.a, e.node_tag, (*it)->collection, (*it)->a,
              (*it)->b, (*it)->node_tag));
        }
        break;
      }
      case RangeEvent::Kind::kReturnOutcome:
        break;
    }
  }
  return problems;
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
