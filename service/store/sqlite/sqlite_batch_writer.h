// SqliteBatchWriter: the SQLite store's write path, a batch at a time.
//
// GroupCommit hands the writer a batch of writes; the writer runs it in
// one transaction on the writing connection:
//
//   BEGIN IMMEDIATE
//   judge every write, in order, on the rows held in memory
//       (sqlite_judges.h; a row not held yet is read from the file)
//   plan the ceilings (sqlite_reservations.h): rows that rise past theirs
//       get new ones, and only then does the COMMIT wait for the disk
//   write each row the batch changed, once (an UPSERT, or a DELETE)
//   COMMIT
//
// and only then does GroupCommit call the completions. The rules it keeps:
//  - No write is reported applied unless the COMMIT that holds it
//    succeeded: a failed write of a row, a file found lost, or a failed
//    COMMIT fails every write of the batch that had not failed on its own,
//    and the rows held go back to what the file holds (SqliteHeldRows::
//    Abort), so the next batch judges on what is on disk.
//  - A write the rules refuse (or whose row cannot be read) fails alone
//    and changes nothing; the rest of its batch commits.
//  - If SQLite ends the transaction itself (some I/O errors do), nothing
//    of the batch was applied, and every write of it fails.
// Holding the rows is right only because the store is the file's only
// writer: SqliteFileGuard's lock keeps other writers off, and its check
// before each COMMIT fails the batch once the path names another file.
//
//   auto writer = SqliteBatchWriter::Create(db, {.path = path, ...});
//   GroupCommit queue(options, [&](auto batch) { (*writer)->Run(batch); });
//   auto write = std::make_unique<SqliteBatchWriter::Write>();
//   write->judge = [](SqliteHeldRows& rows, absl::Time now) { ... };
//   write->done = ...;
//   queue.Submit(std::move(write));
//
// Thread-safe: Run holds a mutex of its own, never contended (GroupCommit
// runs one batch at a time); the writing connection must be used by no one
// else while the writer exists.
#ifndef HILO_SERVICE_STORE_SQLITE_SQLITE_BATCH_WRITER_H_
#define HILO_SERVICE_STORE_SQLITE_SQLITE_BATCH_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "hilo/base/clock.h"
#include "hilo/base/mutex.h"
#include "service/store/group_commit.h"
#include "service/store/sqlite/sqlite_held_rows.h"
#include "service/store/sqlite/sqlite_options.h"
#include "service/store/sqlite/sqlite_reservations.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hilo {
namespace internal {

class SqliteBatchWriter {
 public:
  struct Options {
    // The database's path, named in errors.
    std::string path;
    // kFull: a batch that raises a ceiling (or makes or removes a row)
    // flushes the log to disk after its COMMIT, before its completions,
    // and no other does (sqlite_reservations.h). kNormal: none does. The
    // connection commits with PRAGMA synchronous=NORMAL either way, except
    // on a file without powersafe overwrite, where it keeps FULL and every
    // COMMIT waits for the disk (sqlite_reservations.h).
    SyncMode sync = SyncMode::kFull;
    // Rows held in memory between batches (SqliteHeldRows).
    size_t max_held_rows = SqliteRangeStoreOptions().max_held_rows;
    // Source of the `now` each batch's writes are judged at; null: the
    // system clock.
    const Clock* clock = nullptr;
    // Runs right before COMMIT: a status other than OK fails the batch as
    // a lost file does (SqliteFileGuard::Check). Null: none.
    std::function<absl::Status()> check_file;
    // After each successful COMMIT: how long it took, the writes in the
    // batch, and the rows it created less those it deleted.
    std::function<void(absl::Duration commit, int writes, int64_t created)>
        on_commit;
    // Test hooks, as SqliteRangeStoreOptions' (a status other than OK is
    // taken as the COMMIT, or a row's write, failing with it).
    std::function<absl::Status()> before_commit_for_testing;
    std::function<absl::Status()> before_write_for_testing;
  };

  // One operation of a batch. `judge` decides, on the batch's rows, what
  // the operation does (sqlite_judges.h): OK and the rows changed, or an
  // error and nothing changed. Set `done` as for any GroupCommit operation.
  struct Write : GroupCommit::Operation {
    absl::AnyInvocable<absl::Status(SqliteHeldRows& rows, absl::Time now)>
        judge;
  };

  // Prepares the writer's statements on `db`, which holds hilo's schema, in
  // WAL mode with synchronous=NORMAL (the writer flushes the log itself;
  // FULL on a file without powersafe overwrite).
  // The writer does not own `db`; close it only after the writer is gone.
  static absl::StatusOr<std::unique_ptr<SqliteBatchWriter>> Create(
      sqlite3* db, Options options);
  ~SqliteBatchWriter();
  SqliteBatchWriter(const SqliteBatchWriter&) = delete;
  SqliteBatchWriter& operator=(const SqliteBatchWriter&) = delete;

  // GroupCommit's BatchRunner: every operation must be a Write. Sets each
  // one's status.
  void Run(absl::Span<GroupCommit::Operation* const> batch);

  // Rows written (inserted, updated or deleted) by committed batches.
  int64_t rows_written() const;
  // Committed batches whose COMMIT waited for the disk (kFull only).
  int64_t commits_synced() const;
  // A flush of the log failed: every batch fails from then on.
  bool broken() const;
  // Rows held in memory now.
  size_t rows_held() const;

 private:
  struct Statements;

  SqliteBatchWriter(sqlite3* db, Options options);
  absl::Status Prepare() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // False if the batch ended (every status is set).
  bool Begin(absl::Span<GroupCommit::Operation* const> batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Judges every write; false if the transaction ended under them.
  bool Judge(absl::Span<GroupCommit::Operation* const> batch, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes each changed row, with the ceiling reservations_ planned; how
  // many, or the first error.
  absl::StatusOr<int64_t> WriteChanges(
      const std::vector<SqliteHeldRows::Change>& changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteRow(absl::string_view name, const CollectionState& row,
                        int64_t ceiling) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status DeleteRow(absl::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::optional<CollectionState>> ReadRow(absl::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Table retired_collections: keeps `max` for `name` (the higher, if it
  // has one), and reads it (0 if it has none).
  absl::Status WriteRetired(absl::string_view name, int64_t max)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int64_t> ReadRetiredMax(absl::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A row's ceiling (0 if it has none).
  absl::StatusOr<int64_t> ReadCeiling(absl::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The hooks, the file check and the COMMIT, waiting for the disk or
  // not; its time in *took.
  absl::Status Commit(bool wait_for_disk, absl::Duration* took)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Flushes the write-ahead log to disk; on failure, breaks the writer.
  absl::Status SyncLog() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rolls back what is left of the transaction and the held rows; every
  // write that had not failed alone fails with `status`.
  void Fail(absl::Span<GroupCommit::Operation* const> batch,
            const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs a statement that returns no rows, and resets it.
  absl::Status Step(sqlite3_stmt* stmt, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const Clock* const clock_;
  mutable base::Mutex mu_;
  sqlite3* const db_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Statements> statements_ ABSL_GUARDED_BY(mu_);
  SqliteReservations reservations_ ABSL_GUARDED_BY(mu_);
  SqliteHeldRows rows_ ABSL_GUARDED_BY(mu_);
  int64_t rows_written_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t commits_synced_ ABSL_GUARDED_BY(mu_) = 0;
  // Once a flush of the log failed: every batch fails with it.
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
};

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_SQLITE_SQLITE_BATCH_WRITER_H_
