#include "fuzz/contract_model.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "fuzz/fuzz_report.h"

namespace hilo::fuzz {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

void ExpectCode(const absl::Status& status, absl::StatusCode code,
                absl::string_view call) {
  if (status.code() != code) {
    Fail(absl::StrCat(call, ": got ", status.ToString(), "; want ",
                      absl::StatusCodeToString(code)));
  }
}

void ExpectOk(const absl::Status& status, absl::string_view call) {
  if (!status.ok()) Fail(absl::StrCat(call, ": ", status.ToString()));
}

}  // namespace

CollectionModel::CollectionModel(std::string name)
    : name_(std::move(name)), candidates_(1) {}

int64_t CollectionModel::return_floor() const {
  int64_t lowest = candidates_.front().return_floor;
  for (const State& s : candidates_) lowest = std::min(lowest, s.return_floor);
  return lowest;
}

bool CollectionModel::MayBeLive(uint64_t token) const {
  for (const State& s : candidates_) {
    if (s.live && s.last >= 0 && holdings_[s.last].token == token) return true;
  }
  return false;
}

uint64_t CollectionModel::LiveToken() const {
  const State& s = candidates_.front();
  if (!s.live || s.last < 0) return 0;
  const uint64_t token = holdings_[s.last].token;
  for (const State& other : candidates_) {
    if (!other.live || other.last != s.last) return 0;
  }
  return token;
}

std::string CollectionModel::Describe() const {
  std::vector<std::string> parts;
  for (const State& s : candidates_) {
    parts.push_back(absl::StrFormat(
        "%s max %d return_floor %d last %s%s%s", s.exists ? "row" : "no row",
        s.max, s.return_floor,
        s.last < 0 ? std::string("none")
                   : absl::StrFormat("%d-%d", holdings_[s.last].issued.low,
                                     holdings_[s.last].issued.high),
        s.live ? " live" : " retired", s.restored ? " given back" : ""));
  }
  return absl::StrCat(name_, ": ", absl::StrJoin(parts, " | or | "),
                      "; highest floor ", floor_high_);
}

// S3.
void CollectionModel::CheckMax(int64_t max, absl::string_view what) const {
  if (max < floor_high_) {
    Fail(absl::StrFormat("%s: Max %d is below the floor %d (%s)", what, max,
                         floor_high_, Describe()));
  }
  for (const Holding& h : holdings_) {
    if (h.owned_high >= h.issued.low && max < h.owned_high) {
      Fail(absl::StrFormat(
          "%s: Max %d is below %d, still owned by the holder of %d-%d (%s)",
          what, max, h.owned_high, h.issued.low, h.issued.high, Describe()));
    }
  }
}

std::optional<size_t> CollectionModel::Allocate(
    int64_t size, int64_t floor, uint64_t token,
    const absl::StatusOr<Range>& got, absl::string_view call) {
  if (size < 1 || floor < 0 || token == 0) {  // A3
    ExpectCode(got.status(), absl::StatusCode::kInvalidArgument, call);
    return std::nullopt;
  }
  const int64_t base = std::max(max(), floor);  // A1
  if (base > kInt64Max - size) {                // A2
    ExpectCode(got.status(), absl::StatusCode::kOutOfRange, call);
    return std::nullopt;
  }
  ExpectOk(got.status(), call);
  const Range want{base + 1, base + size};
  if (!(*got == want)) {
    Fail(absl::StrFormat("%s gave %d-%d; want %d-%d (%s)", call, got->low,
                         got->high, want.low, want.high, Describe()));
  }
  // S1, whatever A1 says.
  if (got->low < 1 || got->low <= floor_high_) {
    Fail(absl::StrFormat(
        "%s gave %d-%d: numbers at or below the floor %d (or below 1)", call,
        got->low, got->high, floor_high_));
  }
  for (const Holding& h : holdings_) {
    if (h.owned_high >= h.issued.low && got->low <= h.owned_high &&
        h.issued.low <= got->high) {
      Fail(absl::StrFormat(
          "%s gave %d-%d, issuing again numbers of %d-%d that its holder "
          "still owns (up to %d)",
          call, got->low, got->high, h.issued.low, h.issued.high,
          h.owned_high));
    }
  }
  const int index = static_cast<int>(holdings_.size());
  holdings_.push_back(Holding{*got, token, got->high, got->high, false});
  for (State& s : candidates_) {
    // R3: the state this range's whole return gives back.
    if (s.last >= 0 && base == holdings_[s.last].issued.high) {
      s.before[index] = Before{s.last, s.live, s.return_floor};
    }
    s.exists = true;
    s.max = got->high;
    s.return_floor = got->low - 1;
    s.last = index;
    s.live = true;
    s.restored = false;
  }
  return holdings_.size() - 1;
}

void CollectionModel::HolderReturns(size_t i, int64_t last) {
  Holding& h = holdings_[i];
  h.sent_return = true;
  h.used_high = std::min(h.used_high, last);
}

std::vector<CollectionModel::ReturnNext> CollectionModel::ReturnRule(
    const State& s, int64_t end, int64_t last, uint64_t token) const {
  if (token == 0) {  // R4
    if (!(s.exists && s.max == end && s.return_floor <= last)) {
      return {{false, s}};
    }
    State next = s;
    next.max = last;
    next.return_floor = last;
    next.live = false;
    next.restored = false;
    return {{true, next}};
  }
  // R1
  if (!(s.exists && s.last >= 0 && s.live && holdings_[s.last].token == token &&
        s.max == end && s.return_floor <= last)) {
    return {{false, s}};
  }
  State retired = s;  // R2
  retired.max = last;
  retired.return_floor = last;
  retired.live = false;
  retired.restored = false;
  const auto before = s.before.find(s.last);
  if (before == s.before.end()) return {{true, retired}};
  // R3 gives back the range before only while it may still come back: one
  // whose token was already retired stays retired, and the floor rises to
  // `last` (R2).
  if (!before->second.live) return {{true, retired}};
  State restored = s;  // R3
  restored.max = last;
  restored.last = before->second.last;
  restored.live = before->second.live;
  restored.return_floor = before->second.return_floor;
  restored.restored = true;
  const bool whole = last == holdings_[s.last].issued.low - 1;
  if (whole && !s.restored) return {{true, restored}};
  if (whole || last == s.return_floor) {
    return {{true, restored}, {true, retired}};
  }
  return {{true, retired}};
}

void CollectionModel::CheckHandBack(const Holding& h, int64_t end, int64_t last,
                                    absl::string_view call) const {
  if (last == end) return;  // nothing handed back
  if (last < h.issued.low - 1 || end > h.owned_high || last < h.used_high ||
      last < floor_high_) {
    Fail(absl::StrFormat(
        "%s applied, handing back %d-%d; its holder got %d-%d, owns up to "
        "%d, may use up to %d, and the highest floor is %d",
        call, last + 1, end, h.issued.low, h.issued.high, h.owned_high,
        h.used_high, floor_high_));
  }
}

void CollectionModel::Return(int64_t end, int64_t last, uint64_t token,
                             std::optional<size_t> sender,
                             const absl::StatusOr<ReturnOutcome>& got,
                             absl::string_view call) {
  if (last < 0 || last > end) {  // R5
    ExpectCode(got.status(), absl::StatusCode::kInvalidArgument, call);
    return;
  }
  ExpectOk(got.status(), call);
  std::vector<State> kept;
  bool may_apply = false;
  bool may_refuse = false;
  for (const State& s : candidates_) {
    for (ReturnNext& next : ReturnRule(s, end, last, token)) {
      (next.applied ? may_apply : may_refuse) = true;
      if (next.applied == got->applied && next.state.max == got->max) {
        if (std::find(kept.begin(), kept.end(), next.state) == kept.end()) {
          kept.push_back(std::move(next.state));
        }
      }
    }
  }
  if (kept.empty()) {
    Fail(absl::StrFormat("%s gave applied=%d max %d; want %s with max %d (%s)",
                         call, got->applied, got->max,
                         may_apply && may_refuse ? "either"
                         : may_apply             ? "applied"
                                                 : "refused",
                         got->applied ? last : max(), Describe()));
  }
  if (got->applied) {
    // S2: only the holder of the range the token names hands its numbers
    // back; without a token, the holder that sent it.
    size_t holder = holdings_.size();
    if (token == 0 && sender.has_value()) holder = *sender;
    for (size_t i = 0; token != 0 && i < holdings_.size(); ++i) {
      if (holdings_[i].token == token) holder = i;
    }
    if (holder == holdings_.size() || !holdings_[holder].sent_return) {
      Fail(absl::StrFormat("%s applied, but no holder of that range sent it",
                           call));
    }
    CheckHandBack(holdings_[holder], end, last, call);
    Holding& h = holdings_[holder];
    h.owned_high = std::min(h.owned_high, last);
  }
  CheckMax(got->max, call);
  candidates_ = std::move(kept);
}

void CollectionModel::SetFloor(int64_t floor,
                               const absl::StatusOr<FloorOutcome>& got,
                               absl::string_view call) {
  if (floor < 0) {
    ExpectCode(got.status(), absl::StatusCode::kInvalidArgument, call);
    return;
  }
  ExpectOk(got.status(), call);
  const bool raises = floor > max();  // F1
  const int64_t want_max = std::max(max(), floor);
  if (got->raised != raises || got->max != want_max) {
    Fail(absl::StrFormat("%s gave raised=%d max %d; want raised=%d max %d (%s)",
                         call, got->raised, got->max, raises, want_max,
                         Describe()));
  }
  floor_high_ = std::max(floor_high_, floor);
  CheckMax(got->max, call);
  std::vector<State> kept;
  for (State s : candidates_) {
    s.exists = true;
    s.max = want_max;
    s.return_floor = std::max(s.return_floor, floor);
    for (auto& [index, before] : s.before) {
      before.return_floor = std::max(before.return_floor, floor);
    }
    if (raises) s.live = false;
    if (std::find(kept.begin(), kept.end(), s) == kept.end()) {
      kept.push_back(std::move(s));
    }
  }
  candidates_ = std::move(kept);
}

void CollectionModel::Delete(const absl::StatusOr<CollectionState>& got,
                             absl::string_view call) {
  // D1: every candidate agrees on existence, Max, and (after CheckStored)
  // on the return floor.
  const State& s = candidates_.front();
  if (!s.exists) {
    ExpectCode(got.status(), absl::StatusCode::kNotFound, call);
    return;
  }
  if (s.max != 0 || return_floor() != 0) {
    ExpectCode(got.status(), absl::StatusCode::kFailedPrecondition, call);
    return;
  }
  ExpectOk(got.status(), call);
  if (got->max != 0 || got->return_floor != 0) {
    Fail(absl::StrFormat("%s gave a deleted row of max %d return_floor %d",
                         call, got->max, got->return_floor));
  }
  candidates_.assign(1, State{});
}

void CollectionModel::CheckStored(
    const absl::StatusOr<std::optional<CollectionState>>& row,
    absl::string_view when) {
  if (!row.ok()) {
    Fail(absl::StrCat(when, ": Get(", name_, "): ", row.status().ToString()));
  }
  std::vector<State> kept;
  for (const State& s : candidates_) {
    if (row->has_value() != s.exists) continue;
    if (s.exists &&
        ((*row)->max != s.max || (*row)->return_floor != s.return_floor)) {
      continue;
    }
    kept.push_back(s);
  }
  if (kept.empty()) {
    Fail(absl::StrFormat(
        "%s: %s stores %s; want %s", when, name_,
        row->has_value() ? absl::StrFormat("max %d return_floor %d",
                                           (*row)->max, (*row)->return_floor)
                         : std::string("no row"),
        Describe()));
  }
  if (row->has_value()) CheckMax((*row)->max, when);
  candidates_ = std::move(kept);
}

}  // namespace hilo::fuzz
