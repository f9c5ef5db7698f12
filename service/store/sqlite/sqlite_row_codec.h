// A row of table `collections` as a CollectionState: the columns max,
// return_floor, updated_at_us, range_token, previous_token and
// previous_return_floor, in that order, in a statement's result or its
// parameters. Private to store/sqlite/.
#ifndef HILO_SERVICE_STORE_SQLITE_SQLITE_ROW_CODEC_H_
#define HILO_SERVICE_STORE_SQLITE_SQLITE_ROW_CODEC_H_

#include <sqlite3.h>

#include "service/store/range_store.h"

namespace hilo {
namespace internal {

// The six columns from result column `first` on of `stmt`'s current row.
inline CollectionState ReadCollectionColumns(sqlite3_stmt* stmt, int first) {
  CollectionState state;
  state.max = sqlite3_column_int64(stmt, first);
  state.return_floor = sqlite3_column_int64(stmt, first + 1);
  state.updated_at =
      absl::FromUnixMicros(sqlite3_column_int64(stmt, first + 2));
  state.range_token =
      static_cast<uint64_t>(sqlite3_column_int64(stmt, first + 3));
  state.previous_token =
      static_cast<uint64_t>(sqlite3_column_int64(stmt, first + 4));
  state.previous_return_floor = sqlite3_column_int64(stmt, first + 5);
  return state;
}

// Binds the six columns to parameters `first` (1-based) on of `stmt`.
inline void BindCollectionColumns(sqlite3_stmt* stmt, int first,
                                  const CollectionState& state) {
  sqlite3_bind_int64(stmt, first, state.max);
  sqlite3_bind_int64(stmt, first + 1, state.return_floor);
  sqlite3_bind_int64(stmt, first + 2, absl::ToUnixMicros(state.updated_at));
  sqlite3_bind_int64(stmt, first + 3, static_cast<int64_t>(state.range_token));
  sqlite3_bind_int64(stmt, first + 4,
                     static_cast<int64_t>(state.previous_token));
  sqlite3_bind_int64(stmt, first + 5, state.previous_return_floor);
}

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_SQLITE_SQLITE_ROW_CODEC_H_
