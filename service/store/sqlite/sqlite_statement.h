// What the parts of SqliteRangeStore share: its prepared statements and the
// SQL that reads a collection's row. The store is split by responsibility:
// sqlite_range_store.cc opens the file and queues the operations,
// sqlite_batch_writer.cc runs a batch of writes in one transaction (judged
// by sqlite_judges.cc on the rows sqlite_held_rows.cc holds), and
// sqlite_rows.cc reads rows for Get and List.
//
// Private to store/sqlite/.
#ifndef HILO_SERVICE_STORE_SQLITE_SQLITE_STATEMENT_H_
#define HILO_SERVICE_STORE_SQLITE_SQLITE_STATEMENT_H_

#include <sqlite3.h>

namespace hilo {
namespace internal {

// A collection's row, and a page of rows after a name.
inline constexpr char kSelectRow[] =
    "SELECT max, return_floor, updated_at_us, range_token, previous_token, "
    "previous_return_floor FROM collections WHERE name=?1";
inline constexpr char kSelectRows[] =
    "SELECT name, max, return_floor, updated_at_us, range_token, "
    "previous_token, previous_return_floor FROM collections WHERE name > ?1 "
    "ORDER BY name LIMIT ?2";

// A prepared statement, reset and unbound after each use.
class SqliteStatement {
 public:
  explicit SqliteStatement(sqlite3_stmt* stmt) : stmt_(stmt) {}
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  ~SqliteStatement() { sqlite3_finalize(stmt_); }
  sqlite3_stmt* get() const { return stmt_; }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

 private:
  sqlite3_stmt* const stmt_;
};

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_SQLITE_SQLITE_STATEMENT_H_
