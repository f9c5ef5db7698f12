#include "service/store/postgres/postgres_retry_policy.h"

#include <cstring>

#include "absl/strings/str_format.h"

namespace hilo {
namespace internal {

bool IsRetryableConflict(const PGresult* result) {
  const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  return state != nullptr &&
         (std::strcmp(state, "40001") == 0 ||  // serialization failure
          std::strcmp(state, "40P01") == 0 ||  // deadlock
          std::strcmp(state, "23505") == 0);   // collection created meanwhile
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

}  // namespace internal
}  // namespace hilo
