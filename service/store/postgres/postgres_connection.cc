#include "service/store/postgres/postgres_connection.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace hilo {
namespace internal {

std::string Trimmed(const char* message) {
  std::string line = std::string(
      absl::StripTrailingAsciiWhitespace(message != nullptr ? message : ""));
  absl::StrReplaceAll({{"\n\t", " "}, {"\n", " "}}, &line);
  return line;
}

int64_t ReadInt64(const PGresult* r, int row, int column) {
  const auto* bytes =
      reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, column));
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | bytes[i];
  return static_cast<int64_t>(value);
}

absl::StatusOr<std::unique_ptr<PostgresConnection>> PostgresConnection::Open(
    const PostgresConnectionOptions& options, const std::string& description) {
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
  std::unique_ptr<PostgresConnection> connection(
      new PostgresConnection(conn, description));
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot connect to PostgreSQL at %s: %s", description,
        conn != nullptr ? Trimmed(PQerrorMessage(conn)) : "out of memory"));
  }
  const std::string setup = absl::StrFormat(
      "SET synchronous_commit = on; SET statement_timeout = %d",
      std::max<int64_t>(1,
                        absl::ToInt64Milliseconds(options.statement_timeout)));
  if (absl::Status s = connection->Exec(setup, "setting up the session");
      !s.ok()) {
    return s;
  }
  return connection;
}

PostgresConnection::~PostgresConnection() { PQfinish(conn_); }

std::string PostgresConnection::TakeWarning() {
  return std::exchange(warning_, "");
}

bool PostgresConnection::ok() const { return PQstatus(conn_) == CONNECTION_OK; }

absl::StatusOr<Result> PostgresConnection::Query(const std::string& sql,
                                                 absl::string_view what) {
  Result result(PQexec(conn_, sql.c_str()));
  const ExecStatusType status =
      result != nullptr ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return Error(result.get(), what);
  }
  return result;
}

absl::Status PostgresConnection::Exec(const std::string& sql,
                                      absl::string_view what) {
  return Query(sql, what).status();
}

absl::StatusOr<Result> PostgresConnection::Query(Statement& statement,
                                                 absl::string_view what) {
  Params& p = statement.params;
  Result result(PQexecParams(conn_, statement.sql.c_str(), p.size(), p.types(),
                             p.values(), p.lengths(), p.formats(),
                             /*resultFormat=*/1));
  const ExecStatusType status =
      result != nullptr ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return Error(result.get(), what);
  }
  return result;
}

absl::Status PostgresConnection::Pipeline(
    std::vector<Statement>& statements, std::vector<Result>* results,
    const std::function<void(int)>& after_send) {
  results->clear();
  if (PQenterPipelineMode(conn_) != 1) return Broken("entering pipeline mode");
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

bool PostgresConnection::InTransaction() const {
  const PGTransactionStatusType t = PQtransactionStatus(conn_);
  return t == PQTRANS_INTRANS || t == PQTRANS_INERROR;
}

absl::Status PostgresConnection::Error(const PGresult* result,
                                       absl::string_view what) const {
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
          sqlstate.empty() ? "" : absl::StrCat(" (SQLSTATE ", sqlstate, ")")));
}

PostgresConnection::PostgresConnection(PGconn* conn, std::string description)
    : conn_(conn), description_(std::move(description)) {
  if (conn_ != nullptr)
    PQsetNoticeReceiver(conn_, &PostgresConnection::OnNotice, this);
}

void PostgresConnection::OnNotice(void* self, const PGresult* notice) {
  auto* c = static_cast<PostgresConnection*>(self);
  const char* severity =
      PQresultErrorField(notice, PG_DIAG_SEVERITY_NONLOCALIZED);
  if (severity != nullptr && std::strcmp(severity, "WARNING") == 0 &&
      c->warning_.empty()) {
    c->warning_ = Trimmed(PQresultErrorMessage(notice));
  }
}

absl::Status PostgresConnection::Broken(absl::string_view what) {
  return absl::UnavailableError(absl::StrFormat(
      "%s on PostgreSQL at %s: %s", what, description_,
      ok() ? "the protocol broke off" : Trimmed(PQerrorMessage(conn_))));
}

}  // namespace internal
}  // namespace hilo
