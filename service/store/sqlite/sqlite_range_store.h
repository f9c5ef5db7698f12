// SqliteRangeStore: a RangeStore in one SQLite file, with group commit.
//
// Each collection is one row of table `collections`. Operations that
// arrive while a commit is in flight are folded into the next transaction,
// so one disk flush makes many of them durable. The store is the file's
// only writer, so it holds the rows it has used in memory and judges a
// whole batch there (internal::SqliteBatchWriter), writing each changed row
// once. No caller returns before the commit that holds its operation is
// durable (WAL, synchronous=FULL by default). An operation the rules refuse
// fails alone and changes nothing; the others in its batch still commit; if
// a row cannot be written or the COMMIT fails, the whole batch fails and
// nothing of it is kept, on disk or in memory. Database files and
// directories it creates are flushed into their parent directories, so a
// power loss cannot lose them.
//
//   auto store = hilo::SqliteRangeStore::Open({.path = "hilo-data/hilo.db"});
//   if (!store.ok()) return store.status();
//   absl::StatusOr<hilo::Range> r =
//       (*store)->Allocate("orders", 32, /*floor=*/0, hilo::NewRangeToken());
//
// Reads (Get, List) never wait for writes: they run on a read-only
// connection of their own, on their own thread, and see the last commit
// (WAL lets them read while a write batch is in flight), so a flood of
// ListCollections cannot delay an allocation.
//
// Thread-safe: any number of threads may call concurrently. A GroupCommit
// queue with a thread of its own runs the write batches, one at a time, and
// calls their completions; callers only queue. So between Open and the
// destructor the writing connection is used by that thread alone (by the
// batch writer, under a mutex of its own). A second GroupCommit queue, with
// a thread of its own, runs the reads on the reading connection; reads
// never block their caller.
#ifndef HILO_SERVICE_STORE_SQLITE_SQLITE_RANGE_STORE_H_
#define HILO_SERVICE_STORE_SQLITE_SQLITE_RANGE_STORE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "hilo/base/clock.h"
#include "hilo/base/mutex.h"
#include "service/store/group_commit.h"
#include "service/store/range_store.h"
#include "service/store/sqlite/sqlite_options.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hilo {
namespace internal {
class SqliteBatchWriter;
class SqliteFileGuard;
class SqliteHeldRows;
class SqliteStatement;
}  // namespace internal

class SqliteRangeStore final : public RangeStore {
 public:
  // Opens or creates the database and its schema, and locks the file: one
  // writable store per file, in any process (SqliteFileGuard; a read-only
  // store takes no lock). Errors: UNAVAILABLE if the file or its directory
  // cannot be opened or created; FAILED_PRECONDITION if the file is not a
  // hilo database (not SQLite, corrupt, or a newer schema; read-only: any
  // other schema version); NOT_FOUND if a read-only open, or one that may
  // not create (create_if_missing), finds no file or an empty one;
  // FAILED_PRECONDITION if another store holds the file, or if a new
  // database would be made where a -wal file of a deleted one still lies;
  // INVALID_ARGUMENT for bad options; FAILED_PRECONDITION if the file was
  // tagged other than options.node_tag (see there).
  static absl::StatusOr<std::unique_ptr<SqliteRangeStore>> Open(
      SqliteRangeStoreOptions options);

  ~SqliteRangeStore() override;
  SqliteRangeStore(const SqliteRangeStore&) = delete;
  SqliteRangeStore& operator=(const SqliteRangeStore&) = delete;

  // RangeStore:
  // One operation for all the items, so one commit.
  void ReturnManyAsync(
      std::vector<ReturnItem> items,
      StoreCallback<std::vector<absl::StatusOr<ReturnOutcome>>> done) override;
  void GetAsync(absl::string_view collection,
                StoreCallback<std::optional<CollectionState>> done) override;
  void DeleteAsync(absl::string_view collection,
                   StoreCallback<CollectionState> done) override;
  void RetireAsync(absl::string_view collection,
                   StoreCallback<CollectionState> done) override;

  // As of the last commit.
  int64_t collection_count() const override {
    return collection_count_.load(std::memory_order_relaxed);
  }

  // Transactions committed so far (each holds one or more operations); 0
  // for a read-only store.
  int64_t commits() const;
  // Rows written (inserted, updated or deleted) by committed transactions.
  int64_t rows_written() const;

  // Whether Open made this database (a new file, or the schema in an empty
  // one) rather than opening an existing one.
  bool created() const { return created_; }
  // The database file's absolute path.
  const std::string& absolute_path() const { return absolute_path_; }

  // Checks now that the path still names the file opened (as the store's
  // own thread does every file_check_interval): OK, or UNAVAILABLE with
  // internal::kFileLostMessage once it was deleted or replaced, after
  // on_file_lost ran. OK for a read-only store, which does not check.
  absl::Status CheckFile();

  // Blocks until at least `n` operations wait for a batch.
  void WaitForPendingForTesting(size_t n);

  absl::Status PutForTesting(absl::string_view collection,
                             const CollectionState& state) override;

 private:
  struct Reader;

  // RangeStore:
  void DoAllocateAsync(absl::string_view collection, int64_t size,
                       int64_t floor, uint64_t token, int64_t max_floor_jump,
                       bool may_create,
                       StoreCallback<Allocation> done) override;
  void DoReturnAsync(absl::string_view collection, int64_t end, int64_t last,
                     uint64_t token,
                     StoreCallback<ReturnOutcome> done) override;
  void DoListAsync(
      absl::string_view after, int limit,
      StoreCallback<std::vector<NamedCollectionState>> done) override;
  void DoSetFloorAsync(absl::string_view collection, int64_t floor,
                       StoreCallback<FloorOutcome> done) override;

  SqliteRangeStore(SqliteRangeStoreOptions options, sqlite3* db);
  // Open of a read-only store: nothing is created, no lock is taken.
  static absl::StatusOr<std::unique_ptr<SqliteRangeStore>> OpenReadOnly(
      SqliteRangeStoreOptions options);
  // The end of Open, once the file is open and its schema ready: the write
  // queue, the new file's directory entry made durable, the file's watch.
  absl::Status StartWriting(bool is_new, const std::filesystem::path& parent);

  absl::Status Init() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_);
  // Init of a read-only store: checks the identity and version only.
  absl::Status InitReadOnly() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_);
  // Queues the read `body` for the reading connection's next batch; `done`
  // gets what it read, or its error.
  template <typename T>
  void SubmitRead(absl::AnyInvocable<absl::Status(T* result)> body,
                  StoreCallback<T> done);
  // Queues a write for the batch writer: `judge`, callable as
  // absl::Status(SqliteHeldRows& rows, absl::Time now, T* result), decides
  // on the batch's rows what it does (sqlite_judges.h); `done` gets its
  // result once the batch is committed, or the batch's error. The write
  // holds the judge, the result and `done` in one allocation: this is
  // every NextRange's path.
  template <typename T, typename Judge>
  void SubmitWrite(Judge judge, StoreCallback<T> done);
  // Makes writer_, once the schema exists.
  absl::Status OpenWriter() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_);
  // Opens reader_, once the schema exists.
  absl::Status OpenReader();
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_);
  // The error of `rc` on the writing connection.
  absl::Status Error(int rc, absl::string_view what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_);
  // The first column of the first row of `sql` (a PRAGMA or a count).
  absl::StatusOr<int64_t> ReadInt(const char* sql) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_);
  // The error of `rc` on connection `db`.
  absl::Status ErrorOn(sqlite3* db, int rc, absl::string_view what) const;

  // A row through `select` (of connection `db`).
  absl::StatusOr<std::optional<CollectionState>> ReadRow(
      sqlite3* db, internal::SqliteStatement& select,
      absl::string_view collection);
  absl::Status ReadRows(sqlite3* db, internal::SqliteStatement& list,
                        absl::string_view after, int limit,
                        std::vector<NamedCollectionState>* result);

  const SqliteRangeStoreOptions options_;
  const Clock* const clock_;
  std::string absolute_path_;
  bool created_ = false;
  // Open recorded the running mark, which a clean close removes.
  bool marked_running_ = false;
  // What Open found of a machine that went down under the file.
  std::optional<StoreHistoryEvent> went_back_;
  // The lock on the file and its watch; null for a read-only store.
  // Destroyed last: it must outlive SQLite's connections (see there).
  std::unique_ptr<internal::SqliteFileGuard> guard_;
  // The writing connection is used by one thread at a time, but not always
  // the same one: by Open (under writer_mu_, which makes the analysis check
  // that only Open's code touches it), then only by writer_, on queue_'s
  // thread, under the writer's own mutex, which also orders the threads'
  // uses of it for ThreadSanitizer. SQLite's own mutexes are off
  // (SQLITE_OPEN_NOMUTEX, "multi-thread" mode), which SQLite allows when no
  // two threads use a connection at once.
  mutable base::Mutex writer_mu_;
  sqlite3* const db_ ABSL_GUARDED_BY(writer_mu_);
  // Runs the write batches; null for a read-only store.
  std::unique_ptr<internal::SqliteBatchWriter> writer_;
  std::atomic<int64_t> collection_count_{0};
  // The reading connection and its queue; destroyed before the writer's.
  std::unique_ptr<Reader> reader_;
  // Batches operations into transactions; destroyed first.
  std::unique_ptr<GroupCommit> queue_;
};

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_SQLITE_SQLITE_RANGE_STORE_H_
