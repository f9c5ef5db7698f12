#include "service/store/postgres/postgres_retry_policy.h"

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "service/store/postgres/postgres_connection.h"

namespace hilo {
namespace internal {

bool IsRetryableConflict(const PGresult* result) {
  const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  return state != nullptr &&
         (std::strcmp(state, "40001") == 0 ||  // serialization failure
          std::strcmp(state, "40P01") == 0 ||  // deadlock
          std::strcmp(state, "23505") == 0);   // collection created meanwhile
}

bool IsLockTableFull(const absl::Status& status) {
  return absl::StrContains(status.message(),
                           absl::StrCat("(SQLSTATE ", kLockTableFull, ")"));
}

absl::Status ConflictsExhaustedError(const std::string& description,
                                     int attempts) {
  return absl::UnavailableError(absl::StrFormat(
      "PostgreSQL at %s: the transaction failed %d times on conflicts "
      "with other servers (serialization failures, deadlocks or "
      "collections created at the same moment); nothing was changed",
      description, attempts));
}

absl::Status RetryLostConnectionError(const std::string& description,
                                      const absl::Status& conflict) {
  return absl::UnavailableError(absl::StrFormat(
      "PostgreSQL at %s: a transaction rolled back on a conflict (%s) "
      "could not run again, the connection failed; nothing was committed",
      description, conflict.message()));
}

absl::Status ForClients(const absl::Status& detail) {
  std::string sqlstate;
  const absl::string_view message = detail.message();
  if (size_t at = message.rfind("(SQLSTATE "); at != absl::string_view::npos) {
    sqlstate = std::string(message.substr(at, 17));  // "(SQLSTATE 57014)"
  }
  std::string reason;
  switch (detail.code()) {
    case absl::StatusCode::kUnavailable:
      // What the batch runner knows of the commit is worth telling.
      if (absl::StrContains(message, "outcome of the commit is unknown")) {
        reason =
            "the connection to the shared database broke during the "
            "commit; the outcome of the commit is unknown, so nothing is "
            "reported applied";
        break;
      }
      if (IsLockTableFull(detail)) {
        reason =
            "the shared database is out of shared memory (its lock table is "
            "full); nothing is reported applied, and the call may be "
            "retried, on this server or another";
        break;
      }
      if (absl::StrContains(message, "may be lost if the database fails")) {
        reason =
            "the shared database did not confirm the commit on its "
            "synchronous standby in time; nothing is reported applied";
        break;
      }
      reason =
          "the shared database is unavailable or did not answer in time; "
          "nothing is reported applied, and the call may be retried";
      break;
    case absl::StatusCode::kResourceExhausted:
      reason = "the shared database is out of disk or memory";
      break;
    default:
      reason = "the shared database reported an error";
      break;
  }
  if (!sqlstate.empty()) absl::StrAppend(&reason, " ", sqlstate);
  return absl::Status(
      detail.code(), absl::StrCat(reason, "; the server's log has the detail"));
}

}  // namespace internal
}  // namespace hilo
