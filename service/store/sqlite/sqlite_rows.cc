// SqliteRangeStore's reads on its reading connection: a row of table
// `collections`, and a page of rows, as CollectionStates. (The batch writer
// reads and writes rows on the writing connection: sqlite_batch_writer.cc;
// both decode a row with sqlite_row_codec.h.)
#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "service/store/sqlite/sqlite_row_codec.h"
#include "service/store/sqlite/sqlite_statement.h"

namespace hilo {

absl::StatusOr<std::optional<CollectionState>> SqliteRangeStore::ReadRow(
    sqlite3* db, internal::SqliteStatement& select,
    absl::string_view collection) {
  sqlite3_stmt* stmt = select.get();
  sqlite3_bind_text(stmt, 1, collection.data(),
                    static_cast<int>(collection.size()), SQLITE_STATIC);
  const int rc = sqlite3_step(stmt);
  std::optional<CollectionState> state;
  if (rc == SQLITE_ROW) state = internal::ReadCollectionColumns(stmt, 0);
  select.Reset();
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    return ErrorOn(db, rc,
                   absl::StrCat("reading collection \"", collection, "\""));
  }
  return state;
}

absl::Status SqliteRangeStore::ReadRows(
    sqlite3* db, internal::SqliteStatement& list, absl::string_view after,
    int limit, std::vector<NamedCollectionState>* result) {
  result->clear();
  sqlite3_stmt* stmt = list.get();
  sqlite3_bind_text(stmt, 1, after.data(), static_cast<int>(after.size()),
                    SQLITE_STATIC);
  sqlite3_bind_int(stmt, 2, limit);
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    NamedCollectionState row;
    row.name.assign(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)),
                    sqlite3_column_bytes(stmt, 0));
    row.state = internal::ReadCollectionColumns(stmt, 1);
    result->push_back(std::move(row));
  }
  list.Reset();
  if (rc != SQLITE_DONE) return ErrorOn(db, rc, "listing collections");
  return absl::OkStatus();
}

}  // namespace hilo
