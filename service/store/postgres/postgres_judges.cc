#include "service/store/postgres/postgres_judges.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "service/store/collection_rules.h"
#include "service/store/store_arguments.h"

namespace hilo {
namespace internal {

absl::Status JudgeAllocate(PostgresBatch& batch, absl::string_view name,
                           int64_t size, int64_t floor, int64_t max_floor_jump,
                           uint64_t token, absl::Time now, bool may_create,
                           Allocation* out) {
  PostgresBatch::Row& row = batch.rows[std::string(name)];
  if (!row.now.has_value() && !may_create) return NoRowRefusal(name);
  absl::StatusOr<CollectionState> next = ApplyAllocate(
      name, row.now.value_or(StartAfterRetirement(row.retired_max)), size,
      floor, max_floor_jump, token, now, &out->range);
  if (!next.ok()) return next.status();
  out->created = !row.now.has_value();
  row.now = *std::move(next);
  row.dirty = true;
  return absl::OkStatus();
}

absl::Status JudgeReturn(PostgresBatch& batch, absl::string_view name,
                         int64_t end, int64_t last, uint64_t token,
                         absl::Time now, ReturnOutcome* out) {
  PostgresBatch::Row& row = batch.rows[std::string(name)];
  if (!row.now.has_value()) {
    *out = ReturnOutcome{false, 0};
    return absl::OkStatus();
  }
  std::optional<CollectionState> next =
      ApplyReturn(*row.now, end, last, token, now, out);
  if (next.has_value()) {
    row.now = *std::move(next);
    row.dirty = true;
  }
  return absl::OkStatus();
}

int JudgeReturnMany(PostgresBatch& batch, const std::vector<ReturnItem>& items,
                    absl::Time now, absl::Duration lock_timeout,
                    std::vector<absl::StatusOr<ReturnOutcome>>* out) {
  out->clear();
  int locked = 0;
  for (const ReturnItem& item : items) {
    if (absl::Status s = CheckReturnArguments(item.end, item.last); !s.ok()) {
      out->push_back(std::move(s));
      continue;
    }
    if (batch.held.count(item.collection) > 0) {
      ++locked;
      out->push_back(LockedRowError(
          item.collection, batch.creating_elsewhere.count(item.collection) > 0,
          lock_timeout));
      continue;
    }
    auto it = batch.rows.find(item.collection);
    const bool has_row = it != batch.rows.end() && it->second.now.has_value();
    if (item.foreign || !has_row) {
      out->push_back(ReturnOutcome{false, has_row ? it->second.now->max : 0});
      continue;
    }
    ReturnOutcome outcome;
    JudgeReturn(batch, item.collection, item.end, item.last, item.token, now,
                &outcome)
        .IgnoreError();  // always OK
    out->push_back(outcome);
  }
  return locked;
}

absl::Status JudgeSetFloor(PostgresBatch& batch, absl::string_view name,
                           int64_t floor, absl::Time now, FloorOutcome* out) {
  PostgresBatch::Row& row = batch.rows[std::string(name)];
  const bool had_row = row.now.has_value();
  const CollectionState start =
      row.now.value_or(StartAfterRetirement(row.retired_max));
  std::optional<CollectionState> next = ApplySetFloor(start, floor, now, out);
  if (!next.has_value() && had_row) return absl::OkStatus();
  out->created = !had_row;
  if (!next.has_value()) {
    next = start;
    next->updated_at = now;
  }
  row.now = *std::move(next);
  row.dirty = true;
  return absl::OkStatus();
}

absl::Status JudgeDelete(PostgresBatch& batch, absl::string_view name,
                         CollectionState* deleted) {
  PostgresBatch::Row& row = batch.rows[std::string(name)];
  if (!row.now.has_value()) {
    return absl::NotFoundError(absl::StrFormat(
        "collection \"%s\" has no row; there is nothing to delete", name));
  }
  if (absl::Status s = CheckDeletable(name, *row.now); !s.ok()) return s;
  *deleted = *row.now;
  row.now.reset();
  row.dirty = true;
  return absl::OkStatus();
}

absl::Status JudgeRetire(PostgresBatch& batch, absl::string_view name,
                         CollectionState* retired) {
  PostgresBatch::Row& row = batch.rows[std::string(name)];
  if (!row.now.has_value()) {
    return absl::NotFoundError(absl::StrFormat(
        "collection \"%s\" has no row; there is nothing to retire", name));
  }
  *retired = *row.now;
  row.retired_max = std::max(row.retired_max, RetiredMax(*row.now));
  row.retired = true;
  row.now.reset();
  row.dirty = true;
  return absl::OkStatus();
}

absl::Status JudgePut(PostgresBatch& batch, absl::string_view name,
                      const CollectionState& state) {
  PostgresBatch::Row& row = batch.rows[std::string(name)];
  row.now = state;
  row.dirty = true;
  return absl::OkStatus();
}

std::optional<CollectionState> JudgeGet(const PostgresBatch& batch,
                                        absl::string_view name) {
  auto it = batch.rows.find(std::string(name));
  return it != batch.rows.end() ? it->second.now : std::nullopt;
}

bool CreatesRowWhenNone(const PostgresRequest& r, int64_t retired_max) {
  if (!r.creates()) return false;
  // SetFloor and Put make a row whatever they carry.
  if (r.kind != PostgresRequest::Kind::kAllocate) return true;
  Range range;
  return ApplyAllocate(r.name, StartAfterRetirement(retired_max), r.size,
                       r.floor, r.max_floor_jump, r.token, absl::UnixEpoch(),
                       &range)
      .ok();
}

absl::Status LockedRowError(absl::string_view collection, bool creating,
                            absl::Duration lock_timeout) {
  if (creating) {
    return absl::UnavailableError(absl::StrFormat(
        "collection \"%s\" is being created by another session of the "
        "database (another hilo server inside its transaction) for more "
        "than %s; nothing was changed",
        collection, absl::FormatDuration(lock_timeout)));
  }
  return absl::UnavailableError(absl::StrFormat(
      "collection \"%s\" is locked by another session of the database "
      "(another hilo server inside its transaction, or a session holding "
      "its row) for more than %s; nothing was changed",
      collection, absl::FormatDuration(lock_timeout)));
}

}  // namespace internal
}  // namespace hilo
