// The rows of table hilo_collections as the PostgreSQL store reads and
// writes them: the column list, a row read from a binary result, a row
// added to a multi-row VALUES list, an IN list of names, and the key of a
// name's creation lock. Nothing here
// runs a statement. Private to service/store/postgres/.
#ifndef HILO_SERVICE_STORE_POSTGRES_POSTGRES_ROW_CODEC_H_
#define HILO_SERVICE_STORE_POSTGRES_POSTGRES_ROW_CODEC_H_

#include <libpq-fe.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "service/store/postgres/postgres_connection.h"
#include "service/store/range_store.h"

namespace hilo {
namespace internal {

// The columns of hilo_collections, in the order ReadRow and AddRow use.
inline constexpr char kColumns[] =
    "name, max, return_floor, updated_at_us, range_token, previous_token, "
    "previous_return_floor, ceiling, incarnation";

// A row of hilo_collections, read in kColumns order, binary.
NamedCollectionState ReadRow(const PGresult* r, int row);

// The row's ceiling (column 7 of kColumns): the highest number any server
// reserved for the collection (see postgres_history.h). Never below what
// was handed out once the reservation that covers it was confirmed.
int64_t ReadCeiling(const PGresult* r, int row);

// The row's incarnation (column 8 of kColumns, schema version 7): which
// making of the name the row is. Set when the row is inserted and never
// changed, so two makings of one name (deleted or retired, and made anew,
// by any server) have two (postgres_history.h, "Remembered
// confirmations").
int64_t ReadIncarnation(const PGresult* r, int row);

// A new row's incarnation: 63 bits from the kernel's random source
// (NewRangeToken), never negative. Random, not a sequence: a sequence goes
// back with the database's history (a restore, a standby promoted before
// it received the last values), and would then give a row made after it
// the number of one made before; two random draws for one name meet with a
// chance of 2^-63. The column's default (postgres_schema.cc) draws the same
// way in SQL, for rows made by a server of schema version 6 still running.
int64_t NewIncarnation();

// Appends "($n, ...)" for `name`, `s`, `ceiling` and `incarnation` to
// `values` (", " between rows), its parameters to `p`, in kColumns order.
void AddRow(absl::string_view name, const CollectionState& s, int64_t ceiling,
            int64_t incarnation, Params* p, std::string* values);

// "IN ($1, $2, ...)" over `names`.
std::string InList(const std::vector<std::string>& names, Params* p);

// The key of a collection's creation lock, an SQL expression over
// `name_sql` (an expression of type BYTEA): the first 8 bytes of the
// SHA-256 of the secret salt in table hilo_lock_salt (readable by hilo's
// role alone, so no other role can compute a key: issue 36 item 4), the
// name of the schema that holds the hilo_collections table
// the session uses (not current_schema(): two roles with other search paths
// can share one table), a zero byte and the collection's name, as a
// big-endian BIGINT.
// Whoever inserts a row into hilo_collections holds
// pg_advisory_xact_lock on this key first, so that no one else waits on an
// insert in flight (see postgres_creation_locks.cc). Two names with one key (or
// a key another application of the database locks) cost a needless wait at the
// moment one of them is created, never a duplicate: the row's primary key
// and its row lock keep each name to one row.
std::string CreationLockKey(absl::string_view name_sql);

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_POSTGRES_POSTGRES_ROW_CODEC_H_
