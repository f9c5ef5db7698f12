#include "service/store/sqlite/sqlite_judges.h"

#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "service/store/collection_rules.h"
#include "service/store/store_arguments.h"

namespace hilo {
namespace internal {
namespace {

// The row as the batch sees it, or the one a new row starts from.
absl::StatusOr<CollectionState> StartOf(SqliteHeldRows::Row& row) {
  if (row.get().has_value()) return *row.get();
  absl::StatusOr<int64_t> retired_max = row.RetiredMax();
  if (!retired_max.ok()) return retired_max.status();
  return StartAfterRetirement(*retired_max);
}

}  // namespace

absl::Status JudgeAllocate(SqliteHeldRows& rows, absl::string_view name,
                           int64_t size, int64_t floor, int64_t max_floor_jump,
                           uint64_t token, absl::Time now, Allocation* out,
                           bool may_create) {
  absl::StatusOr<SqliteHeldRows::Row> row = rows.Find(name);
  if (!row.ok()) return row.status();
  if (!row->get().has_value() && !may_create) return NoRowRefusal(name);
  absl::StatusOr<CollectionState> start = StartOf(*row);
  if (!start.ok()) return start.status();
  absl::StatusOr<CollectionState> next = ApplyAllocate(
      name, *start, size, floor, max_floor_jump, token, now, &out->range);
  if (!next.ok()) return next.status();
  out->created = !row->get().has_value();
  row->Set(*std::move(next));
  return absl::OkStatus();
}

absl::Status JudgeReturn(SqliteHeldRows& rows, absl::string_view name,
                         int64_t end, int64_t last, uint64_t token,
                         absl::Time now, ReturnOutcome* out) {
  absl::StatusOr<SqliteHeldRows::Row> row = rows.Find(name);
  if (!row.ok()) return row.status();
  if (!row->get().has_value()) {
    *out = ReturnOutcome{false, 0};
    return absl::OkStatus();
  }
  std::optional<CollectionState> next =
      ApplyReturn(*row->get(), end, last, token, now, out);
  if (next.has_value()) row->Set(*std::move(next));
  return absl::OkStatus();
}

absl::Status JudgeReturnMany(const std::vector<ReturnItem>& items,
                             SqliteHeldRows& rows, absl::Time now,
                             std::vector<absl::StatusOr<ReturnOutcome>>* out) {
  out->clear();
  out->reserve(items.size());
  for (const ReturnItem& item : items) {
    if (absl::Status s = CheckReturnArguments(item.end, item.last); !s.ok()) {
      out->push_back(std::move(s));
      continue;
    }
    ReturnOutcome outcome;
    absl::Status s;
    if (item.foreign) {
      absl::StatusOr<SqliteHeldRows::Row> row = rows.Find(item.collection);
      s = row.status();
      if (row.ok()) outcome.max = row->get().has_value() ? row->get()->max : 0;
    } else {
      s = JudgeReturn(rows, item.collection, item.end, item.last, item.token,
                      now, &outcome);
    }
    if (s.ok()) {
      out->push_back(outcome);
    } else {
      out->push_back(std::move(s));
    }
  }
  return absl::OkStatus();
}

absl::Status JudgeSetFloor(SqliteHeldRows& rows, absl::string_view name,
                           int64_t floor, absl::Time now, FloorOutcome* out) {
  absl::StatusOr<SqliteHeldRows::Row> row = rows.Find(name);
  if (!row.ok()) return row.status();
  const bool had_row = row->get().has_value();
  absl::StatusOr<CollectionState> start = StartOf(*row);
  if (!start.ok()) return start.status();
  std::optional<CollectionState> next = ApplySetFloor(*start, floor, now, out);
  if (!next.has_value() && had_row) return absl::OkStatus();
  out->created = !had_row;
  if (!next.has_value()) {
    next = *start;
    next->updated_at = now;
  }
  row->Set(*std::move(next));
  return absl::OkStatus();
}

absl::Status JudgeDelete(SqliteHeldRows& rows, absl::string_view name,
                         CollectionState* deleted) {
  absl::StatusOr<SqliteHeldRows::Row> row = rows.Find(name);
  if (!row.ok()) return row.status();
  if (!row->get().has_value()) {
    return absl::NotFoundError(absl::StrFormat(
        "collection \"%s\" has no row; there is nothing to delete", name));
  }
  if (absl::Status s = CheckDeletable(name, *row->get()); !s.ok()) return s;
  *deleted = *row->get();
  row->Set(std::nullopt);
  return absl::OkStatus();
}

absl::Status JudgeRetire(SqliteHeldRows& rows, absl::string_view name,
                         CollectionState* retired) {
  absl::StatusOr<SqliteHeldRows::Row> row = rows.Find(name);
  if (!row.ok()) return row.status();
  if (!row->get().has_value()) {
    return absl::NotFoundError(absl::StrFormat(
        "collection \"%s\" has no row; there is nothing to retire", name));
  }
  *retired = *row->get();
  row->Retire();
  return absl::OkStatus();
}

absl::Status JudgePut(SqliteHeldRows& rows, absl::string_view name,
                      const CollectionState& state) {
  absl::StatusOr<SqliteHeldRows::Row> row = rows.Find(name);
  if (!row.ok()) return row.status();
  row->Set(state);
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace hilo
