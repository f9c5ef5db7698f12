#include "service/store/postgres/postgres_history.h"

#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace hilo {
namespace internal {
namespace {

// Every collection moves on to its ceiling, as SetFloor(ceiling) would
// move it: Max and both return floors at least the ceiling, and the tokens
// retired, a row whose Max is at its ceiling already included: a return of
// a range issued in the history that was lost must not apply (its client
// may retry one the old primary applied, whose numbers went out again
// there). SET reads the row as it was, RETURNING as it is, so the sum is
// what was skipped; the count is of rows whose Max moved.
constexpr char kMoveOn[] = R"sql(
WITH old AS (
  SELECT name, max FROM hilo_collections
  WHERE ceiling > max OR range_token <> 0 OR previous_token <> 0
  FOR UPDATE
), moved AS (
  UPDATE hilo_collections h SET
    max = GREATEST(h.max, h.ceiling),
    return_floor = GREATEST(h.max, h.ceiling),
    previous_return_floor =
      GREATEST(h.previous_return_floor, h.max, h.ceiling),
    range_token = 0,
    previous_token = 0,
    updated_at_us = $1
  FROM old WHERE h.name = old.name
  RETURNING h.max - old.max AS skipped
)
SELECT count(*) FILTER (WHERE skipped > 0)::text,
       coalesce(sum(skipped), 0)::text
FROM moved
)sql";

// In one statement: the position the standbys must reach (`$1`, or when
// it is empty the primary's WAL flushed now, which covers every commit that
// has returned), the physical standbys the primary lists (base backups,
// which also show here, are not standbys), how many have not flushed that
// position yet, and how many of those hide their position from this role;
// and whether hilo_meta records that a standby was seen; then each
// standby's identity (postgres_history.h, StandbySet), a line each. A role
// without pg_read_all_stats (pg_monitor has it) sees only each row's pid,
// every other column NULL, state too: such a row is a standby it cannot
// see.
// The first statement of a wait: the position to wait for, and whether a
// standby was ever recorded. Two plain statements cost less than one that
// does both: unprepared, its plan took longer than the round trip it saved
// (docs/reliability.md has the figures).
constexpr char kWalPosition[] = R"sql(
SELECT pg_current_wal_flush_lsn()::text,
       (SELECT count(*) FROM hilo_meta WHERE key = 'standby_seen')
)sql";

constexpr char kStandbysBehind[] = R"sql(
SELECT count(*) FILTER (WHERE r.flush_lsn IS NULL OR r.flush_lsn < $1::pg_lsn),
       count(*) FILTER (WHERE r.flush_lsn IS NULL),
       string_agg(CASE WHEN r.flush_lsn IS NULL OR r.flush_lsn < $1::pg_lsn
                  THEN coalesce(r.application_name, '') || ' at ' ||
                       coalesce(r.flush_lsn::text, 'an unknown position')
                  END, ', '),
       count(*),
       string_agg(coalesce(host(r.client_addr), 'the local socket'), E'\n')
FROM pg_stat_replication r
LEFT JOIN pg_replication_slots s ON s.active_pid = r.pid
WHERE r.state IS DISTINCT FROM 'backup'
  AND s.slot_type IS DISTINCT FROM 'logical'
)sql";

// Written once; no server deletes it (docs/reliability.md says how an
// operator does). Its value says when and why, for whoever reads it.
constexpr char kRecordStandbySeen[] = R"sql(
INSERT INTO hilo_meta VALUES ('standby_seen', now()::text || ': ' || $1)
ON CONFLICT (key) DO NOTHING
)sql";

// The identities kStandbysBehind's `result` lists (its column 4).
StandbySet ReadStandbys(const PGresult* result) {
  StandbySet listed;
  if (PQgetisnull(result, 0, 4)) return listed;
  for (absl::string_view identity :
       absl::StrSplit(absl::string_view(PQgetvalue(result, 0, 4),
                                        PQgetlength(result, 0, 4)),
                      '\n')) {
    ++listed[std::string(identity)];
  }
  return listed;
}

int64_t SaturatingParse(const char* text) {
  int64_t value = 0;
  if (absl::SimpleAtoi(text, &value)) return value;
  // A sum past INT64_MAX (numeric in SQL): as far as we can count.
  return text[0] == '-' ? 0 : INT64_MAX;
}

// What hilo_meta recorded, from columns `id_column` (the system
// identifier) and `timeline_column` of `r`'s first row; an empty system
// identifier if neither row is there. hilo writes both rows in one
// statement, so one alone, an empty identifier or a timeline that is not
// a number as hilo writes one was written by someone else: such a record
// is kept as one that no live history matches (identifier "(missing)",
// timeline 0, which no database has), so the store moves on rather than
// trust it.
DatabaseHistory RecordedHistory(const PGresult* r, int id_column,
                                int timeline_column) {
  DatabaseHistory recorded;
  const bool has_id = !PQgetisnull(r, 0, id_column);
  const bool has_timeline = !PQgetisnull(r, 0, timeline_column);
  if (!has_id && !has_timeline) return recorded;
  if (has_id) recorded.system_identifier = PQgetvalue(r, 0, id_column);
  if (recorded.system_identifier.empty()) {
    recorded.system_identifier = "(missing)";
  }
  // hilo writes the number as StrCat does: " 1", "+1" or "01" is not its.
  const char* timeline = has_timeline ? PQgetvalue(r, 0, timeline_column) : "";
  if (!absl::SimpleAtoi(timeline, &recorded.timeline) ||
      absl::StrCat(recorded.timeline) != timeline) {
    recorded.timeline = 0;
  }
  return recorded;
}

}  // namespace

std::string DescribeHistory(const DatabaseHistory& h) {
  if (h.system_identifier.empty()) return "nothing recorded";
  return absl::StrFormat("system identifier %s, timeline %d",
                         h.system_identifier, h.timeline);
}

absl::StatusOr<HistoryCheck> CheckHistory(PostgresConnection& c,
                                          absl::Time now) {
  auto run = [&]() -> absl::StatusOr<HistoryCheck> {
    // hilo_meta's 'application' row (always there) serializes servers
    // that check at once: one moves the collections on, the others then
    // find the new history recorded.
    if (absl::Status s =
            c.Exec("BEGIN ISOLATION LEVEL READ COMMITTED; SELECT value FROM "
                   "hilo_meta WHERE key = 'application' FOR UPDATE",
                   "locking hilo_meta");
        !s.ok()) {
      return s;
    }
    absl::StatusOr<Result> found = c.Query(
        "SELECT system_identifier::text, "
        "pg_walfile_name(pg_current_wal_flush_lsn()), "
        "(SELECT value FROM hilo_meta WHERE key = 'system_identifier'), "
        "(SELECT value FROM hilo_meta WHERE key = 'timeline') "
        "FROM pg_control_system()",
        "reading the database's history");
    if (!found.ok()) return found.status();
    const PGresult* r = found->get();
    HistoryCheck check;
    check.live.system_identifier = PQgetvalue(r, 0, 0);
    const std::string wal_file = PQgetvalue(r, 0, 1);
    // A WAL file's name begins with its timeline, 8 hex digits.
    uint32_t timeline = 0;
    if (wal_file.size() < 8 ||
        !absl::SimpleHexAtoi(wal_file.substr(0, 8), &timeline)) {
      return absl::InternalError(absl::StrFormat(
          "PostgreSQL named its WAL file \"%s\"; expected a timeline in its "
          "first 8 hex digits",
          wal_file));
    }
    check.live.timeline = timeline;
    check.recorded = RecordedHistory(r, 2, 3);
    if (check.recorded == check.live) {
      return check;
    }
    if (!check.recorded.system_identifier.empty()) {
      // The history changed: nothing after the last reservation each row
      // holds may have been kept, so every collection starts above it.
      check.changed = true;
      Statement move;
      move.sql = kMoveOn;
      move.params.Int64(absl::ToUnixMicros(now));
      absl::StatusOr<Result> moved =
          c.Query(move, "moving collections on past their reservations");
      if (!moved.ok()) return moved.status();
      check.collections_moved = SaturatingParse(PQgetvalue(moved->get(), 0, 0));
      check.numbers_skipped = SaturatingParse(PQgetvalue(moved->get(), 0, 1));
      // A promotion is the usual cause, and the old primary comes back as
      // a standby; the primary that recorded one may not have passed the
      // record on before it failed.
      if (absl::Status s = RecordStandbySeen(
              c, absl::StrCat("the history changed from ",
                              DescribeHistory(check.recorded), " to ",
                              DescribeHistory(check.live)));
          !s.ok()) {
        return s;
      }
    }
    // First use (or a schema from before the record): nothing to compare
    // with, so only record it.
    Statement record;
    record.sql =
        absl::StrCat("INSERT INTO hilo_meta VALUES ('system_identifier', ",
                     record.params.Next(), ")");
    record.params.Text(check.live.system_identifier);
    absl::StrAppend(&record.sql, ", ('timeline', ", record.params.Next(),
                    ") ON CONFLICT (key) DO UPDATE SET value = excluded.value");
    record.params.Text(absl::StrCat(check.live.timeline));
    if (absl::StatusOr<Result> recorded =
            c.Query(record, "recording the database's history");
        !recorded.ok()) {
      return recorded.status();
    }
    if (absl::Status s = c.Exec("COMMIT", "committing the history"); !s.ok()) {
      return s;
    }
    return check;
  };
  absl::StatusOr<HistoryCheck> check = run();
  if (!check.ok() && c.ok() && c.InTransaction()) {
    c.Exec("ROLLBACK", "").IgnoreError();
  } else if (check.ok() && c.InTransaction()) {
    // The history was as recorded: nothing written.
    if (absl::Status s = c.Exec("COMMIT", "ending the history check");
        !s.ok()) {
      return s;
    }
  }
  return check;
}

absl::Status CheckStandbysVisible(PostgresConnection& c,
                                  absl::string_view description) {
  absl::StatusOr<Result> r = c.Query(
      "SELECT current_user, (SELECT rolsuper FROM pg_roles WHERE rolname = "
      "current_user) OR pg_has_role(current_user, 'pg_read_all_stats', "
      "'USAGE'), (SELECT count(*) FROM pg_stat_replication)",
      "checking that this role sees the standbys");
  if (!r.ok()) return r.status();
  const std::string user = PQgetvalue(r->get(), 0, 0);
  const bool sees = std::string(PQgetvalue(r->get(), 0, 1)) == "t";
  const std::string standbys = PQgetvalue(r->get(), 0, 2);
  if (sees || standbys == "0") return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "PostgreSQL at %s streams to %s standby(s), and role %s cannot see "
      "their positions, so no range could be confirmed on them: GRANT "
      "pg_monitor TO %s (see docs/reliability.md)",
      description, standbys, user, user));
}

absl::Status RecordStandbySeen(PostgresConnection& c, absl::string_view why) {
  Statement record;
  record.sql = kRecordStandbySeen;
  record.params.Text(why);
  return c.Query(record, "recording that a standby was seen").status();
}

StandbySet MostOf(const StandbySet& a, const StandbySet& b) {
  StandbySet most = a;
  for (const auto& [identity, n] : b) {
    int64_t& m = most[identity];
    m = std::max(m, n);
  }
  return most;
}

int64_t MissingStandbys(const StandbySet& expected, const StandbySet& listed,
                        std::string* names) {
  int64_t missing = 0;
  for (const auto& [identity, n] : expected) {
    auto found = listed.find(identity);
    const int64_t lacking = n - (found == listed.end() ? 0 : found->second);
    if (lacking <= 0) continue;
    missing += lacking;
    if (names != nullptr) {
      absl::StrAppend(names, names->empty() ? "" : ", ", identity);
    }
  }
  return missing;
}

StandbySet Without(const StandbySet& a, const StandbySet& b) {
  StandbySet more;
  for (const auto& [identity, n] : a) {
    auto found = b.find(identity);
    const int64_t extra = n - (found == b.end() ? 0 : found->second);
    if (extra > 0) more[identity] = extra;
  }
  return more;
}

absl::StatusOr<StandbySet> ListStandbys(PostgresConnection& c) {
  Statement list;
  list.sql = kStandbysBehind;
  list.params.Text("0/0");
  absl::StatusOr<Result> r = c.Query(list, "listing the standbys");
  if (!r.ok()) return r.status();
  return ReadStandbys(r->get());
}

StandbyWait WaitForStandbys(PostgresConnection& c, absl::Duration bound,
                            absl::Duration poll, absl::string_view description,
                            const StandbySet& expected) {
  StandbyWait wait;
  const auto deadline =
      std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(bound);
  absl::StatusOr<Result> position =
      c.Query(kWalPosition, "reading the WAL position");
  if (!position.ok()) {
    wait.status = position.status();
    return wait;
  }
  const std::string lsn = PQgetvalue(position->get(), 0, 0);
  wait.seen_recorded = std::string(PQgetvalue(position->get(), 0, 1)) != "0";
  for (;;) {
    Statement behind;
    behind.sql = kStandbysBehind;
    behind.params.Text(lsn);
    absl::StatusOr<Result> r = c.Query(behind, "reading the standbys");
    if (!r.ok()) {
      wait.status = r.status();
      return wait;
    }
    // A statement with parameters answers in binary.
    const PGresult* result = r->get();
    const int64_t waiting = ReadInt64(result, 0, 0);
    const int64_t hidden = ReadInt64(result, 0, 1);
    wait.listed = ReadInt64(result, 0, 3);
    wait.listed_standbys = ReadStandbys(result);
    wait.most_listed = MostOf(wait.most_listed, wait.listed_standbys);
    std::string missing_names;
    const int64_t missing =
        MissingStandbys(MostOf(expected, wait.most_listed),
                        wait.listed_standbys, &missing_names);
    if (waiting == 0 && missing <= 0) return wait;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string why;
      if (waiting > 0) {
        absl::StrAppendFormat(&why, "%d standby(s) did not confirm it (%s)",
                              waiting,
                              absl::string_view(PQgetvalue(result, 0, 2),
                                                PQgetlength(result, 0, 2)));
      }
      if (missing > 0) {
        absl::StrAppendFormat(&why,
                              "%s%d standby(s) counted before are not listed "
                              "(%s; one that left without confirming may be "
                              "the one promoted next)",
                              why.empty() ? "" : " and ", missing,
                              missing_names);
      }
      wait.status = absl::UnavailableError(absl::StrFormat(
          "PostgreSQL at %s: %s within %s (a new reservation, WAL %s)%s; "
          "nothing of it is reported applied",
          description, why, absl::FormatDuration(bound), lsn,
          hidden > 0 ? "; this role cannot see the standbys' positions: "
                       "GRANT pg_monitor to it"
                     : ""));
      return wait;
    }
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(poll));
  }
}

}  // namespace internal
}  // namespace hilo
