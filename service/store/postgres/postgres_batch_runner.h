// PostgresBatchRunner: the PostgreSQL store's protocol for one GroupCommit
// batch, on one connection of its own.
//
// A run is one transaction in two pipelined round trips (libpq's pipeline
// mode), whatever the batch's size:
//
//   1. BEGIN; lock and read the rows the batch writes (FOR UPDATE SKIP
//      LOCKED: a row another session holds is skipped, not waited for);
//      read the rows it only reads; the Lists and the probe's count.
//   2. For new rows only: take their creation locks without waiting
//      (pg_try_advisory_xact_lock), at most kMaxCreationsPerBatch, oldest
//      first, and read those rows again, with the Max each name was
//      retired at, if it was. A creation the rules refuse on its own
//      arguments (judged on no row) takes no lock. If the batch creates or
//      deletes rows, lock the count of rows (hilo_collection_count) and
//      refuse creations past max_collections.
//   3. Judge each request in order on the rows in memory, one judge per
//      kind (postgres_judges.h); an operation on a row another session
//      holds, or is creating, is set aside to run again later (Hooks::park).
//   4. Write each changed row once, and COMMIT; answer.
//
// The rules it keeps: no write is reported applied unless its COMMIT
// succeeded; a failed write, a failed or unconfirmed COMMIT, or a lost
// connection fails every write of the batch (reads answer the rows as
// stored); a request the rules refuse fails alone and changes nothing; a
// conflict (serialization failure, deadlock, a row created meanwhile) runs
// the whole batch again, up to max_attempts.
//
//   PostgresBatchRunner runner(options, hooks);
//   GroupCommit queue({.max_batch = 256},
//                     [&](auto batch) { runner.Run(batch); });
//
// Run is called by one thread at a time (a GroupCommit queue's thread),
// which alone uses the runner's connection; counters() may be read from any
// thread.
#ifndef HILO_SERVICE_STORE_POSTGRES_POSTGRES_BATCH_RUNNER_H_
#define HILO_SERVICE_STORE_POSTGRES_POSTGRES_BATCH_RUNNER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "hilo/base/clock.h"
#include "service/store/group_commit.h"
#include "service/store/postgres/postgres_batch.h"
#include "service/store/postgres/postgres_collection_count.h"
#include "service/store/postgres/postgres_connection.h"
#include "service/store/postgres/postgres_history.h"
#include "service/store/postgres/postgres_options.h"
#include "service/store/postgres/postgres_request.h"

namespace hilo {
namespace internal {

class PostgresBatchRunner {
 public:
  // What the runner is told of the store that owns it, which builds these
  // from PostgresRangeStoreOptions (the connection's settings are the
  // connect hook's business). A default that struct also has is read from
  // it, so the two cannot differ.
  struct Options {
    // "postgresql://user@host:port/db", what errors name.
    std::string description;
    // Source of updated_at; null: the system clock.
    const Clock* clock = nullptr;
    // What standby_left_grace is measured on; null: MonotonicClock.
    const Clock* windows_clock = nullptr;
    // The write connection's runner: reserves numbers ahead and waits for
    // the standbys to confirm them (postgres_history.h).
    bool reserves = false;
    // Runs of one batch that may end in a conflict before it fails with
    // UNAVAILABLE.
    int max_attempts = PostgresRangeStoreOptions().max_attempts;
    // How long an operation on a row another session holds (or is
    // creating) is set aside before it fails; the store gives its
    // sessions' lock_timeout, which its errors name.
    absl::Duration lock_timeout = PostgresRangeStoreOptions().lock_timeout;
    // Reservations, with `reserves`: how many ranges past a range to
    // reserve, and how long its reply waits for the standbys to confirm.
    int reserve_ranges = PostgresRangeStoreOptions().reserve_ranges;
    absl::Duration standby_wait = PostgresRangeStoreOptions().standby_wait;
    size_t max_remembered_collections =
        PostgresRangeStoreOptions().max_remembered_collections;
    absl::Duration standby_left_grace =
        PostgresRangeStoreOptions().standby_left_grace;
    // The most rows every server on the database may create together
    // (postgres_fleet_count.cc); 0: no limit.
    int64_t max_collections = PostgresRangeStoreOptions().max_collections;
    // Told after each commit: how long it took, its operations, and the
    // rows this server knows of. Null: not told.
    std::function<void(absl::Duration commit, int operations,
                       int64_t collections)>
        on_commit;
    // Told the whole of each database error a batch fails with (callers
    // get a short reason). Null: not told.
    std::function<void(const absl::Status&)> on_database_error;
    // Test hooks, each null for none. Runs before a batch that holds a Get
    // or List starts.
    std::function<void()> before_read_batch_for_testing;
    // Runs once a batch's writes and COMMIT are sent, before their results
    // are read, with the connection's socket.
    std::function<void(int socket)> after_commit_sent_for_testing;
    // Runs once a probe has counted the rows, before the count is stored.
    std::function<void()> before_count_stored_for_testing;
    // Runs once the creation locks are taken, before the requests are
    // judged, inside the transaction.
    std::function<void()> before_judging_for_testing;
  };

  // What the runner needs of the store that owns it.
  struct Hooks {
    // A new connection, set up and checked. Required.
    std::function<absl::StatusOr<std::unique_ptr<PostgresConnection>>()>
        connect;
    // Told whether the connection reached the database (reachable(), hence
    // health); null: not told (a read connection's state does not count).
    std::function<void(bool reachable)> reachable;
    // A request set aside (a row it writes is held by another session, or
    // postponed past the batch's share of creations): queue it again after
    // a short wait. Required.
    std::function<void(std::unique_ptr<PostgresRequest> request,
                       bool postponed)>
        park;
    // A kRenew request's node-tag renewal, if one is due; null: none.
    std::function<std::optional<Statement>()> renewal;
    // What the renewal answered; called only after `renewal` gave one.
    std::function<void(PostgresConnection& c, const PGresult* result)> renewed;
    // Moved by commits, replaced by probes. Required; outlives the runner.
    PostgresCollectionCount* count = nullptr;
  };

  // What the batches met of other sessions; see PostgresRangeStore::
  // Counters.
  struct Counters {
    int64_t set_aside = 0;
    int64_t creations_set_aside = 0;
    int64_t locked_failures = 0;
    int64_t conflict_retries = 0;
    int64_t standby_waits = 0;
  };

  PostgresBatchRunner(Options options, Hooks hooks);
  PostgresBatchRunner(const PostgresBatchRunner&) = delete;
  PostgresBatchRunner& operator=(const PostgresBatchRunner&) = delete;

  // The connection the next batch uses (one the store opened and checked
  // already); without it, the first batch connects. With `reserves`, counts
  // which standbys are listed now (postgres_history.h), which can fail.
  absl::Status Adopt(std::unique_ptr<PostgresConnection> connection);
  // GroupCommit's BatchRunner: every operation must be a PostgresRequest.
  // Sets each one's status and results; parks those set aside.
  void Run(absl::Span<GroupCommit::Operation* const> ops);

  Counters counters() const;
  // The connection, if it is open and was not given up; for the store's
  // last words on it (releasing the node tag) once no batch runs.
  PostgresConnection* healthy_connection();

 private:
  enum class Attempt { kDone, kRetry };

  // Runs the batch, again after conflicts; the statuses it sets may name
  // the database, which Run then hides.
  void RunAttempts(absl::Span<PostgresRequest* const> batch);
  // One run of the batch, in one transaction; kRetry after a conflict that
  // rolled it back. Each step that can end the run returns how, or nothing
  // to go on.
  Attempt RunOnce(absl::Span<PostgresRequest* const> requests);
  // Connects if there is no healthy connection.
  absl::Status EnsureConnected();

  // Step 1 (postgres_batch_runner.cc).
  std::optional<Attempt> ReadRows(PostgresBatch& batch);
  // The first round trip's statements; sets the indexes of its results.
  std::vector<Statement> FirstRoundTrip(PostgresBatch& batch, int* locked_at,
                                        int* read_at, int* existing_at,
                                        int* renew_at);
  // Records the rows read, and those another session holds.
  void TakeRowsRead(PostgresBatch& batch, int locked_at, int read_at,
                    int existing_at);
  // Step 2 (postgres_creation_locks.cc): which new rows to create, their
  // locks, the rows read again.
  std::optional<Attempt> TakeCreationLocks(PostgresBatch& batch);
  // The new rows this batch tries to create, sorted; those past its share
  // go to batch.postponed.
  std::vector<std::string> ChooseCreations(PostgresBatch& batch) const;
  // Before step 2 (postgres_retirement.cc): for the creations the rules
  // refuse on no row, the Max their names were retired at, which may make
  // them creations after all (batch.retired_before_locks).
  std::optional<Attempt> ReadRetiredOfRefusals(PostgresBatch& batch);
  // Reads hilo_retired's entries of `names` into *out.
  std::optional<Attempt> QueryRetired(PostgresBatch& batch,
                                      const std::set<std::string>& names,
                                      Result* out);
  // After step 2, retirement (postgres_retirement.cc): reads the retired
  // Max and ceiling of the names the batch may create, which their new
  // rows start from.
  std::optional<Attempt> ReadRetired(PostgresBatch& batch);
  // Then the count of rows for every server on the database
  // (postgres_fleet_count.cc): locks it if the batch may create or delete
  // rows (or sets those aside if another session holds it), and with
  // max_collections refuses the new rows past it (StoreFullRefusal).
  std::optional<Attempt> LockFleetCount(PostgresBatch& batch);
  // LockFleetCount's refusals: the batch's new rows past the first `room`.
  void Admit(PostgresBatch& batch, int64_t room) const;
  // Step 3 (postgres_judges.cc holds the judges; the loop is here). A
  // request refused before it (LockFleetCount) is not judged.
  void JudgeRequests(PostgresBatch& batch);
  // The reads' answers (Get, List, probe); true if `i` is one of them.
  bool AnswerRead(PostgresBatch& batch, size_t i);
  // Sets `r` aside (or fails it, having waited lock_timeout) if a row it
  // writes is held or postponed; true if so.
  bool SetAside(PostgresBatch& batch, PostgresRequest& r,
                std::chrono::steady_clock::time_point steady_now);
  // Runs `r`'s judge, and reserves past what it handed out.
  void Judge(PostgresBatch& batch, PostgresRequest& r);
  // Step 4.
  Attempt WriteAndCommit(PostgresBatch& batch);
  // The second round trip's writes and COMMIT; an error if a new row
  // lacks its creation lock. Draws each inserted row's incarnation into
  // `batch`. *created: rows created less rows deleted.
  absl::StatusOr<std::vector<Statement>> Writes(PostgresBatch& batch,
                                                int64_t* created) const;
  // In Writes, before the COMMIT: keeps the retired rows' Max and ceiling
  // in hilo_retired (postgres_retirement.cc), and moves the count of rows
  // for every server by `created` (postgres_fleet_count.cc).
  static void WriteRetired(const PostgresBatch& batch,
                           std::vector<Statement>* statements);
  static void WriteFleetCount(int64_t created,
                              std::vector<Statement>* statements);
  // Sends `second` and reads its answers.
  Attempt Commit(PostgresBatch& batch, std::vector<Statement>& second,
                 int64_t created);

  // Fails every request (or only the writes) with `s`, ending the
  // transaction; a Get left answers the rows as stored.
  Attempt FailBatch(PostgresBatch& batch, absl::Status s, bool writes_only);
  // A conflict another run may clear: ends the transaction and asks for the
  // batch to run again, unless that cost the connection; then everything
  // fails with `conflict` (nothing was committed).
  Attempt RetryBatch(PostgresBatch& batch, const absl::Status& conflict);
  // UNAVAILABLE for a COMMIT that answered with `warning` (a wait for a
  // synchronous standby cancelled: the commit is local only).
  absl::Status UnreplicatedCommitError(absl::string_view warning) const;
  // Drops the connection and records the database as unreachable.
  void LostConnection();
  void SetReachable(bool reachable);

  // Reservations (postgres_reservations.cc): marks `r`, which hands out
  // (or floors) numbers up to `high` in `name`'s row, as waiting for the
  // standbys unless this server's confirmed reservation covers it, and
  // reserves past it.
  void Reserve(PostgresBatch& batch, PostgresRequest& r,
               const std::string& name, int64_t high, int64_t size);
  // How many ranges past itself a new reservation of `name` reaches:
  // options_.reserve_ranges for its first; twice its last when that lasted
  // less than kReserveFor (up to kMaxReachDoublings doublings of the
  // option), half its last (not below the option) when that lasted more
  // than 16 times as long. So a collection whose reservations run out
  // within a second reserves about a second of its numbers at a time, and
  // its replies wait for the standbys about once a second, not once a
  // batch. Records the reservation as made now.
  int64_t ReserveReach(const std::string& name);
  // Makes room in `map` for one more name: if it is full (at
  // options_.max_remembered_collections), forgets every name in it.
  template <typename Map>
  void Remember(Map& map, const std::string& name) const {
    if (map.size() >= options_.max_remembered_collections &&
        !map.contains(name)) {
      map.clear();
    }
  }
  static constexpr absl::Duration kReserveFor = absl::Seconds(1);
  static constexpr int kMaxReachDoublings = 12;
  // After a commit: if a reply waits for its reservation, waits for the
  // standbys; fails those replies if they do not confirm in time.
  void ConfirmReservations(PostgresBatch& batch);

  const Options options_;
  const Hooks hooks_;
  const Clock* const clock_;
  const Clock* const windows_clock_;
  std::unique_ptr<PostgresConnection> connection_;
  // The connection failed (or could not be rolled back): the next batch
  // connects anew.
  bool broken_ = false;
  // Reservations: the ceiling of each collection this server saw
  // confirmed by the standbys since its connection opened, and the
  // incarnation of the row it was confirmed for; it holds for that row
  // only. Both maps below hold at most options_.max_remembered_collections
  // names (Remember): an entry lost makes a reply wait for the standbys or
  // a reservation reach less, never repeats a number.
  struct Confirmed {
    int64_t incarnation = 0;
    int64_t ceiling = 0;
  };
  absl::flat_hash_map<std::string, Confirmed> confirmed_ceiling_;
  // Reservations: how far the next reservation of each collection reaches
  // (ReserveReach), and when its last one was made on windows_clock_. Not
  // safety: a rate, kept across connections.
  struct Reach {
    int64_t ranges = 0;
    absl::Time reserved_at = absl::InfinitePast();
  };
  absl::flat_hash_map<std::string, Reach> reach_;
  // Which standbys this connection counted (listed when it opened, or by
  // a wait since): a wait ends only when each of them is listed, all
  // caught up, until standby_left_grace has passed since a wait first
  // found one missing (`fewer_since_`); then those counted are those
  // listed.
  StandbySet standbys_expected_;
  std::optional<absl::Time> fewer_since_;
  // Those found missing when `fewer_since_` was set: the grace is theirs
  // only. One that leaves later starts the clock again.
  StandbySet left_;
  // A wait counted a standby, and recording that in hilo_meta failed: this
  // server takes the standby as seen (ConfirmReservations), and records it
  // at its next wait.
  bool standby_unrecorded_ = false;
  std::atomic<int64_t> set_aside_{0};
  std::atomic<int64_t> creations_set_aside_{0};
  std::atomic<int64_t> locked_failures_{0};
  std::atomic<int64_t> conflict_retries_{0};
  std::atomic<int64_t> standby_waits_{0};
};

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_POSTGRES_POSTGRES_BATCH_RUNNER_H_
