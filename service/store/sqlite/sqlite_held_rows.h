// SqliteHeldRows: the rows of table `collections` the SQLite store holds in
// memory, and what the batch being judged does to them (and to the Max of
// retired names, table `retired_collections`, which it reads when a batch
// needs it and never holds past the batch).
//
// The store is the only writer of its file (SqliteFileGuard locks it), so
// a row it has read or written stays as it left it: it never needs asking
// SQLite twice. A batch reads each row it touches from here (from the file
// through `load` the first time), judges every operation on these rows in
// memory, and writes each changed row once; then Commit() makes the
// batch's rows the held ones, or Abort() puts back what the file still
// holds, so a failed COMMIT changes nothing here either.
//
//   SqliteHeldRows rows(load, /*max_rows=*/1 << 17);
//   absl::StatusOr<SqliteHeldRows::Row> row = rows.Find("orders");
//   if (row.ok()) row->Set(next);          // the batch's view of "orders"
//   for (const SqliteHeldRows::Change& c : rows.Changes()) Write(c);
//   ok ? rows.Commit() : rows.Abort();
//
// Holds at most max_rows rows between batches (any it drops is read again
// when next needed), plus those a batch touches. A row the file does not
// have is held only while a batch touches it. Not thread-safe: one batch
// at a time, on one thread at a time (the SQLite store's batch writer).
#ifndef HILO_SERVICE_STORE_SQLITE_SQLITE_HELD_ROWS_H_
#define HILO_SERVICE_STORE_SQLITE_SQLITE_HELD_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/store/range_store.h"

namespace hilo {
namespace internal {

class SqliteHeldRows {
 public:
  // Reads a row from the file: nullopt if it has none. Called inside the
  // batch's transaction, before the batch wrote anything.
  using Loader = std::function<absl::StatusOr<std::optional<CollectionState>>(
      absl::string_view name)>;
  // Reads the Max a name was retired at from the file: 0 if never retired.
  // Called inside the batch's transaction, before the batch wrote anything.
  using RetiredLoader =
      std::function<absl::StatusOr<int64_t>(absl::string_view name)>;

 private:
  // What is held of one name. Only the row: a node of the map is kept for
  // each row held between batches (up to max_rows), so what a batch needs
  // besides lives in its Touched record.
  struct Entry {
    // The row as the batch leaves it so far (as the file holds it, outside
    // a batch); nullopt: no row.
    std::optional<CollectionState> row;
    // Its record in batch_; kNotTouched outside a batch, or if the batch
    // has not touched it.
    uint32_t touched = kNotTouched;
  };
  static constexpr uint32_t kNotTouched = ~uint32_t{0};
  // Ordered, not hashed: the names come from callers, and a hash with a
  // fixed seed (std::hash) lets one precompute names that share a bucket,
  // so that a batch of them costs quadratic time on the one write path
  // (a reviewer measured 270 times slower at 8,000 names). A tree costs
  // O(log n) whatever the names. Looked up by string_view, without a
  // std::string per lookup. Nodes: Row and batch_ point into it, and stay
  // valid as it grows.
  using Map = std::map<std::string, Entry, std::less<>>;
  // An entry the batch touched: read from the file without a row, or
  // changed, or its retired Max read.
  struct Touched {
    Map::value_type* slot = nullptr;
    // Set once the batch changes the row: the row as the file holds it.
    std::optional<std::optional<CollectionState>> stored;
    // The name's retired Max as the batch leaves it so far, once read or
    // retired in the batch.
    std::optional<int64_t> retired_max;
    // The batch retired the row: retired_max is to be written.
    bool retired = false;
  };

 public:
  // One row, as the batch being judged sees it. Valid until the batch's
  // Commit or Abort.
  class Row {
   public:
    // nullopt: the collection has no row.
    const std::optional<CollectionState>& get() const {
      return slot_->second.row;
    }
    // The row as the batch leaves it; nullopt deletes it.
    void Set(std::optional<CollectionState> row);
    // The Max the name was retired at (0: never), as the batch leaves it;
    // read from the file the first time, the loader's error if that fails.
    absl::StatusOr<int64_t> RetiredMax();
    // Removes the row (which must exist) and keeps its RetiredMax as the
    // name's retired Max, the higher of the two if the name was retired
    // before.
    void Retire();

   private:
    friend class SqliteHeldRows;
    Row(SqliteHeldRows* rows, Map::value_type* slot)
        : rows_(rows), slot_(slot) {}
    SqliteHeldRows* rows_;
    Map::value_type* slot_;
  };

  // A row the batch changed, to be written: `row` nullopt deletes it;
  // `retired_max`, if set, is to be kept as the name's retired Max;
  // `stored` is the row as the file holds it (nullopt: none).
  struct Change {
    absl::string_view name;
    const std::optional<CollectionState>* row;
    std::optional<int64_t> retired_max;
    const std::optional<CollectionState>* stored;
  };

  // `load_retired` null: no name was ever retired.
  SqliteHeldRows(Loader load, size_t max_rows,
                 RetiredLoader load_retired = nullptr);
  SqliteHeldRows(const SqliteHeldRows&) = delete;
  SqliteHeldRows& operator=(const SqliteHeldRows&) = delete;

  // The row `name`, read through the loader if it is not held; the
  // loader's error if that read fails (and nothing is held for it).
  absl::StatusOr<Row> Find(absl::string_view name);

  // The rows the batch changed, each once, in the order first changed;
  // a row created and deleted again within the batch is not among them,
  // unless it was retired. Called once the batch is judged: its pointers
  // hold until Commit or Abort. A Find or Row call that would touch a row
  // between them aborts the process (it could move the records the
  // pointers name, or change a row the list has already left out).
  std::vector<Change> Changes();

  // The batch's changes are in the file: they become the held rows.
  // Returns the rows it created less those it deleted.
  int64_t Commit();
  // Nothing of the batch is in the file: the rows go back to what it holds.
  void Abort();

  // Rows held (outside a batch, each one the file holds).
  size_t size() const { return rows_.size(); }

 private:
  // Ends the batch; `keep` chooses the batch's rows over the stored ones.
  int64_t EndBatch(bool keep);
  // The batch's record of `slot`, made if it has none.
  Touched& Touch(Map::value_type* slot);
  [[noreturn]] static void TouchedAfterChanges();
  void Evict();

  const Loader load_;
  const RetiredLoader load_retired_;
  const size_t max_rows_;
  Map rows_;
  // The entries the batch touched, in the order first touched. A vector
  // that keeps its capacity from batch to batch, so that a batch allocates
  // nothing here once one as large came before (a deque, whose records
  // never move, allocates and frees a block every few records). Records
  // move as it grows, so Changes() comes after the last Touch (checked:
  // a Touch after it aborts). A batch larger than kKeptBatchCapacity gives
  // its memory back when it ends.
  std::vector<Touched> batch_;
  static constexpr size_t kKeptBatchCapacity = 4096;
  // Changes() was called in this batch: no Touch until it ends.
  bool changes_taken_ = false;
};

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_SQLITE_SQLITE_HELD_ROWS_H_
