// The PostgreSQL store's defence against a database whose history went
// back: a standby promoted before it received the primary's last commits, a
// point-in-time restore, a cluster rebuilt from a dump. Each of these
// forgets numbers that were handed out, and a store that trusted its rows
// would hand them out again.
//
// Reservations. Besides Max, every row of hilo_collections keeps a
// *ceiling*: the highest number any server has reserved for the
// collection. A server hands out a range only below a ceiling it has seen
// confirmed: committed on the primary, and then flushed by every physical
// standby the primary lists in pg_stat_replication (WaitForStandbys). A
// range that needs a new reservation raises the ceiling some ranges past
// itself in the same transaction, and its reply waits for that
// confirmation; the ranges after it, up to the ceiling, are answered at
// commit. So whatever a standby lost, the ceiling it holds is at or above
// every number handed out, and so is the ceiling in any backup taken from a
// database that had it. How far: reserve_ranges ranges of the size that
// reserves (16) for a collection's first reservation on a server, twice
// as far as its last while each runs out within a second, half as far once
// one lasted more than 16 seconds (PostgresBatchRunner::ReserveReach); so a
// busy collection waits for its standbys about once a second, not once a
// commit, and a history that goes back skips about a second or two of its
// numbers.
//
// Noticing. The database's system identifier and timeline (a promotion and
// a point-in-time restore start a new timeline; a cluster built anew from a
// dump has a new identifier) are recorded in hilo_meta. Each new write
// connection compares them (CheckHistory); when they differ, before any
// batch runs on the connection, every collection moves on to its ceiling
// (Max = return floor = ceiling, tokens retired, as a SetFloor would), in
// one transaction that also records the new identity.
//
// No standby listed. A reservation committed while the primary lists no
// standby is confirmed by the primary alone, and remembered as confirmed
// only if no standby was ever seen on the store: once one was, a fleet
// will have standbys again (the old primary, rebuilt as the new standby
// after a failover), and a reservation remembered then would let the ranges
// inside it be answered at commit after that standby attached, before it
// received the reservation. So every later range waits again, and once a
// standby attaches, for its flush, which covers what was reserved without
// it. That a standby was seen is recorded in hilo_meta (key
// 'standby_seen', schema version 6), not in a server's memory: by the
// first server whose wait counts one, and by the history check when the
// history changed (a promotion means there was a standby); each wait reads
// it in the same statement. So a server started while none is listed, or
// restarted then, behaves as one that saw it. No server deletes the
// record; an operator who removed replication for good does
// (docs/reliability.md), and every server takes the fast path again at
// its next wait.
//
// A standby that leaves. Each connection counts the standbys listed when
// it opens and by its waits since; a wait ends only when each of them is
// listed again, all caught up. A standby cut off from its primary, or
// one whose primary is dying (a SIGKILLed primary loses its walsenders before
// the backend that waits), leaves pg_stat_replication without confirming and
// may be the one promoted, so its leaving confirms nothing: new
// reservations fail until it is back, or until standby_left_grace (longer
// than an HA tool takes to demote a primary it cannot reach) has passed,
// and then the server goes on with those listed. That grace belongs to
// those found missing when it began: one that leaves later starts it
// again. Standbys are counted by
// the machine they connect from (StandbySet), so another replication
// client on another machine that attaches in the place of one that left
// (a WAL archiver, another standby) does not confirm for it.
//
// Remembered confirmations. A server answers at commit the ranges below a
// ceiling it saw confirmed for that collection, on this connection. The
// memory belongs to the row it was made for, named by the row's
// incarnation (schema version 7: 63 random bits drawn when the row is
// inserted, never changed; postgres_row_codec.h): a row not stored before
// the batch, or stored with another incarnation, was deleted or retired
// since and made anew, perhaps by another server whose first wait failed,
// so its ranges wait, even where its ceiling equals the one remembered (as
// it does after a retirement, whose ceiling the new row starts from). A row
// stored with a lower ceiling (one only rises while its row lives) drops
// the memory too. A server of version 6 still running during an upgrade
// compares ceilings only, as before.
//
// What this cannot see: the ranges handed out while no standby was listed
// (a standby promoted before it caught up with them loses them), and so a
// standby that was not connected to the primary while reservations were
// confirmed and is promoted later, or one promoted more than
// standby_left_grace after it left; another standby that confirms in the
// place of one that left from the same machine (address); a store that
// never recorded
// a standby (a standby that attached and left between two waits); a
// snapshot or base backup restored without archive recovery (same
// identifier and timeline); a pooler that keeps this server's connection
// across a failover (the history is checked when a connection opens); a
// table restored from an older copy into the same cluster and timeline;
// rows lost whole.
// (A check of each row's ceiling against the highest this server saw was
// tried and dropped: a collection deleted and created again by another
// server looks the same, and the fuzzer's two stores found such a row
// moved on where the contract says it starts at 1.) docs/reliability.md
// says what an operator does about those.
//
// Private to service/store/postgres/.
#ifndef HILO_SERVICE_STORE_POSTGRES_POSTGRES_HISTORY_H_
#define HILO_SERVICE_STORE_POSTGRES_POSTGRES_HISTORY_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/store/postgres/postgres_connection.h"

namespace hilo {
namespace internal {

// Which history a database writes: its system identifier and the timeline
// of its WAL.
struct DatabaseHistory {
  std::string system_identifier;
  int64_t timeline = 0;

  friend bool operator==(const DatabaseHistory& a, const DatabaseHistory& b) {
    return a.system_identifier == b.system_identifier &&
           a.timeline == b.timeline;
  }
};

// What CheckHistory found and did.
struct HistoryCheck {
  DatabaseHistory live;
  // What hilo_meta held; empty system_identifier if nothing was recorded
  // yet (a new schema, or one from before version 4). A record hilo did not
  // write whole (one of its two rows, an empty identifier, a timeline that
  // is not a plain number) holds identifier "(missing)" or timeline 0: it
  // matches no live history, so the collections are moved on.
  DatabaseHistory recorded;
  // Whether the history changed, so collections were moved on.
  bool changed = false;
  int64_t collections_moved = 0;
  // Numbers skipped in all (the sum of ceiling - Max over the rows moved);
  // saturates at INT64_MAX.
  int64_t numbers_skipped = 0;
};

// Reads the live history, compares it with hilo_meta's, and when they
// differ moves every collection on to its ceiling and records the live
// one; one transaction, on a connection with none open. `now` stamps the
// rows moved.
absl::StatusOr<HistoryCheck> CheckHistory(PostgresConnection& c,
                                          absl::Time now);

// "system identifier S, timeline T" for logs and audit lines.
std::string DescribeHistory(const DatabaseHistory& h);

// OK unless standbys stream from the database and this role cannot see
// their positions (it is neither superuser nor in pg_read_all_stats, which
// pg_monitor includes): then every new reservation would wait for them in
// vain, and FAILED_PRECONDITION names the grant it needs.
absl::Status CheckStandbysVisible(PostgresConnection& c,
                                  absl::string_view description);

// Records in hilo_meta that a standby was seen, `why` with the time; does
// nothing if it is recorded already. Inside a transaction or on its own.
absl::Status RecordStandbySeen(PostgresConnection& c, absl::string_view why);

// Physical standbys by identity: how many the primary lists with each.
// A standby's identity is the address it connects from (client_addr, or
// "the local socket"): the machine it runs on, which stays the same when
// it reconnects (its pid and port do not). Not its application_name nor
// its slot: a standby is made, and made again after a failover, by
// pg_basebackup -X stream, whose WAL stream is listed under the name
// "pg_basebackup" and a temporary slot of its own until the standby made
// from it attaches in its place, from the same machine, under other ones;
// naming those would stall new reservations for standby_left_grace at
// every rebuild (faults.postgresql_failover_sync did). Two standbys on one
// machine count as two of one identity.
using StandbySet = std::map<std::string, int64_t>;

// For each identity, the larger of the two counts.
StandbySet MostOf(const StandbySet& a, const StandbySet& b);

// How many of `expected` `listed` lacks, identity by identity; their
// identities, ", " between them, in *names if not null.
int64_t MissingStandbys(const StandbySet& expected, const StandbySet& listed,
                        std::string* names);

// For each identity, how many more `a` has than `b`; those it has no more
// of left out.
StandbySet Without(const StandbySet& a, const StandbySet& b);

// The physical standbys the primary lists now (those WaitForStandbys
// waits for).
absl::StatusOr<StandbySet> ListStandbys(PostgresConnection& c);

// What WaitForStandbys found.
struct StandbyWait {
  // OK once every standby listed had confirmed and every one of
  // `expected` was listed; else why not.
  absl::Status status;
  // The physical standbys listed at the last look (0: nothing is
  // confirmed beyond the primary), who they were, and for each identity
  // the most any look listed.
  int64_t listed = 0;
  StandbySet listed_standbys;
  StandbySet most_listed;
  // hilo_meta records that a standby was seen (RecordStandbySeen).
  bool seen_recorded = false;
};

// Waits until every physical standby in pg_stat_replication (but base
// backups in progress) has flushed the primary's WAL as far as it is
// flushed now, which covers every commit that has returned, and every one
// of `expected` is listed: one statement reads that position and the
// record of a standby seen, a second the standbys' positions and
// identities, repeated every `poll` while some standby is behind or one
// expected is not listed. A standby that leaves without confirming (cut
// off from its primary, or with its primary dying: a SIGKILLed primary
// loses its walsenders before the backend that waits) may be the one
// promoted next, so its leaving confirms nothing, and neither does
// another replication client that attaches in its place (another
// identity); the caller says which it counted. At once with none listed
// and none expected. UNAVAILABLE, naming the standbys behind or those
// missing and, when their positions are hidden from this role, the grant
// that shows them, if `bound` passes first.
StandbyWait WaitForStandbys(PostgresConnection& c, absl::Duration bound,
                            absl::Duration poll, absl::string_view description,
                            const StandbySet& expected);

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_POSTGRES_POSTGRES_HISTORY_H_
