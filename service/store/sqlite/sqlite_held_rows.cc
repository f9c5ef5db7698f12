#include "service/store/sqlite/sqlite_held_rows.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "service/store/collection_rules.h"

namespace hilo {
namespace internal {

void SqliteHeldRows::Row::Set(std::optional<CollectionState> row) {
  Touched& touched = rows_->Touch(slot_);
  if (!touched.stored.has_value()) touched.stored.emplace(slot_->second.row);
  slot_->second.row = std::move(row);
}

absl::StatusOr<int64_t> SqliteHeldRows::Row::RetiredMax() {
  if (const uint32_t index = slot_->second.touched; index != kNotTouched) {
    const std::optional<int64_t>& known = rows_->batch_[index].retired_max;
    if (known.has_value()) return *known;  // read or retired in the batch
  }
  if (rows_->load_retired_ == nullptr) return 0;
  absl::StatusOr<int64_t> loaded = rows_->load_retired_(slot_->first);
  if (!loaded.ok()) return loaded.status();
  // Kept until the batch ends.
  return *(rows_->Touch(slot_).retired_max = *loaded);
}

void SqliteHeldRows::Row::Retire() {
  Touched& touched = rows_->Touch(slot_);
  const int64_t max = hilo::RetiredMax(*slot_->second.row);
  // The file may hold a lower one (the row started above it); the writer
  // keeps the higher.
  touched.retired_max = std::max(touched.retired_max.value_or(0), max);
  touched.retired = true;
  Set(std::nullopt);
}

SqliteHeldRows::Touched& SqliteHeldRows::Touch(Map::value_type* slot) {
  if (changes_taken_) TouchedAfterChanges();
  uint32_t& index = slot->second.touched;
  if (index == kNotTouched) {
    // Indexed only once the record exists.
    batch_.emplace_back().slot = slot;
    index = static_cast<uint32_t>(batch_.size() - 1);
  }
  return batch_[index];
}

void SqliteHeldRows::TouchedAfterChanges() {
  // The caller holds pointers into batch_ that this Touch could move, and
  // would write a list that no longer matches the rows: a wrong row in the
  // file could hand out a number twice, so stop before anything is written.
  std::fprintf(stderr,
               "SqliteHeldRows: a row touched after Changes() in the same "
               "batch\n");
  std::abort();
}

SqliteHeldRows::SqliteHeldRows(Loader load, size_t max_rows,
                               RetiredLoader load_retired)
    : load_(std::move(load)),
      load_retired_(std::move(load_retired)),
      max_rows_(max_rows) {}

absl::StatusOr<SqliteHeldRows::Row> SqliteHeldRows::Find(
    absl::string_view name) {
  Map::iterator it = rows_.find(std::string_view(name.data(), name.size()));
  if (it == rows_.end()) {
    absl::StatusOr<std::optional<CollectionState>> loaded = load_(name);
    if (!loaded.ok()) return loaded.status();
    Entry entry;
    entry.row = *std::move(loaded);
    it = rows_.emplace(std::string(name), std::move(entry)).first;
    // Not held past the batch: a row the file does not have.
    if (!it->second.row.has_value()) Touch(&*it);
  }
  return Row(this, &*it);
}

std::vector<SqliteHeldRows::Change> SqliteHeldRows::Changes() {
  changes_taken_ = true;
  std::vector<Change> changes;
  for (const Touched& touched : batch_) {
    if (!touched.stored.has_value()) continue;  // read, never changed
    const Entry& entry = touched.slot->second;
    std::optional<int64_t> retired_max;
    if (touched.retired) retired_max = touched.retired_max;
    if (!entry.row.has_value() && !touched.stored->has_value() &&
        !retired_max.has_value()) {
      continue;
    }
    changes.push_back(
        Change{touched.slot->first, &entry.row, retired_max, &*touched.stored});
  }
  return changes;
}

int64_t SqliteHeldRows::Commit() { return EndBatch(/*keep=*/true); }

void SqliteHeldRows::Abort() { EndBatch(/*keep=*/false); }

int64_t SqliteHeldRows::EndBatch(bool keep) {
  int64_t created = 0;
  for (Touched& touched : batch_) {
    Entry& entry = touched.slot->second;
    if (touched.stored.has_value()) {
      if (keep) {
        created += static_cast<int>(entry.row.has_value()) -
                   static_cast<int>(touched.stored->has_value());
      } else {
        entry.row = *std::move(touched.stored);
      }
    }
    entry.touched = kNotTouched;
  }
  // Erased only now: `batch_` points into the map.
  for (const Touched& touched : batch_) {
    if (!touched.slot->second.row.has_value()) {
      rows_.erase(rows_.find(touched.slot->first));
    }
  }
  // Kept for the next batch up to a bound: a batch of many ReturnRanges of
  // 1000 names each can touch hundreds of thousands of rows, and their
  // records (about 100 bytes each) are not held after it.
  if (batch_.capacity() > kKeptBatchCapacity) {
    std::vector<Touched>().swap(batch_);
  } else {
    batch_.clear();
  }
  changes_taken_ = false;
  Evict();
  return created;
}

void SqliteHeldRows::Evict() {
  if (rows_.size() <= max_rows_) return;
  // Any row held is as the file holds it: dropping some costs a read each
  // when next needed. A quarter goes at once, so this runs rarely.
  const size_t keep = max_rows_ - max_rows_ / 4;
  for (Map::iterator it = rows_.begin();
       it != rows_.end() && rows_.size() > keep;) {
    rows_.erase(it++);
  }
}

}  // namespace internal
}  // namespace hilo
