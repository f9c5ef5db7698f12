#include "service/store/sqlite/sqlite_held_rows.h"

#include <algorithm>
#include <utility>

#include "service/store/collection_rules.h"

namespace hilo {
namespace internal {

void SqliteHeldRows::Row::Set(std::optional<CollectionState> row) {
  Entry& entry = slot_->second;
  if (!entry.stored.has_value()) entry.stored.emplace(entry.row);
  entry.row = std::move(row);
  if (!entry.in_batch) {
    entry.in_batch = true;
    rows_->batch_.push_back(slot_);
  }
}

absl::StatusOr<int64_t> SqliteHeldRows::Row::RetiredMax() {
  Entry& entry = slot_->second;
  if (!entry.retired_max.has_value()) {
    if (rows_->load_retired_ == nullptr) return 0;
    absl::StatusOr<int64_t> loaded = rows_->load_retired_(slot_->first);
    if (!loaded.ok()) return loaded.status();
    entry.retired_max = *loaded;
    if (!entry.in_batch) {  // forgotten when the batch ends
      entry.in_batch = true;
      rows_->batch_.push_back(slot_);
    }
  }
  return *entry.retired_max;
}

void SqliteHeldRows::Row::Retire() {
  Entry& entry = slot_->second;
  const int64_t max = hilo::RetiredMax(*entry.row);
  // The file may hold a lower one (the row started above it); the writer
  // keeps the higher.
  entry.retired_max = std::max(entry.retired_max.value_or(0), max);
  entry.retired = true;
  Set(std::nullopt);
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
    if (!it->second.row.has_value()) {
      // Not held past the batch: a row the file does not have.
      it->second.in_batch = true;
      batch_.push_back(&*it);
    }
  }
  return Row(this, &*it);
}

std::vector<SqliteHeldRows::Change> SqliteHeldRows::Changes() const {
  std::vector<Change> changes;
  for (Map::value_type* slot : batch_) {
    const Entry& entry = slot->second;
    if (!entry.stored.has_value()) continue;  // read, never changed
    std::optional<int64_t> retired_max;
    if (entry.retired) retired_max = entry.retired_max;
    if (!entry.row.has_value() && !entry.stored->has_value() &&
        !retired_max.has_value()) {
      continue;
    }
    changes.push_back(
        Change{slot->first, &entry.row, retired_max, &*entry.stored});
  }
  return changes;
}

int64_t SqliteHeldRows::Commit() { return EndBatch(/*keep=*/true); }

void SqliteHeldRows::Abort() { EndBatch(/*keep=*/false); }

int64_t SqliteHeldRows::EndBatch(bool keep) {
  int64_t created = 0;
  for (Map::value_type* slot : batch_) {
    Entry& entry = slot->second;
    if (entry.stored.has_value()) {
      if (keep) {
        created += static_cast<int>(entry.row.has_value()) -
                   static_cast<int>(entry.stored->has_value());
      } else {
        entry.row = *std::move(entry.stored);
      }
      entry.stored.reset();
    }
    entry.in_batch = false;
    entry.retired_max.reset();
    entry.retired = false;
  }
  // Erased only now: `batch_` points into the map.
  for (Map::value_type* slot : batch_) {
    if (!slot->second.row.has_value()) rows_.erase(rows_.find(slot->first));
  }
  batch_.clear();
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
