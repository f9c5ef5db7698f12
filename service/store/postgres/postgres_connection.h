// PostgresConnection: one libpq connection, and the few pieces hilo's
// PostgreSQL code speaks through it: binary parameters (Params, Statement),
// binary results (Result, ReadInt64), pipelines, and errors that name the
// database and tell whether another attempt may succeed.
//
// Nothing here knows hilo's tables; postgres_schema.h, postgres_node_tag.h,
// postgres_row_codec.h and the batch runner do. Private to
// service/store/postgres/.
//
//   absl::StatusOr<std::unique_ptr<internal::PostgresConnection>> c =
//       internal::PostgresConnection::Open(
//           {.uri = uri}, "postgresql://hilo@db:5432/hilo");
//   if (!c.ok()) return c.status();
//   internal::Statement s{"SELECT $1::BIGINT", {}};
//   s.params.Int64(7);
//   absl::StatusOr<internal::Result> r = (*c)->Query(s, "reading seven");
//
// Not thread-safe: a connection is used by one thread at a time.
#ifndef HILO_SERVICE_STORE_POSTGRES_POSTGRES_CONNECTION_H_
#define HILO_SERVICE_STORE_POSTGRES_POSTGRES_CONNECTION_H_

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/store/postgres/postgres_options.h"

namespace hilo {
namespace internal {

// SQLSTATE 53200, out of shared memory: among others, the shared lock
// table is full. Error() makes it UNAVAILABLE.
inline constexpr char kLockTableFull[] = "53200";

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

// libpq's message on one line: its own lines end in newlines, some followed
// by a tab.
std::string Trimmed(const char* message);

// Type OIDs of the parameters sent (pg_type.h is not in libpq-dev).
constexpr Oid kInt8Oid = 20;
constexpr Oid kInt4Oid = 23;
constexpr Oid kByteaOid = 17;
constexpr Oid kTextOid = 25;

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

// Column `column` of row `row` of a binary result, a BIGINT.
int64_t ReadInt64(const PGresult* r, int row, int column);

// What a connection is opened with; each default is read from
// PostgresRangeStoreOptions, which the store passes on.
struct PostgresConnectionOptions {
  // A libpq connection string (see PostgresRangeStoreOptions::uri).
  std::string uri;
  absl::Duration connect_timeout = PostgresRangeStoreOptions().connect_timeout;
  // The session's statement_timeout, and how long this side waits for any
  // answer (see PostgresConnection).
  absl::Duration statement_timeout =
      PostgresRangeStoreOptions().statement_timeout;
  // The session's lock_timeout and idle_in_transaction_session_timeout.
  absl::Duration lock_timeout = PostgresRangeStoreOptions().lock_timeout;
  absl::Duration idle_in_transaction_timeout =
      PostgresRangeStoreOptions().idle_in_transaction_timeout;
};

// One libpq connection, used by one thread at a time.
//
// Nothing waits for the database without a bound. The server's
// statement_timeout ends a statement that runs too long, but not every
// wait: COMMIT waiting for a synchronous standby is not a statement the
// timer covers. So this side waits at most statement_timeout and a second
// for any answer; then it asks the server to cancel (which ends such a
// wait with a WARNING, the commit local only) and waits kCancelGrace more;
// with still no answer it gives the connection up (ok() turns false) and
// the call fails with UNAVAILABLE.
class PostgresConnection {
 public:
  // Connects and prepares the session: durable commits, a statement
  // timeout. UNAVAILABLE naming `description` if it cannot.
  static absl::StatusOr<std::unique_ptr<PostgresConnection>> Open(
      const PostgresConnectionOptions& options, const std::string& description);

  ~PostgresConnection();
  PostgresConnection(const PostgresConnection&) = delete;
  PostgresConnection& operator=(const PostgresConnection&) = delete;

  // The first warning the server sent since the last call, or "".
  std::string TakeWarning();

  // False once the connection failed or was given up.
  bool ok() const;
  // Whether the last call waited past its bound (and was cancelled, or the
  // connection given up): the database is stalled, not merely refusing.
  bool stalled() const { return stalled_; }

  // Runs `sql` (one or more statements, text protocol) and returns the last
  // statement's result.
  absl::StatusOr<Result> Query(const std::string& sql, absl::string_view what);
  absl::Status Exec(const std::string& sql, absl::string_view what);
  // Runs one statement with parameters; results are binary.
  absl::StatusOr<Result> Query(Statement& statement, absl::string_view what);

  // Sends `statements` in one pipeline ending in a sync and collects one
  // result per statement (binary columns). Returns an error only if the
  // connection failed; a statement's own error is in its result (and the
  // statements after it are PGRES_PIPELINE_ABORTED). `after_send` runs
  // with the socket once everything is sent, before any result is read.
  absl::Status Pipeline(std::vector<Statement>& statements,
                        std::vector<Result>* results,
                        const std::function<void(int)>& after_send = nullptr);

  bool InTransaction() const;

  // What a failed statement means for the batch, with the database's
  // message: UNAVAILABLE where another attempt may succeed (connection
  // lost, server shutting down, statement cancelled, serialization
  // failure, deadlock, read-only standby, lock not available),
  // RESOURCE_EXHAUSTED for SQLSTATE class 53, INTERNAL otherwise.
  absl::Status Error(const PGresult* result, absl::string_view what) const;

 private:
  PostgresConnection(PGconn* conn, std::string description,
                     absl::Duration answer_timeout);

  // How long the server may take to answer after a cancel request.
  static constexpr absl::Duration kCancelGrace = absl::Seconds(2);

  static void OnNotice(void* self, const PGresult* notice);
  absl::Status Broken(absl::string_view what);
  // Sends what the connection has buffered and runs `statement` (or,
  // without one, `sql` as text); then collects every result up to the
  // end of the query, bounded; returns the last, or the first error.
  absl::StatusOr<Result> Run(const char* sql, Statement* statement,
                             absl::string_view what);
  // Blocks until PQgetResult would not block, within the call's bound
  // (`deadline`, `cancelled` track it across the results of one call).
  absl::Status AwaitResult(std::chrono::steady_clock::time_point& deadline,
                           bool& cancelled, absl::string_view what);
  // The bound of one call from now.
  std::chrono::steady_clock::time_point AnswerDeadline() const;
  // Asks the server, from a thread of its own, to cancel what runs.
  void SendCancel();

  PGconn* const conn_;
  const std::string description_;
  const absl::Duration answer_timeout_;
  std::string warning_;
  bool given_up_ = false;
  bool stalled_ = false;
};

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_POSTGRES_POSTGRES_CONNECTION_H_
