#include "service/store/postgres/postgres_connection.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
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
  std::unique_ptr<PostgresConnection> connection(new PostgresConnection(
      conn, description, options.statement_timeout + absl::Seconds(1)));
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot connect to PostgreSQL at %s: %s", description,
        conn != nullptr ? Trimmed(PQerrorMessage(conn)) : "out of memory"));
  }
  // A session may hold row locks only while it works: one that stops
  // inside a transaction (a frozen process, a debugger) is ended by the
  // server, and a wait for a lock fails instead of stalling the batch.
  auto ms = [](absl::Duration d) {
    return std::max<int64_t>(1, absl::ToInt64Milliseconds(d));
  };
  const std::string setup = absl::StrFormat(
      "SET synchronous_commit = on; SET statement_timeout = %d; "
      "SET lock_timeout = %d; SET idle_in_transaction_session_timeout = %d",
      ms(options.statement_timeout), ms(options.lock_timeout),
      ms(options.idle_in_transaction_timeout));
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

bool PostgresConnection::ok() const {
  return !given_up_ && PQstatus(conn_) == CONNECTION_OK;
}

std::chrono::steady_clock::time_point PostgresConnection::AnswerDeadline()
    const {
  return std::chrono::steady_clock::now() +
         absl::ToChronoMilliseconds(answer_timeout_);
}

void PostgresConnection::SendCancel() {
  PGcancel* cancel = PQgetCancel(conn_);
  if (cancel == nullptr) return;
  // PQcancel connects anew and may block as long as a connect can: never
  // on the thread that must give up in time. The thread owns `cancel`.
  std::thread([cancel] {
    char error[256];
    PQcancel(cancel, error, sizeof(error));
    PQfreeCancel(cancel);
  }).detach();
}

absl::Status PostgresConnection::AwaitResult(
    std::chrono::steady_clock::time_point& deadline, bool& cancelled,
    absl::string_view what) {
  using Clock = std::chrono::steady_clock;
  while (PQisBusy(conn_) == 1) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      stalled_ = true;
      if (!cancelled) {
        cancelled = true;
        SendCancel();
        deadline = now + absl::ToChronoMilliseconds(kCancelGrace);
        continue;
      }
      given_up_ = true;
      return absl::UnavailableError(absl::StrFormat(
          "%s on PostgreSQL at %s: no answer within %s, nor %s after a "
          "cancel request; the connection is given up",
          what, description_, absl::FormatDuration(answer_timeout_),
          absl::FormatDuration(kCancelGrace)));
    }
    pollfd p{};
    p.fd = PQsocket(conn_);
    p.events = POLLIN;
    const auto wait =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
    const int n = poll(&p, 1, static_cast<int>(wait.count()));
    if (n < 0 && errno != EINTR) return Broken(what);
    if (n > 0 && PQconsumeInput(conn_) != 1) return Broken(what);
  }
  return absl::OkStatus();
}

absl::StatusOr<Result> PostgresConnection::Run(const char* sql,
                                               Statement* statement,
                                               absl::string_view what) {
  stalled_ = false;
  if (!ok()) return Broken(what);
  int sent;
  if (statement != nullptr) {
    Params& p = statement->params;
    sent = PQsendQueryParams(conn_, statement->sql.c_str(), p.size(), p.types(),
                             p.values(), p.lengths(), p.formats(),
                             /*resultFormat=*/1);
  } else {
    sent = PQsendQuery(conn_, sql);
  }
  if (sent != 1) return Broken(what);
  auto deadline = AnswerDeadline();
  bool cancelled = false;
  Result last;
  absl::Status error;
  while (true) {
    if (absl::Status s = AwaitResult(deadline, cancelled, what); !s.ok()) {
      return s;
    }
    Result result(PQgetResult(conn_));
    if (result == nullptr) break;
    const ExecStatusType status = PQresultStatus(result.get());
    if (error.ok() && status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      error = Error(result.get(), what);
    }
    last = std::move(result);
  }
  if (!error.ok()) return error;
  if (last == nullptr) return Broken(what);
  return last;
}

absl::StatusOr<Result> PostgresConnection::Query(const std::string& sql,
                                                 absl::string_view what) {
  return Run(sql.c_str(), nullptr, what);
}

absl::Status PostgresConnection::Exec(const std::string& sql,
                                      absl::string_view what) {
  return Query(sql, what).status();
}

absl::StatusOr<Result> PostgresConnection::Query(Statement& statement,
                                                 absl::string_view what) {
  return Run(nullptr, &statement, what);
}

absl::Status PostgresConnection::Pipeline(
    std::vector<Statement>& statements, std::vector<Result>* results,
    const std::function<void(int)>& after_send) {
  results->clear();
  stalled_ = false;
  if (!ok()) return Broken("sending a pipeline");
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
  auto deadline = AnswerDeadline();
  bool cancelled = false;
  auto next = [&](Result* out) -> absl::Status {
    absl::Status s = AwaitResult(deadline, cancelled, "reading a result");
    if (s.ok()) out->reset(PQgetResult(conn_));
    return s;
  };
  for (size_t i = 0; i < statements.size(); ++i) {
    Result result;
    if (absl::Status s = next(&result); !s.ok()) return s;
    if (result == nullptr) return Broken("reading a result");
    // Each statement's results end with a null.
    for (Result extra;;) {
      if (absl::Status s = next(&extra); !s.ok()) return s;
      if (extra == nullptr) break;
    }
    results->push_back(std::move(result));
  }
  Result sync;
  if (absl::Status s = next(&sync); !s.ok()) return s;
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
      sqlstate == "40P01" || sqlstate == "25006" || sqlstate == "55P03" ||
      sqlstate == kLockTableFull) {
    // Connection gone, server shutting down or statement cancelled
    // (57), serialization failure, deadlock, read-only standby, lock
    // not available, the shared lock table full (out of shared memory,
    // which any role that may connect can cause with advisory locks):
    // another attempt may succeed, on this server or another.
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

PostgresConnection::PostgresConnection(PGconn* conn, std::string description,
                                       absl::Duration answer_timeout)
    : conn_(conn),
      description_(std::move(description)),
      answer_timeout_(answer_timeout) {
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
      given_up_                          ? "the connection was given up"
      : PQstatus(conn_) == CONNECTION_OK ? "the protocol broke off"
                                         : Trimmed(PQerrorMessage(conn_))));
}

}  // namespace internal
}  // namespace hilo
