#include "service/store/postgres/postgres_schema.h"

#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hilo {
namespace internal {
namespace {

// The schema's identity and version, kept in table hilo_meta.
constexpr char kApplication[] = "hilo";
// Version 2 added hilo_nodes; version 3 keeps digests of the range tokens;
// version 4 keeps each collection's ceiling (postgres_history.h); version 5
// keeps the Max of retired collections (hilo_retired), which a server that
// does not know it would ignore and so hand those numbers out again;
// version 6 records in hilo_meta that a standby was seen (postgres_history.h),
// which a server that does not know it would ignore, and so take reservations
// as confirmed while no standby is listed. Its tables are version 5's;
// version 7 gives each row of hilo_collections an incarnation
// (kIncarnations), which a server of version 6 would not compare, and so
// take a confirmation remembered for a row deleted since as one for the row
// made anew.
constexpr int kSchemaVersion = 7;
// Key of the advisory lock held while the schema is created or checked
// ("HiLo" in ASCII).
constexpr int64_t kSchemaLockKey = 0x48694c6f;

// Names are bytes compared byte for byte (as in SQLite), so the list order
// never depends on a collation. Token digests (RangeTokenDigest, never the
// tokens) are unsigned 64-bit values stored in BIGINT, bit for bit.
constexpr char kSchema[] = R"sql(
CREATE TABLE hilo_meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE hilo_collections (
  name                  BYTEA  PRIMARY KEY,
  max                   BIGINT NOT NULL,
  return_floor          BIGINT NOT NULL,
  updated_at_us         BIGINT NOT NULL,
  range_token           BIGINT NOT NULL,
  previous_token        BIGINT NOT NULL,
  previous_return_floor BIGINT NOT NULL,
  ceiling               BIGINT NOT NULL DEFAULT 0
);
)sql";

// Node tags claimed by live servers (schema version 2). Times are the
// database's, so servers' clocks never matter.
constexpr char kNodesTable[] = R"sql(
CREATE TABLE hilo_nodes (
  tag        TEXT        PRIMARY KEY,
  holder     TEXT        NOT NULL,
  expires_at TIMESTAMPTZ NOT NULL
);
)sql";

// Names RangeStore::RetireAsync retired (schema version 5), each with the
// highest number it handed out and its ceiling (postgres_retirement.cc).
constexpr char kRetiredTable[] = R"sql(
CREATE TABLE IF NOT EXISTS hilo_retired (
  name    BYTEA  PRIMARY KEY,
  max     BIGINT NOT NULL,
  ceiling BIGINT NOT NULL
);
)sql";

// The number of rows in hilo_collections, for every server sharing the
// database (schema version 5, postgres_fleet_count.cc): one row, made
// at the first start that needs it.
constexpr char kCountTable[] = R"sql(
CREATE TABLE IF NOT EXISTS hilo_collection_count (rows BIGINT NOT NULL);
INSERT INTO hilo_collection_count SELECT 0
  WHERE NOT EXISTS (SELECT 1 FROM hilo_collection_count);
)sql";

// At every start, under the schema lock: the count made again from the
// rows, once no batch holds it (each statement sees what committed before
// it), so a count an older server left behind is put right.
constexpr char kRecount[] = R"sql(
SELECT rows FROM hilo_collection_count FOR UPDATE;
UPDATE hilo_collection_count SET rows = (SELECT count(*) FROM hilo_collections);
)sql";

// Version 2 to 3: tokens were stored in clear, so a role that could read
// the table (or a dump of it) before the upgrade may hold a live range's
// token: every range out with a token is retired instead of carried over as
// a digest. No return applies to it any more (no token, the return floor at
// Max), so its unused numbers stay unused: lost, never repeated.
constexpr char kDigestTokens[] = R"sql(
UPDATE hilo_collections SET return_floor = max, range_token = 0,
  previous_token = 0, previous_return_floor = 0
  WHERE range_token <> 0 OR previous_token <> 0;
)sql";

// Version 3 to 4: rows from before reservations have none (0), so their
// first range reserves anew; until then a failover protects them no better
// than before (see postgres_history.h).
constexpr char kCeilings[] = R"sql(
ALTER TABLE hilo_collections ADD COLUMN IF NOT EXISTS ceiling BIGINT NOT NULL DEFAULT 0;
)sql";

// Version 6 to 7, and every new schema: which making of its name each row
// is (postgres_row_codec.h, NewIncarnation). Rows that exist when the
// column is added are each the only making of their name so far, and all
// get 0: a constant default adds the column without rewriting the table
// (a volatile one drew for every row, 3.4 s a million rows, past the
// statement timeout on a large store, so no server of version 7 could
// start on it). Then the default becomes a draw, for each row a server of
// version 6 still running inserts (its INSERT names the columns it knows):
// a name made anew never gets 0 again but with a chance of 2^-63. 63
// bits: the first 8 bytes of SHA-256 over a gen_random_uuid() (122
// random bits from PostgreSQL's strong random source), the sign bit
// cleared.
constexpr char kIncarnations[] = R"sql(
ALTER TABLE hilo_collections ADD COLUMN IF NOT EXISTS incarnation BIGINT NOT NULL
  DEFAULT 0;
ALTER TABLE hilo_collections ALTER COLUMN incarnation
  SET DEFAULT (('x' || encode(substr(sha256(uuid_send(gen_random_uuid())), 1, 8),
                              'hex'))::bit(64)::bigint & 9223372036854775807);
)sql";

// The secret of the creation locks' keys (CreationLockKey): 32 bytes from
// two gen_random_uuid() (PostgreSQL's strong random source, 244 random
// bits), made once in the schema of hilo_collections (whatever the
// session's search path puts first) and readable by its owner alone,
// so that no other role of the database can compute a key and hold it
// (issue 36 item 4). Older servers of the same schema version ignore it.
constexpr char kLockSalt[] = R"sql(
DO $hilo$
DECLARE
  s TEXT := (SELECT nspname FROM pg_namespace WHERE oid =
             (SELECT relnamespace FROM pg_class
              WHERE oid = 'hilo_collections'::regclass));
BEGIN
  EXECUTE format('CREATE TABLE IF NOT EXISTS %I.hilo_lock_salt '
                 '(salt BYTEA NOT NULL)', s);
  EXECUTE format('REVOKE ALL ON %I.hilo_lock_salt FROM PUBLIC', s);
  EXECUTE format('INSERT INTO %I.hilo_lock_salt SELECT decode(replace('
                 'gen_random_uuid()::text || gen_random_uuid()::text, '
                 '''-'', ''''), ''hex'') WHERE NOT EXISTS '
                 '(SELECT 1 FROM %I.hilo_lock_salt)', s, s);
END
$hilo$;
)sql";

}  // namespace

absl::Status CreateOrCheckPostgresSchema(PostgresConnection& c,
                                         absl::string_view description) {
  // Servers starting together take turns: the first creates the schema,
  // the others find it.
  auto init = [&]() -> absl::Status {
    if (absl::Status s =
            c.Exec(absl::StrCat("BEGIN; SELECT pg_advisory_xact_lock(",
                                kSchemaLockKey, ")"),
                   "locking the schema");
        !s.ok()) {
      return s;
    }
    absl::StatusOr<Result> found = c.Query(
        "SELECT current_schema(), to_regclass('hilo_meta') IS NOT NULL, "
        "(SELECT count(*) FROM information_schema.tables "
        "WHERE table_schema = current_schema())",
        "reading the schema");
    if (!found.ok()) return found.status();
    const PGresult* r = found->get();
    if (PQgetisnull(r, 0, 0)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "PostgreSQL at %s has no schema to create hilo's tables in (the "
          "search_path names none that exists)",
          description));
    }
    const std::string schema = PQgetvalue(r, 0, 0);
    const bool has_meta = std::string(PQgetvalue(r, 0, 1)) == "t";
    const std::string tables = PQgetvalue(r, 0, 2);
    if (!has_meta) {
      if (tables != "0") {
        return absl::FailedPreconditionError(absl::StrFormat(
            "PostgreSQL at %s, schema %s, holds %s tables of another "
            "application and no hilo_meta table; give hilo a database or "
            "schema of its own (e.g. ?options=-csearch_path%%3Dhilo)",
            description, schema, tables));
      }
      return c.Exec(
          absl::StrCat(kSchema, kIncarnations, kNodesTable, kRetiredTable,
                       "INSERT INTO hilo_meta VALUES ('application', '",
                       kApplication, "'), ('schema_version', '", kSchemaVersion,
                       "')"),
          "creating the schema");
    }
    absl::StatusOr<Result> meta = c.Query(
        "SELECT (SELECT value FROM hilo_meta WHERE key = 'application'), "
        "(SELECT value FROM hilo_meta WHERE key = 'schema_version')",
        "reading hilo_meta");
    if (!meta.ok()) return meta.status();
    const std::string application = PQgetvalue(meta->get(), 0, 0);
    int version = 0;
    if (application != kApplication ||
        !absl::SimpleAtoi(PQgetvalue(meta->get(), 0, 1), &version)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "PostgreSQL at %s, schema %s: table hilo_meta belongs to another "
          "application (\"%s\")",
          description, schema, application));
    }
    if (version >= 1 && version <= 6) {
      return c.Exec(
          absl::StrCat(version == 1 ? kNodesTable : "",
                       version <= 2 ? kDigestTokens : "",
                       version <= 3 ? kCeilings : "", kRetiredTable,
                       kIncarnations, "UPDATE hilo_meta SET value = '",
                       kSchemaVersion, "' WHERE key = 'schema_version'"),
          absl::StrFormat("migrating hilo schema version %d to %d", version,
                          kSchemaVersion));
    }
    if (version != kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "PostgreSQL at %s, schema %s, has hilo schema version %d; this "
          "server understands %d",
          description, schema, version, kSchemaVersion));
    }
    return absl::OkStatus();
  };
  absl::Status s = init();
  if (s.ok()) s = c.Exec(kLockSalt, "keeping the creation locks' secret");
  if (s.ok()) {
    s = c.Exec(absl::StrCat(kCountTable, kRecount), "counting the collections");
  }
  if (s.ok()) s = c.Exec("COMMIT", "committing the schema");
  if (!s.ok()) {
    if (c.ok() && c.InTransaction()) c.Exec("ROLLBACK", "").IgnoreError();
    return s;
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace hilo
