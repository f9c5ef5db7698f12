#include "testing/postgres_instance.h"

#include <libpq-fe.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hilo::testing_util {
namespace {

constexpr char kScript[] = HILO_SOURCE_DIR "/testing/temp_postgres.sh";

}  // namespace

PostgresInstance::PostgresInstance(std::string dir,
                                   std::unique_ptr<TempDir> scratch, bool owned)
    : dir_(std::move(dir)), scratch_(std::move(scratch)), owned_(owned) {}

PostgresInstance::~PostgresInstance() {
  if (owned_) Script("destroy", "", nullptr).IgnoreError();
}

absl::Status PostgresInstance::Script(const std::string& command,
                                      const std::string& mode,
                                      std::string* out) {
  TempDir scratch;
  std::vector<std::string> argv = {"/bin/sh", kScript, command, dir_};
  if (!mode.empty()) argv.push_back(mode);
  CommandResult result = RunCommand(argv, scratch);
  if (result.exit_code != 0) {
    return absl::UnavailableError(
        absl::StrFormat("temp_postgres.sh %s %s failed (exit %d): %s", command,
                        dir_, result.exit_code, result.err));
  }
  if (out != nullptr) {
    *out = std::string(absl::StripAsciiWhitespace(result.out));
  }
  return absl::OkStatus();
}

absl::StatusOr<PostgresInstance*> PostgresInstance::Shared() {
  static PostgresInstance* shared = nullptr;
  static absl::Status error;
  static std::unique_ptr<PostgresInstance> own;
  if (shared != nullptr || !error.ok()) {
    if (!error.ok()) return error;
    return shared;
  }
  const char* dir = std::getenv("HILO_TEST_POSTGRES_DIR");
  if (dir != nullptr && *dir != '\0') {
    std::ifstream in(absl::StrCat(dir, "/uri"));
    std::string uri;
    if (!std::getline(in, uri) || uri.empty()) {
      error = absl::FailedPreconditionError(absl::StrCat(
          "HILO_TEST_POSTGRES_DIR is ", dir,
          " but it has no uri file: did the postgresql.start test run?"));
      return error;
    }
    static PostgresInstance from_ctest(dir, nullptr, /*owned=*/false);
    from_ctest.uri_ = uri;
    shared = &from_ctest;
    return shared;
  }
  absl::StatusOr<std::unique_ptr<PostgresInstance>> started = Start();
  if (!started.ok()) {
    error = started.status();
    return error;
  }
  own = *std::move(started);
  shared = own.get();
  return shared;
}

absl::StatusOr<std::unique_ptr<PostgresInstance>> PostgresInstance::Start() {
  auto scratch = std::make_unique<TempDir>();
  const std::string dir = scratch->File("pg");
  std::unique_ptr<PostgresInstance> instance(
      new PostgresInstance(dir, std::move(scratch), /*owned=*/true));
  if (absl::Status s = instance->Script("start", "", &instance->uri_);
      !s.ok()) {
    return s;
  }
  return instance;
}

absl::Status PostgresInstance::Execute(const std::string& uri,
                                       const std::string& sql,
                                       std::string* first) {
  PGconn* conn = PQconnectdb(uri.c_str());
  absl::Status status;
  if (PQstatus(conn) != CONNECTION_OK) {
    status = absl::UnavailableError(
        absl::StrCat("cannot connect to ", uri, ": ", PQerrorMessage(conn)));
  } else {
    PGresult* result = PQexec(conn, sql.c_str());
    const ExecStatusType s = PQresultStatus(result);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
      status = absl::InternalError(absl::StrCat(
          "\"", sql, "\" failed on ", uri, ": ", PQresultErrorMessage(result)));
    } else if (first != nullptr) {
      *first = PQntuples(result) > 0 && PQnfields(result) > 0
                   ? PQgetvalue(result, 0, 0)
                   : "";
    }
    PQclear(result);
  }
  PQfinish(conn);
  return status;
}

absl::StatusOr<std::unique_ptr<OpenTransaction>> OpenTransaction::Begin(
    const std::string& uri, const std::string& sql) {
  PGconn* conn = PQconnectdb(uri.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    absl::Status s = absl::UnavailableError(
        absl::StrCat("cannot connect to ", uri, ": ", PQerrorMessage(conn)));
    PQfinish(conn);
    return s;
  }
  std::unique_ptr<OpenTransaction> open(new OpenTransaction(conn));
  PGresult* result = PQexec(conn, absl::StrCat("BEGIN; ", sql).c_str());
  const ExecStatusType s = PQresultStatus(result);
  absl::Status status;
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
    status = absl::InternalError(absl::StrCat(
        "\"", sql, "\" failed on ", uri, ": ", PQresultErrorMessage(result)));
  }
  PQclear(result);
  if (!status.ok()) return status;
  return open;
}

OpenTransaction::~OpenTransaction() { PQfinish(static_cast<PGconn*>(conn_)); }

absl::StatusOr<std::string> PostgresInstance::NewSchema() {
  static std::atomic<int> next{0};
  // Unique across the processes CTest runs at once, too.
  const std::string schema =
      absl::StrFormat("test_%d_%d", static_cast<int>(getpid()), next++);
  if (absl::Status s = Execute(uri_, absl::StrCat("CREATE SCHEMA ", schema));
      !s.ok()) {
    return s;
  }
  return absl::StrCat(uri_, "?options=-csearch_path%3D", schema);
}

absl::Status PostgresInstance::Stop(const std::string& mode) {
  return Script("stop", mode, nullptr);
}

absl::Status PostgresInstance::Restart() { return Script("start", "", &uri_); }

}  // namespace hilo::testing_util
