// What PostgresRangeStore is opened with: the database, the node-tag lease,
// batching, time limits, what it reports when the database's history goes
// back, and the test hooks. Apart from the store so that its parts (the
// node-tag lease, the history check) can take them without including it.
#ifndef HILO_SERVICE_STORE_POSTGRES_POSTGRES_OPTIONS_H_
#define HILO_SERVICE_STORE_POSTGRES_POSTGRES_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hilo/base/clock.h"
#include "service/store/range_store.h"

namespace hilo {

// A claim of a node tag in the database; see PostgresRangeStore.
struct NodeTagLease {
  // The tags wanted, most wanted first; the first one that no other live
  // server holds is taken. Each must be a valid node tag.
  std::vector<std::string> candidates;
  // Who claims: unique among live processes (host and process id); written
  // beside the tag, so a process restarted under the same name takes its own
  // claim back at once.
  std::string holder;
  // How long a claim lasts unless renewed; every probe renews it.
  absl::Duration duration = absl::Seconds(10);
  // When every candidate is held: how long Open waits for one of those
  // claims to run out (a crashed server's) before it fails. Zero: fail at
  // once.
  absl::Duration wait_for_held = absl::ZeroDuration();
};

struct PostgresRangeStoreOptions {
  // A libpq connection string: a URI (postgresql://user@host:port/db?...)
  // or key=value pairs. Parameters it leaves out take libpq's defaults and
  // environment (PGPASSWORD, PGSSLMODE, ~/.pgpass, ...).
  std::string uri;
  // Most operations folded into one transaction; 1 commits each alone,
  // 4096 at most.
  int max_batch = 256;
  // Unless the connection string sets connect_timeout.
  absl::Duration connect_timeout = absl::Seconds(5);
  // Longest a statement may run before the batch fails with UNAVAILABLE.
  // This server waits for any answer of the database (COMMIT's included,
  // which the database's own timeout does not end while it waits for a
  // synchronous standby) a second longer, then cancels the statement and
  // gives the connection up if that brings no answer within 2 s.
  absl::Duration statement_timeout = absl::Seconds(5);
  // The session's lock_timeout: longest a statement waits for a lock.
  absl::Duration lock_timeout = absl::Seconds(2);
  // The session's idle_in_transaction_session_timeout: a server stopped
  // inside its transaction (frozen, in a debugger) loses its session and
  // its row locks after this, so the others need not wait longer.
  absl::Duration idle_in_transaction_timeout = absl::Seconds(5);
  // How often an idle store checks that the database answers.
  absl::Duration probe_interval = absl::Seconds(1);
  // Runs of one batch that may end in a serialization failure, a deadlock
  // or a collision on a new collection before it fails with UNAVAILABLE.
  int max_attempts = 8;
  // Source of updated_at. Null means SystemClock.
  const Clock* clock = nullptr;
  // What spans of time (standby_left_grace) are measured on, which a
  // stepped wall clock must not stretch or cut short. Null means
  // MonotonicClock.
  const Clock* windows_clock = nullptr;
  // As SqliteRangeStoreOptions::on_commit; `collections` counts the rows
  // this server created or saw at start and at each probe.
  std::function<void(absl::Duration commit, int operations,
                     int64_t collections)>
      on_commit;
  // Told, on the store's thread, the whole of a database error (naming the
  // database, with its own message) each time a batch fails with one; the
  // callers of that batch get only a short reason with the same code
  // (ForClients in postgres_retry_policy.h), since the detail tells anyone
  // who can send a request the database's host, port and user. For the
  // server's log; keep it quick.
  std::function<void(const absl::Status&)> on_database_error;
  // Told when the database stops or starts answering the write connection
  // (see reachable()); on the store's thread. Keep it quick.
  std::function<void(bool reachable)> on_reachability;
  // Reservations (postgres_history.h): a range above this server's
  // confirmed reservation reserves ranges of its size past itself, this
  // many for a collection's first reservation, up to 4096 times as many
  // while its reservations run out within a second; its reply waits at most
  // standby_wait for the standbys to confirm them (then UNAVAILABLE:
  // nothing is reported applied).
  int reserve_ranges = 16;
  absl::Duration standby_wait = absl::Seconds(2);
  // Collections whose confirmed reservation and reach the server keeps in
  // memory. Past this many, it forgets them all and starts again: each
  // collection's next range waits for the standbys once more and reserves
  // the first reach. Bounds memory when names come and go (created by
  // callers, deleted through other servers of the fleet).
  size_t max_remembered_collections = size_t{1} << 17;
  // When fewer standbys are listed than this server counted on its
  // connection (one left without confirming: cut off from its primary, it
  // may be the one promoted next), new reservations fail for this long
  // before the server goes on with those still listed. Longer than an HA
  // tool takes to demote a primary it cannot reach (Patroni's ttl, 30 s by
  // default) with a margin; docs/reliability.md.
  absl::Duration standby_left_grace = absl::Seconds(40);
  // The most rows hilo_collections may hold, counted for every server
  // sharing the database (postgres_fleet_count.cc); 0: no limit. A
  // NextRange or SetFloor that would create a row past it fails with
  // StoreFullRefusal; existing rows keep working. Each server counts its
  // creations and deletions in the shared count whatever its own limit.
  int64_t max_collections = 0;
  // Told, on the store's thread, each time the store finds that the
  // database's history went back and moves collections on. Keep it quick.
  std::function<void(const StoreHistoryEvent&)> on_history_went_back;
  // Claim a node tag (see NodeTagLease); none if unset.
  std::optional<NodeTagLease> node_tag_lease;
  // Told once, on the store's thread, when a renewal finds the tag taken by
  // another server (this one could not renew it for the lease's duration).
  // The server should then stop serving under that tag. Keep it quick.
  std::function<void(const absl::Status&)> on_node_tag_lost;
  // Test hook: runs on the committer thread once a batch's writes and
  // COMMIT are sent, before their results are read, with the connection's
  // socket (so a test can cut it, as a network failure during COMMIT would).
  std::function<void(int socket)> after_commit_sent_for_testing;
  // Test hook: runs on the thread of each batch that holds a Get or List,
  // before the batch starts; blocking in it holds that batch (and its
  // queue) back.
  std::function<void()> before_read_batch_for_testing;
  // Test hook: runs on the read connection's thread once a probe has
  // counted the rows, before the count is stored; blocking in it holds the
  // count back while writes go on.
  std::function<void()> before_count_stored_for_testing;
};

}  // namespace hilo

#endif  // HILO_SERVICE_STORE_POSTGRES_POSTGRES_OPTIONS_H_
