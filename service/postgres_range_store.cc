#include "service/postgres_range_store.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "hilo/base/await.h"
#include "service/collection_rules.h"
#include "service/validation.h"

namespace hilo {
namespace {

// The schema's identity and version, kept in table hilo_meta.
constexpr char kApplication[] = "hilo";
// Version 2 added hilo_nodes.
constexpr int kSchemaVersion = 2;
// Key of the advisory lock held while the schema is created or checked
// ("HiLo" in ASCII).
constexpr int64_t kSchemaLockKey = 0x48694c6f;

// Names are bytes compared byte for byte (as in SQLite), so the list order
// never depends on a collation. Tokens are unsigned 64-bit values stored in
// BIGINT, bit for bit.
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
  previous_return_floor BIGINT NOT NULL
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

// Takes tag $1 for holder $2 for $3 milliseconds, unless another holder's
// claim is still running; returns a row if taken. Two servers claiming one
// free tag at once: the second waits for the first's row and then sees it
// held.
constexpr char kClaimTag[] =
    "INSERT INTO hilo_nodes (tag, holder, expires_at) "
    "VALUES ($1, $2, now() + $3::BIGINT * interval '1 millisecond') "
    "ON CONFLICT (tag) DO UPDATE SET holder = excluded.holder, "
    "expires_at = excluded.expires_at "
    "WHERE hilo_nodes.holder = excluded.holder OR hilo_nodes.expires_at < "
    "now() "
    "RETURNING tag";
// Who holds tag $1 and for how many more whole seconds.
constexpr char kTagHolder[] =
    "SELECT holder, greatest(0, ceil(extract(epoch FROM expires_at - now())))"
    "::BIGINT FROM hilo_nodes WHERE tag = $1";
// Renews tag $1 of holder $2 for $3 milliseconds; returns whether it did
// (the UPDATE sees another server's claim made meanwhile) and, for the
// message when it did not, the holder as this statement's snapshot saw it.
constexpr char kRenewTag[] =
    "WITH renewed AS (UPDATE hilo_nodes SET expires_at = now() + $3::BIGINT * "
    "interval '1 millisecond' WHERE tag = $1 AND holder = $2 RETURNING tag) "
    "SELECT EXISTS (SELECT 1 FROM renewed), "
    "(SELECT holder FROM hilo_nodes WHERE tag = $1)";
constexpr char kReleaseTag[] =
    "DELETE FROM hilo_nodes WHERE tag = $1 AND holder = $2";

constexpr char kColumns[] =
    "name, max, return_floor, updated_at_us, range_token, previous_token, "
    "previous_return_floor";

constexpr int kMaxBatch = 4096;

// Type OIDs of the parameters sent (pg_type.h is not in libpq-dev).
constexpr Oid kInt8Oid = 20;
constexpr Oid kInt4Oid = 23;
constexpr Oid kByteaOid = 17;
constexpr Oid kTextOid = 25;

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

// libpq's message on one line: its own lines end in newlines, some followed
// by a tab.
std::string Trimmed(const char* message) {
  std::string line = std::string(
      absl::StripTrailingAsciiWhitespace(message != nullptr ? message : ""));
  absl::StrReplaceAll({{"\n\t", " "}, {"\n", " "}}, &line);
  return line;
}

// Binary parameters of one statement, kept alive until it is sent.
class Params {
 public:
  void Bytes(absl::string_view bytes) { Add(kByteaOid, std::string(bytes)); }
  // Text is sent as its bytes, in the connection's encoding (UTF-8).
  void Text(absl::string_view text) { Add(kTextOid, std::string(text)); }
  void Int64(int64_t value) {
    std::string big_endian(8, '\0');
    for (int i = 0; i < 8; ++i) {
      big_endian[i] =
          static_cast<char>(static_cast<uint64_t>(value) >> (56 - 8 * i));
    }
    Add(kInt8Oid, std::move(big_endian));
  }
  void Int32(int32_t value) {
    std::string big_endian(4, '\0');
    for (int i = 0; i < 4; ++i) {
      big_endian[i] =
          static_cast<char>(static_cast<uint32_t>(value) >> (24 - 8 * i));
    }
    Add(kInt4Oid, std::move(big_endian));
  }
  // "$<n>" of the parameter added next.
  std::string Next() const { return absl::StrCat("$", types_.size() + 1); }
  int size() const { return static_cast<int>(types_.size()); }
  const Oid* types() const { return types_.data(); }
  const char* const* values() {
    values_.clear();
    for (const std::string& v : storage_) values_.push_back(v.data());
    return values_.data();
  }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  void Add(Oid type, std::string value) {
    types_.push_back(type);
    lengths_.push_back(static_cast<int>(value.size()));
    formats_.push_back(1);
    storage_.push_back(std::move(value));
  }
  std::deque<std::string> storage_;  // stable addresses
  std::vector<Oid> types_;
  std::vector<const char*> values_;
  std::vector<int> lengths_;
  std::vector<int> formats_;
};

struct Statement {
  std::string sql;
  Params params;
};

int64_t ReadInt64(const PGresult* r, int row, int column) {
  const auto* bytes =
      reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, column));
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | bytes[i];
  return static_cast<int64_t>(value);
}

// A row of hilo_collections, read in kColumns order, binary.
NamedCollectionState ReadRow(const PGresult* r, int row) {
  NamedCollectionState out;
  out.name.assign(PQgetvalue(r, row, 0), PQgetlength(r, row, 0));
  out.state.max = ReadInt64(r, row, 1);
  out.state.return_floor = ReadInt64(r, row, 2);
  out.state.updated_at = absl::FromUnixMicros(ReadInt64(r, row, 3));
  out.state.range_token = static_cast<uint64_t>(ReadInt64(r, row, 4));
  out.state.previous_token = static_cast<uint64_t>(ReadInt64(r, row, 5));
  out.state.previous_return_floor = ReadInt64(r, row, 6);
  return out;
}

void AddRow(absl::string_view name, const CollectionState& s, Params* p,
            std::string* values) {
  absl::StrAppend(values, values->empty() ? "(" : ", (", p->Next());
  p->Bytes(name);
  for (int64_t v :
       {s.max, s.return_floor, absl::ToUnixMicros(s.updated_at),
        static_cast<int64_t>(s.range_token),
        static_cast<int64_t>(s.previous_token), s.previous_return_floor}) {
    absl::StrAppend(values, ", ", p->Next());
    p->Int64(v);
  }
  values->append(")");
}

// "IN ($1, $2, ...)" over `names`.
std::string InList(const std::vector<std::string>& names, Params* p) {
  std::vector<std::string> refs;
  for (const std::string& name : names) {
    refs.push_back(p->Next());
    p->Bytes(name);
  }
  return absl::StrCat("IN (", absl::StrJoin(refs, ", "), ")");
}

}  // namespace

absl::StatusOr<std::string> DescribePostgresConnection(absl::string_view uri) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(std::string(uri).c_str(), &error);
  if (options == nullptr) {
    std::string message = Trimmed(error);
    PQfreemem(error);
    return absl::InvalidArgumentError(absl::StrCat(
        "PostgreSQL connection string cannot be parsed: ", message));
  }
  std::map<std::string, std::string> values;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val != nullptr) values[o->keyword] = o->val;
  }
  PQconninfoFree(options);
  auto get = [&](const char* key, const char* fallback) {
    auto it = values.find(key);
    return it != values.end() && !it->second.empty() ? it->second
                                                     : std::string(fallback);
  };
  const std::string user = get("user", "");
  return absl::StrCat("postgresql://", user.empty() ? "" : user + "@",
                      get("host", get("hostaddr", "localhost").c_str()), ":",
                      get("port", "5432"), "/", get("dbname", user.c_str()));
}

// One libpq connection, used by one thread at a time.
class PostgresRangeStore::Connection {
 public:
  // Connects and prepares the session: durable commits, a statement
  // timeout. UNAVAILABLE naming `description` if it cannot.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const PostgresRangeStoreOptions& options,
      const std::string& description) {
    const std::string timeout = absl::StrCat(
        std::max<int64_t>(1, absl::ToInt64Seconds(options.connect_timeout)));
    // Earlier keywords are defaults the connection string overrides. The
    // keepalives and TCP timeout notice a database that went silent (a
    // partition) in about ten seconds, not TCP's many minutes.
    const char* keywords[] = {"connect_timeout",
                              "application_name",
                              "keepalives",
                              "keepalives_idle",
                              "keepalives_interval",
                              "keepalives_count",
                              "tcp_user_timeout",
                              "dbname",
                              nullptr};
    const char* values[] = {
        timeout.c_str(),     "hilo", "1", "5", "2", "3", "10000",
        options.uri.c_str(), nullptr};
    PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
    std::unique_ptr<Connection> connection(new Connection(conn, description));
    if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
      return absl::UnavailableError(absl::StrFormat(
          "cannot connect to PostgreSQL at %s: %s", description,
          conn != nullptr ? Trimmed(PQerrorMessage(conn)) : "out of memory"));
    }
    const std::string setup = absl::StrFormat(
        "SET synchronous_commit = on; SET statement_timeout = %d",
        std::max<int64_t>(
            1, absl::ToInt64Milliseconds(options.statement_timeout)));
    if (absl::Status s = connection->Exec(setup, "setting up the session");
        !s.ok()) {
      return s;
    }
    return connection;
  }

  ~Connection() { PQfinish(conn_); }

  // The first warning the server sent since the last call, or "".
  std::string TakeWarning() { return std::exchange(warning_, ""); }

  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }

  // Runs `sql` (one or more statements, text protocol) and returns the last
  // statement's result.
  absl::StatusOr<Result> Query(const std::string& sql, absl::string_view what) {
    Result result(PQexec(conn_, sql.c_str()));
    const ExecStatusType status =
        result != nullptr ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      return Error(result.get(), what);
    }
    return result;
  }
  absl::Status Exec(const std::string& sql, absl::string_view what) {
    return Query(sql, what).status();
  }
  // Runs one statement with parameters; results are binary.
  absl::StatusOr<Result> Query(Statement& statement, absl::string_view what) {
    Params& p = statement.params;
    Result result(PQexecParams(conn_, statement.sql.c_str(), p.size(),
                               p.types(), p.values(), p.lengths(), p.formats(),
                               /*resultFormat=*/1));
    const ExecStatusType status =
        result != nullptr ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      return Error(result.get(), what);
    }
    return result;
  }

  // Sends `statements` in one pipeline ending in a sync and collects one
  // result per statement (binary columns). Returns an error only if the
  // connection failed; a statement's own error is in its result (and the
  // statements after it are PGRES_PIPELINE_ABORTED).
  absl::Status Pipeline(std::vector<Statement>& statements,
                        std::vector<Result>* results,
                        const std::function<void(int)>& after_send = nullptr) {
    results->clear();
    if (PQenterPipelineMode(conn_) != 1)
      return Broken("entering pipeline mode");
    for (Statement& s : statements) {
      if (PQsendQueryParams(conn_, s.sql.c_str(), s.params.size(),
                            s.params.types(), s.params.values(),
                            s.params.lengths(), s.params.formats(),
                            /*resultFormat=*/1) != 1) {
        return Broken("sending a statement");
      }
    }
    if (PQpipelineSync(conn_) != 1) return Broken("sending a sync");
    if (after_send) after_send(PQsocket(conn_));
    for (size_t i = 0; i < statements.size(); ++i) {
      Result result(PQgetResult(conn_));
      if (result == nullptr) return Broken("reading a result");
      // Each statement's results end with a null.
      while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);
      results->push_back(std::move(result));
    }
    Result sync(PQgetResult(conn_));
    if (sync == nullptr || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC) {
      return Broken("reading the end of a pipeline");
    }
    if (PQexitPipelineMode(conn_) != 1) return Broken("leaving pipeline mode");
    return absl::OkStatus();
  }

  bool InTransaction() const {
    const PGTransactionStatusType t = PQtransactionStatus(conn_);
    return t == PQTRANS_INTRANS || t == PQTRANS_INERROR;
  }

  // What a failed statement means for the batch, with the database's
  // message.
  absl::Status Error(const PGresult* result, absl::string_view what) const {
    const char* state = result != nullptr
                            ? PQresultErrorField(result, PG_DIAG_SQLSTATE)
                            : nullptr;
    const std::string message =
        result != nullptr && *PQresultErrorMessage(result) != '\0'
            ? Trimmed(PQresultErrorMessage(result))
            : Trimmed(PQerrorMessage(conn_));
    absl::StatusCode code = absl::StatusCode::kInternal;
    const absl::string_view sqlstate = state != nullptr ? state : "";
    if (!ok() || sqlstate.empty() || absl::StartsWith(sqlstate, "08") ||
        absl::StartsWith(sqlstate, "57") || sqlstate == "40001" ||
        sqlstate == "40P01" || sqlstate == "25006" || sqlstate == "55P03") {
      // Connection gone, server shutting down or statement cancelled
      // (57), serialization failure, deadlock, read-only standby, lock
      // not available: another attempt may succeed.
      code = absl::StatusCode::kUnavailable;
    } else if (absl::StartsWith(sqlstate, "53")) {
      code = absl::StatusCode::kResourceExhausted;  // disk full, no memory
    }
    return absl::Status(
        code,
        absl::StrFormat(
            "%s on PostgreSQL at %s: %s%s", what, description_, message,
            sqlstate.empty() ? ""
                             : absl::StrCat(" (SQLSTATE ", sqlstate, ")")));
  }

 private:
  Connection(PGconn* conn, std::string description)
      : conn_(conn), description_(std::move(description)) {
    if (conn_ != nullptr)
      PQsetNoticeReceiver(conn_, &Connection::OnNotice, this);
  }

  static void OnNotice(void* self, const PGresult* notice) {
    auto* c = static_cast<Connection*>(self);
    const char* severity =
        PQresultErrorField(notice, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (severity != nullptr && std::strcmp(severity, "WARNING") == 0 &&
        c->warning_.empty()) {
      c->warning_ = Trimmed(PQresultErrorMessage(notice));
    }
  }

  absl::Status Broken(absl::string_view what) {
    return absl::UnavailableError(absl::StrFormat(
        "%s on PostgreSQL at %s: %s", what, description_,
        ok() ? "the protocol broke off" : Trimmed(PQerrorMessage(conn_))));
  }

  PGconn* const conn_;
  const std::string description_;
  std::string warning_;
};

// One operation of a batch: what it asks and, once run, what it got.
struct PostgresRangeStore::Request : GroupCommit::Operation {
  enum class Kind {
    kAllocate,
    kReturn,
    kSetFloor,
    kPut,
    kDelete,
    kGet,
    kList,
    kProbe,  // counts the rows; on the read connection
    kRenew   // renews the node tag's lease; on the write connection
  };
  Kind kind = Kind::kGet;
  std::string name;  // the collection; for kList, the name to list after
  int64_t size = 0, floor = 0, end = 0, last = 0;
  int64_t max_floor_jump = kNoFloorJumpLimit;
  uint64_t token = 0;
  int limit = 0;
  CollectionState put;  // for kPut

  bool writes() const {
    return kind == Kind::kAllocate || kind == Kind::kReturn ||
           kind == Kind::kSetFloor || kind == Kind::kPut ||
           kind == Kind::kDelete;
  }

  // Results.
  Allocation allocation;
  ReturnOutcome returned;
  FloorOutcome floored;
  CollectionState deleted;
  std::optional<CollectionState> state;
  std::vector<NamedCollectionState> rows;
  int64_t count = 0;  // kProbe: rows in the table
};

absl::StatusOr<std::unique_ptr<PostgresRangeStore>> PostgresRangeStore::Open(
    PostgresRangeStoreOptions options) {
  if (options.uri.empty()) {
    return absl::InvalidArgumentError("PostgreSQL connection string is empty");
  }
  // A statement takes at most 65,535 parameters: 7 per row written.
  if (options.max_batch < 1 || options.max_batch > kMaxBatch) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max batch is %d; on PostgreSQL it must be 1 to %d",
                        options.max_batch, kMaxBatch));
  }
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max attempts is %d; it must be at least 1", options.max_attempts));
  }
  if (const std::optional<NodeTagLease>& lease = options.node_tag_lease) {
    if (lease->candidates.empty() || lease->holder.empty()) {
      return absl::InvalidArgumentError(
          "a node tag lease needs at least one tag and a holder");
    }
    for (const std::string& tag : lease->candidates) {
      if (absl::Status s = ValidateNodeTag(tag); !s.ok()) return s;
    }
    if (lease->duration <= options.probe_interval) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "a node tag lease of %s would run out between two renewals (the "
          "probe runs every %s)",
          absl::FormatDuration(lease->duration),
          absl::FormatDuration(options.probe_interval)));
    }
  }
  absl::StatusOr<std::string> description =
      DescribePostgresConnection(options.uri);
  if (!description.ok()) return description.status();
  std::unique_ptr<PostgresRangeStore> store(
      new PostgresRangeStore(std::move(options), *std::move(description)));
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(store->options_, store->description_);
  if (!connection.ok()) return connection.status();
  Connection& c = **connection;

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
          store->description_));
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
            store->description_, schema, tables));
      }
      return c.Exec(
          absl::StrCat(kSchema, kNodesTable,
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
          store->description_, schema, application));
    }
    if (version == 1) {
      return c.Exec(
          absl::StrCat(kNodesTable, "UPDATE hilo_meta SET value = '",
                       kSchemaVersion, "' WHERE key = 'schema_version'"),
          "migrating hilo schema version 1 to 2");
    }
    if (version != kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "PostgreSQL at %s, schema %s, has hilo schema version %d; this "
          "server understands %d",
          store->description_, schema, version, kSchemaVersion));
    }
    return absl::OkStatus();
  };
  absl::Status s = init();
  if (s.ok()) s = c.Exec("COMMIT", "committing the schema");
  if (!s.ok()) {
    if (c.ok() && c.InTransaction()) c.Exec("ROLLBACK", "").IgnoreError();
    return s;
  }
  absl::StatusOr<Result> count =
      c.Query("SELECT count(*) FROM hilo_collections", "counting collections");
  if (!count.ok()) return count.status();
  int64_t rows = 0;
  if (absl::SimpleAtoi(PQgetvalue(count->get(), 0, 0), &rows)) {
    store->collection_count_.store(rows);
  }
  if (store->options_.node_tag_lease.has_value()) {
    if (absl::Status s = store->ClaimNodeTag(c); !s.ok()) return s;
  }
  store->writer_.connection = *std::move(connection);

  PostgresRangeStore* raw = store.get();
  store->queue_ = std::make_unique<GroupCommit>(
      raw->options_.max_batch,
      [raw](absl::Span<GroupCommit::Operation* const> batch) {
        raw->RunBatch(raw->writer_, batch);
      });
  // The reading connection opens with the first read batch.
  store->read_queue_ = std::make_unique<GroupCommit>(
      raw->options_.max_batch,
      [raw](absl::Span<GroupCommit::Operation* const> batch) {
        raw->RunBatch(raw->reader_, batch);
      });
  store->prober_ = std::thread([raw] { raw->ProbeLoop(); });
  return store;
}

PostgresRangeStore::PostgresRangeStore(PostgresRangeStoreOptions options,
                                       std::string description)
    : options_(std::move(options)),
      description_(std::move(description)),
      clock_(options_.clock != nullptr ? options_.clock : SystemClock::Get()) {}

PostgresRangeStore::~PostgresRangeStore() {
  {
    base::MutexLock lock(&probe_mu_);
    stopping_ = true;
  }
  if (prober_.joinable()) prober_.join();
  // Completes every queued operation before the connections go.
  read_queue_.reset();
  queue_.reset();
  // The next server may take the tag at once; if this fails, the claim runs
  // out by itself.
  if (!node_tag_.empty() && !node_tag_lost_ && !writer_.broken &&
      writer_.connection != nullptr && writer_.connection->ok()) {
    Statement release{kReleaseTag, {}};
    release.params.Text(node_tag_);
    release.params.Text(options_.node_tag_lease->holder);
    writer_.connection->Query(release, "releasing the node tag").IgnoreError();
  }
  reader_.connection.reset();
  writer_.connection.reset();
}

absl::Status PostgresRangeStore::ClaimNodeTag(Connection& c) {
  const NodeTagLease& lease = *options_.node_tag_lease;
  const std::string lease_ms =
      absl::StrCat(absl::ToInt64Milliseconds(lease.duration));
  const absl::Time give_up = absl::Now() + lease.wait_for_held;
  while (true) {
    std::vector<std::string> held;
    for (const std::string& tag : lease.candidates) {
      Statement claim{kClaimTag, {}};
      claim.params.Text(tag);
      claim.params.Text(lease.holder);
      claim.params.Text(lease_ms);
      absl::StatusOr<Result> claimed = c.Query(claim, "claiming a node tag");
      if (!claimed.ok()) return claimed.status();
      if (PQntuples(claimed->get()) == 1) {
        node_tag_ = tag;
        return absl::OkStatus();
      }
      Statement who{kTagHolder, {}};
      who.params.Text(tag);
      absl::StatusOr<Result> holder = c.Query(who, "reading a node tag");
      if (!holder.ok()) return holder.status();
      // Freed since the claim: the next round takes it.
      if (PQntuples(holder->get()) == 0) continue;
      held.push_back(
          absl::StrFormat("%s by \"%s\" for %ds more", tag,
                          absl::string_view(PQgetvalue(holder->get(), 0, 0),
                                            PQgetlength(holder->get(), 0, 0)),
                          ReadInt64(holder->get(), 0, 1)));
    }
    const absl::Duration left = give_up - absl::Now();
    if (left <= absl::ZeroDuration() && !held.empty()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "PostgreSQL at %s: every node tag this server may take is held by "
          "another live server (%s); a crashed server's tag is free once its "
          "claim runs out",
          description_, absl::StrJoin(held, ", ")));
    }
    absl::SleepFor(std::min(left, absl::Milliseconds(200)));
  }
}

void PostgresRangeStore::NodeTagLost(absl::string_view holder) {
  node_tag_lost_ = true;
  if (!options_.on_node_tag_lost) return;
  std::string who = absl::StrCat("\"", holder, "\"");
  if (holder.empty()) {
    who = "nobody (its row was deleted)";
  } else if (holder == options_.node_tag_lease->holder) {
    // Another server's claim, made at this very moment, is not in the
    // renewal's snapshot yet.
    who = "another server";
  }
  options_.on_node_tag_lost(absl::FailedPreconditionError(absl::StrFormat(
      "PostgreSQL at %s: node tag %s is now held by %s; this server could "
      "not renew its claim for %s, and must no longer use the tag",
      description_, node_tag_, who,
      absl::FormatDuration(options_.node_tag_lease->duration))));
}

void PostgresRangeStore::ProbeLoop() {
  while (true) {
    {
      base::MutexLock lock(&probe_mu_);
      probe_mu_.AwaitWithTimeout(
          [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(probe_mu_) { return stopping_; },
          options_.probe_interval);
      if (stopping_) return;
      if (probe_pending_) continue;
      probe_pending_ = true;
    }
    auto probe = std::make_unique<Request>();
    probe->kind = Request::Kind::kProbe;
    probe->read_only = true;
    probe->done = [this](absl::Status) {
      // The batch counted the rows (collection_count_) if it could.
      base::MutexLock lock(&probe_mu_);
      probe_pending_ = false;
    };
    read_queue_->Submit(std::move(probe));
    if (node_tag_.empty()) continue;
    {
      base::MutexLock lock(&probe_mu_);
      if (renew_pending_) continue;
      renew_pending_ = true;
    }
    // On the write connection: a server whose writes still go through must
    // be one that still holds its tag. Renewed on the read connection, a
    // server that could not open or keep that one would go on allocating
    // under a tag whose lease ran out and another server took.
    auto renew = std::make_unique<Request>();
    renew->kind = Request::Kind::kRenew;
    renew->done = [this](absl::Status) {
      base::MutexLock lock(&probe_mu_);
      renew_pending_ = false;
    };
    queue_->Submit(std::move(renew));
  }
}

template <typename T>
void PostgresRangeStore::Submit(std::unique_ptr<Request> request,
                                StoreCallback<T> done, T Request::*result) {
  Request* raw = request.get();
  request->done = [raw, result,
                   done = std::move(done)](absl::Status s) mutable {
    if (s.ok()) {
      done(std::move(raw->*result));
    } else {
      done(std::move(s));
    }
  };
  // Reads have a queue and a connection of their own: a flood of them never
  // delays a write, and the probe's count never lengthens a write batch.
  (raw->read_only ? read_queue_ : queue_)->Submit(std::move(request));
}

void PostgresRangeStore::SetReachable(bool reachable) {
  if (reachable_.exchange(reachable) != reachable && options_.on_reachability) {
    options_.on_reachability(reachable);
  }
}

void PostgresRangeStore::LostConnection(Link& link) {
  link.broken = true;
  SetReachable(false);
}

absl::Status PostgresRangeStore::EnsureConnected(Link& link) {
  if (link.connection != nullptr && link.connection->ok() && !link.broken) {
    return absl::OkStatus();
  }
  link.connection.reset();
  link.broken = false;
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(options_, description_);
  if (!connection.ok()) {
    SetReachable(false);
    return connection.status();
  }
  link.connection = *std::move(connection);
  return absl::OkStatus();
}

void PostgresRangeStore::RunBatch(
    Link& link, absl::Span<GroupCommit::Operation* const> ops) {
  std::vector<Request*> batch;
  batch.reserve(ops.size());
  bool reads = false;
  for (GroupCommit::Operation* op : ops) {
    batch.push_back(static_cast<Request*>(op));
    const Request::Kind kind = batch.back()->kind;
    reads |= kind == Request::Kind::kGet || kind == Request::Kind::kList;
  }
  if (reads && options_.before_read_batch_for_testing) {
    options_.before_read_batch_for_testing();
  }
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    if (absl::Status s = EnsureConnected(link); !s.ok()) {
      for (Request* r : batch) r->status = s;
      return;
    }
    if (RunBatchOnce(link, batch) == Attempt::kDone) return;
  }
  for (Request* r : batch) {
    r->status = absl::UnavailableError(absl::StrFormat(
        "PostgreSQL at %s: the transaction failed %d times on conflicts "
        "with other servers (serialization failures, deadlocks or "
        "collections created at the same moment); nothing was changed",
        description_, options_.max_attempts));
  }
}

PostgresRangeStore::Attempt PostgresRangeStore::RunBatchOnce(
    Link& link, absl::Span<Request* const> batch) {
  Connection& c = *link.connection;
  // Each attempt starts from nothing: no result of an earlier one survives.
  for (Request* r : batch) {
    r->status = absl::OkStatus();
    r->allocation = Allocation{};
    r->returned = ReturnOutcome{};
    r->floored = FloorOutcome{};
    r->deleted = CollectionState{};
    r->state.reset();
    r->rows.clear();
    r->count = 0;
  }
  // Fails every request (or only the writes) with `s`, ending the
  // transaction; a failure the database may clear by itself is retried.
  // Filled once the rows are read.
  struct Row {
    std::optional<CollectionState> stored;
    std::optional<CollectionState> now;
    bool dirty = false;
  };
  std::map<std::string, Row> rows;
  auto fail = [&](absl::Status s, bool writes_only) -> Attempt {
    if (!link.broken &&
        (!c.ok() ||
         (c.InTransaction() && !c.Exec("ROLLBACK", "rolling back").ok()))) {
      LostConnection(link);
    }
    for (Request* r : batch) {
      if (!writes_only || r->writes()) {
        r->status = s;
      } else if (r->kind == Request::Kind::kGet) {
        // Nothing of the batch is stored: answer what is.
        auto it = rows.find(r->name);
        r->state = it != rows.end() ? it->second.stored : std::nullopt;
      }
    }
    return Attempt::kDone;
  };
  // A conflict another attempt may clear: ends the transaction and runs the
  // batch again, unless that cost the connection; then everything fails
  // with `s` (nothing was committed).
  auto retry = [&](const absl::Status& conflict) -> Attempt {
    fail(absl::UnavailableError(absl::StrFormat(
             "PostgreSQL at %s: a transaction rolled back on a conflict (%s) "
             "could not run again, the connection failed; nothing was "
             "committed",
             description_, conflict.message())),
         /*writes_only=*/false);
    return link.broken ? Attempt::kDone : Attempt::kRetry;
  };
  auto retryable = [](const PGresult* r) {
    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    return state != nullptr &&
           (std::strcmp(state, "40001") == 0 ||  // serialization failure
            std::strcmp(state, "40P01") == 0 ||  // deadlock
            std::strcmp(state, "23505") == 0);   // collection created meanwhile
  };

  // Phase one: begin, lock and read the rows written, read the rest.
  std::vector<std::string> written, read;
  bool any_write = false;
  for (Request* r : batch) {
    if (r->writes()) {
      written.push_back(r->name);
      any_write = true;
    } else if (r->kind == Request::Kind::kGet) {
      read.push_back(r->name);
    }
  }
  std::sort(written.begin(), written.end());
  written.erase(std::unique(written.begin(), written.end()), written.end());
  std::sort(read.begin(), read.end());
  read.erase(std::unique(read.begin(), read.end()), read.end());
  read.erase(std::remove_if(read.begin(), read.end(),
                            [&](const std::string& name) {
                              return std::binary_search(written.begin(),
                                                        written.end(), name);
                            }),
             read.end());

  std::vector<Statement> first;
  first.push_back({"BEGIN ISOLATION LEVEL READ COMMITTED", {}});
  int locked_at = -1, read_at = -1;
  if (!written.empty()) {
    locked_at = static_cast<int>(first.size());
    Statement s;
    // In name order, so two servers lock shared rows in the same order.
    s.sql = absl::StrCat("SELECT ", kColumns, " FROM hilo_collections WHERE ",
                         "name ", InList(written, &s.params),
                         " ORDER BY name FOR UPDATE");
    first.push_back(std::move(s));
  }
  if (!read.empty()) {
    read_at = static_cast<int>(first.size());
    Statement s;
    s.sql = absl::StrCat("SELECT ", kColumns, " FROM hilo_collections WHERE ",
                         "name ", InList(read, &s.params));
    first.push_back(std::move(s));
  }
  std::vector<int> list_at(batch.size(), -1);
  int renew_at = -1;  // the node tag's renewal, once per batch
  for (size_t i = 0; i < batch.size(); ++i) {
    Request* r = batch[i];
    if (r->kind == Request::Kind::kList) {
      list_at[i] = static_cast<int>(first.size());
      Statement s;
      s.sql = absl::StrCat("SELECT ", kColumns, " FROM hilo_collections WHERE ",
                           "name > ", s.params.Next());
      s.params.Bytes(r->name);
      absl::StrAppend(&s.sql, " ORDER BY name LIMIT ", s.params.Next());
      s.params.Int32(r->limit);
      first.push_back(std::move(s));
    } else if (r->kind == Request::Kind::kProbe) {
      list_at[i] = static_cast<int>(first.size());
      first.push_back({"SELECT count(*)::BIGINT FROM hilo_collections", {}});
    } else if (r->kind == Request::Kind::kRenew) {
      if (renew_at < 0 && !node_tag_.empty() && !node_tag_lost_) {
        renew_at = static_cast<int>(first.size());
        Statement renew{kRenewTag, {}};
        renew.params.Text(node_tag_);
        renew.params.Text(options_.node_tag_lease->holder);
        renew.params.Text(absl::StrCat(
            absl::ToInt64Milliseconds(options_.node_tag_lease->duration)));
        first.push_back(std::move(renew));
      }
    }
  }
  // A batch that only reads ends here.
  if (!any_write) first.push_back({"COMMIT", {}});

  std::vector<Result> results;
  if (absl::Status s = c.Pipeline(first, &results); !s.ok()) {
    // Results may be left unread: the connection is out of step for good.
    LostConnection(link);
    return fail(s, /*writes_only=*/false);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    const ExecStatusType status = PQresultStatus(results[i].get());
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) continue;
    if (retryable(results[i].get())) {
      return retry(c.Error(results[i].get(), "reading collections"));
    }
    return fail(c.Error(results[i].get(), i == 0 ? "beginning a transaction"
                                                 : "reading collections"),
                /*writes_only=*/false);
  }
  SetReachable(true);
  if (renew_at >= 0) {
    const PGresult* r = results[renew_at].get();
    // Binary bool: one byte.
    const bool renewed = PQgetvalue(r, 0, 0)[0] != 0;
    if (!renewed) {
      std::string holder =
          PQgetisnull(r, 0, 1)
              ? std::string()
              : std::string(PQgetvalue(r, 0, 1), PQgetlength(r, 0, 1));
      if (holder == options_.node_tag_lease->holder) {
        // The UPDATE waited for a claim made at this very moment and then
        // saw it; the statement's snapshot did not. A statement of its own
        // (a new snapshot) names the new holder.
        Statement who{kTagHolder, {}};
        who.params.Text(node_tag_);
        if (absl::StatusOr<Result> now = c.Query(who, "reading a node tag");
            now.ok()) {
          holder = PQntuples(now->get()) == 0
                       ? std::string()
                       : std::string(PQgetvalue(now->get(), 0, 0),
                                     PQgetlength(now->get(), 0, 0));
        }
      }
      NodeTagLost(holder);
    }
  }

  // Rows in the table before this batch, if a probe counted them.
  std::optional<int64_t> counted;
  // The rows as stored, then as the batch leaves them.
  for (int at : {locked_at, read_at}) {
    if (at < 0) continue;
    const PGresult* r = results[at].get();
    for (int i = 0; i < PQntuples(r); ++i) {
      NamedCollectionState row = ReadRow(r, i);
      rows[row.name].stored = row.state;
      rows[row.name].now = row.state;
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    Request* r = batch[i];
    if (list_at[i] >= 0) {
      const PGresult* result = results[list_at[i]].get();
      if (r->kind == Request::Kind::kProbe) {
        r->count = ReadInt64(result, 0, 0);
        counted = r->count;
        continue;
      }
      r->rows.clear();
      for (int j = 0; j < PQntuples(result); ++j) {
        r->rows.push_back(ReadRow(result, j));
      }
      continue;
    }
    if (r->kind == Request::Kind::kGet) {
      // As the batch leaves it so far (as stored, if the commit fails).
      auto it = rows.find(r->name);
      r->state = it != rows.end() ? it->second.now : std::nullopt;
      continue;
    }
    if (r->kind == Request::Kind::kRenew) continue;  // judged above
    Row& row = rows[r->name];
    const absl::Time now = clock_->Now();
    switch (r->kind) {
      case Request::Kind::kAllocate: {
        absl::StatusOr<CollectionState> next = ApplyAllocate(
            r->name, row.now.value_or(CollectionState{}), r->size, r->floor,
            r->max_floor_jump, r->token, now, &r->allocation.range);
        if (!next.ok()) {
          r->status = next.status();
          break;
        }
        r->allocation.created = !row.now.has_value();
        row.now = *next;
        row.dirty = true;
        break;
      }
      case Request::Kind::kReturn: {
        if (!row.now.has_value()) {
          r->returned = ReturnOutcome{false, 0};
          break;
        }
        std::optional<CollectionState> next =
            ApplyReturn(*row.now, r->end, r->last, r->token, now, &r->returned);
        if (next.has_value()) {
          row.now = *next;
          row.dirty = true;
        }
        break;
      }
      case Request::Kind::kSetFloor: {
        std::optional<CollectionState> next = ApplySetFloor(
            row.now.value_or(CollectionState{}), r->floor, now, &r->floored);
        if (next.has_value() || !row.now.has_value()) {
          r->floored.created = !row.now.has_value();
          row.now = next.value_or(CollectionState{.updated_at = now});
          row.dirty = true;
        }
        break;
      }
      case Request::Kind::kPut:
        row.now = r->put;
        row.dirty = true;
        break;
      case Request::Kind::kDelete: {
        if (!row.now.has_value()) {
          r->status = absl::NotFoundError(absl::StrFormat(
              "collection \"%s\" has no row; there is nothing to delete",
              r->name));
          break;
        }
        if (absl::Status s = CheckDeletable(r->name, *row.now); !s.ok()) {
          r->status = std::move(s);
          break;
        }
        r->deleted = *row.now;
        row.now.reset();
        row.dirty = true;
        break;
      }
      default:
        break;
    }
  }

  if (!any_write && counted.has_value()) {
    collection_count_.store(*counted, std::memory_order_relaxed);
  }

  // Phase two: write what changed and commit.
  Statement insert, update;
  std::string inserted, updated;
  std::vector<std::string> deleted;
  int64_t created = 0;  // less the rows deleted
  for (const auto& [name, row] : rows) {
    if (!row.dirty) continue;
    if (!row.now.has_value()) {
      // Deleted; a row the batch created and deleted was never stored.
      if (row.stored.has_value()) {
        deleted.push_back(name);
        --created;
      }
    } else if (row.stored.has_value()) {
      AddRow(name, *row.now, &update.params, &updated);
    } else {
      AddRow(name, *row.now, &insert.params, &inserted);
      ++created;
    }
  }
  std::vector<Statement> second;
  if (!inserted.empty()) {
    // No ON CONFLICT: a row another server created meanwhile fails the
    // batch, which then runs again on that row.
    insert.sql = absl::StrCat("INSERT INTO hilo_collections (", kColumns,
                              ") VALUES ", inserted);
    second.push_back(std::move(insert));
  }
  if (!updated.empty()) {
    // Rows this transaction holds locked: the conflict is certain.
    update.sql = absl::StrCat(
        "INSERT INTO hilo_collections (", kColumns, ") VALUES ", updated,
        " ON CONFLICT (name) DO UPDATE SET max = excluded.max, "
        "return_floor = excluded.return_floor, "
        "updated_at_us = excluded.updated_at_us, "
        "range_token = excluded.range_token, "
        "previous_token = excluded.previous_token, "
        "previous_return_floor = excluded.previous_return_floor");
    second.push_back(std::move(update));
  }
  if (!deleted.empty()) {
    // Rows this transaction holds locked: no other server can use them
    // between the rule's check and the delete.
    Statement remove;
    remove.sql = absl::StrCat("DELETE FROM hilo_collections WHERE name ",
                              InList(deleted, &remove.params));
    second.push_back(std::move(remove));
  }
  if (any_write) {
    // A COMMIT cancelled while it waits for a synchronous standby (by a
    // timeout, say) still answers COMMIT, with only a warning that it may
    // not be replicated: no timeout for it, and a warning fails the writes.
    second.push_back({"SET LOCAL statement_timeout = 0", {}});
    second.push_back({"COMMIT", {}});
  }

  if (!second.empty()) {
    const absl::Time commit_start = absl::Now();
    c.TakeWarning();
    absl::Status sent =
        c.Pipeline(second, &results, options_.after_commit_sent_for_testing);
    if (!sent.ok()) {
      LostConnection(link);
      // Perhaps during COMMIT: whether it applied is unknown, so nothing
      // may be reported applied. Reads were answered before it.
      return fail(absl::UnavailableError(absl::StrCat(
                      sent.message(),
                      "; the outcome of the commit is unknown, nothing is "
                      "reported applied")),
                  /*writes_only=*/true);
    }
    for (size_t i = 0; i < results.size(); ++i) {
      PGresult* r = results[i].get();
      const ExecStatusType status = PQresultStatus(r);
      const bool commit = i + 1 == results.size();
      // COMMIT of a transaction that failed answers ROLLBACK.
      if (status == PGRES_COMMAND_OK &&
          (!commit || std::strcmp(PQcmdStatus(r), "COMMIT") == 0)) {
        continue;
      }
      if (status == PGRES_FATAL_ERROR && retryable(r)) {
        return retry(c.Error(r, "writing collections"));
      }
      return fail(
          status == PGRES_FATAL_ERROR
              ? c.Error(r, commit ? "committing" : "writing collections")
              : absl::UnavailableError(absl::StrFormat(
                    "committing on PostgreSQL at %s: the transaction "
                    "was rolled back",
                    description_)),
          /*writes_only=*/true);
    }
    if (std::string warning = c.TakeWarning(); !warning.empty()) {
      return fail(absl::UnavailableError(absl::StrFormat(
                      "committing on PostgreSQL at %s: %s; the commit may be "
                      "lost if the database fails over, so nothing is "
                      "reported applied",
                      description_, warning)),
                  /*writes_only=*/true);
    }
    const absl::Duration commit_time = absl::Now() - commit_start;
    if (counted.has_value()) {
      collection_count_.store(*counted + created, std::memory_order_relaxed);
    } else {
      collection_count_.fetch_add(created, std::memory_order_relaxed);
    }
    if (options_.on_commit) {
      options_.on_commit(commit_time, static_cast<int>(batch.size()),
                         collection_count_.load(std::memory_order_relaxed));
    }
  }
  return Attempt::kDone;
}

void PostgresRangeStore::DoAllocateAsync(absl::string_view collection,
                                         int64_t size, int64_t floor,
                                         uint64_t token, int64_t max_floor_jump,
                                         StoreCallback<Allocation> done) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kAllocate;
  r->name = std::string(collection);
  r->size = size;
  r->floor = floor;
  r->max_floor_jump = max_floor_jump;
  r->token = token;
  Submit(std::move(r), std::move(done), &Request::allocation);
}

void PostgresRangeStore::DoReturnAsync(absl::string_view collection,
                                       int64_t end, int64_t last,
                                       uint64_t token,
                                       StoreCallback<ReturnOutcome> done) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kReturn;
  r->name = std::string(collection);
  r->end = end;
  r->last = last;
  r->token = token;
  Submit(std::move(r), std::move(done), &Request::returned);
}

void PostgresRangeStore::GetAsync(
    absl::string_view collection,
    StoreCallback<std::optional<CollectionState>> done) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kGet;
  r->read_only = true;
  r->name = std::string(collection);
  Submit(std::move(r), std::move(done), &Request::state);
}

void PostgresRangeStore::DoListAsync(
    absl::string_view after, int limit,
    StoreCallback<std::vector<NamedCollectionState>> done) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kList;
  r->read_only = true;
  r->name = std::string(after);
  r->limit = limit;
  Submit(std::move(r), std::move(done), &Request::rows);
}

void PostgresRangeStore::DoSetFloorAsync(absl::string_view collection,
                                         int64_t floor,
                                         StoreCallback<FloorOutcome> done) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kSetFloor;
  r->name = std::string(collection);
  r->floor = floor;
  Submit(std::move(r), std::move(done), &Request::floored);
}

void PostgresRangeStore::DeleteAsync(absl::string_view collection,
                                     StoreCallback<CollectionState> done) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kDelete;
  r->name = std::string(collection);
  Submit(std::move(r), std::move(done), &Request::deleted);
}

absl::Status PostgresRangeStore::PutForTesting(absl::string_view collection,
                                               const CollectionState& state) {
  auto r = std::make_unique<Request>();
  r->kind = Request::Kind::kPut;
  r->name = std::string(collection);
  r->put = state;
  return base::Await<absl::Status>(
      [&](absl::AnyInvocable<void(absl::Status)> done) {
        r->done = std::move(done);
        queue_->Submit(std::move(r));
      });
}

}  // namespace hilo
