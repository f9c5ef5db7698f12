#include "client_cpp/src/held_numbers.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace hilo::internal {
namespace {

// Joins two neighbours until at most kMaxHeldIntervals are left: of the
// pairs below the two highest intervals, the one with the smallest gap.
// The two highest hold the ranges still in use (a healthy node's new range
// starts above every number issued), whose numbers above `last` a return
// takes out again; a gap covered below them lies below numbers handed out
// for good, which a healthy node never issues again, so it refuses nothing
// such a node sends. A gap at the top would: once the ranges above it went
// back, the node rightly issues the gap's numbers again.
void MergeClosest(std::vector<HeldInterval>& spans) {
  while (spans.size() > HeldNumbers::kMaxHeldIntervals) {
    size_t best = 0;
    for (size_t i = 1; i + 3 < spans.size(); ++i) {
      if (spans[i + 1].first - spans[i].second <
          spans[best + 1].first - spans[best].second) {
        best = i;
      }
    }
    spans[best].second = spans[best + 1].second;
    spans.erase(spans.begin() + static_cast<ptrdiff_t>(best) + 1);
  }
}

}  // namespace

std::vector<HeldInterval> AddInterval(std::vector<HeldInterval> spans,
                                      int64_t low, int64_t high) {
  spans.emplace_back(low, high);
  std::sort(spans.begin(), spans.end());
  std::vector<HeldInterval> out;
  for (const HeldInterval& s : spans) {
    // s.first - 1 cannot overflow: every low is at least 1.
    if (!out.empty() && s.first - 1 <= out.back().second) {
      out.back().second = std::max(out.back().second, s.second);
    } else {
      out.push_back(s);
    }
  }
  MergeClosest(out);
  return out;
}

std::vector<HeldInterval> RemoveInterval(const std::vector<HeldInterval>& spans,
                                         int64_t low, int64_t high) {
  std::vector<HeldInterval> out;
  for (const HeldInterval& s : spans) {
    if (s.second < low || high < s.first) {
      out.push_back(s);
      continue;
    }
    if (s.first < low) out.emplace_back(s.first, low - 1);
    if (high < s.second) out.emplace_back(high + 1, s.second);
  }
  MergeClosest(out);
  return out;
}

absl::Status HeldNumbers::Check(absl::string_view tag, int64_t low,
                                int64_t high) const {
  const auto it = by_tag_.find(tag);
  if (it == by_tag_.end()) {
    if (by_tag_.size() < kMaxHeldTags) return absl::OkStatus();
    return absl::InternalError(absl::StrFormat(
        "NextRange replied with tag \"%s\", but the client already keeps the "
        "numbers of %d node tags of this collection, the most it keeps",
        tag, kMaxHeldTags));
  }
  for (const HeldInterval& s : it->second) {
    if (s.first <= high && low <= s.second) {
      return absl::InternalError(absl::StrFormat(
          "NextRange replied with %d-%d of tag \"%s\", which overlaps "
          "%d-%d, numbers the client holds or handed out of that node",
          low, high, tag, s.first, s.second));
    }
  }
  return absl::OkStatus();
}

void HeldNumbers::Add(absl::string_view tag, int64_t low, int64_t high) {
  std::vector<HeldInterval>& spans = by_tag_[tag];
  spans = AddInterval(std::move(spans), low, high);
}

void HeldNumbers::Remove(absl::string_view tag, int64_t low, int64_t high) {
  const auto it = by_tag_.find(tag);
  if (low > high || it == by_tag_.end()) return;
  it->second = RemoveInterval(it->second, low, high);
}

std::vector<HeldInterval> HeldNumbers::Intervals(absl::string_view tag) const {
  const auto it = by_tag_.find(tag);
  return it == by_tag_.end() ? std::vector<HeldInterval>{} : it->second;
}

}  // namespace hilo::internal
