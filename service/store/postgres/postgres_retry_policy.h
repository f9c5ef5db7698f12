// Which failures of a PostgreSQL batch another run of it may clear, what a
// batch reports when it cannot run again, and what of a database error its
// callers may see. The batch runner
// (postgres_batch_runner.cc) rolls back and runs the whole batch again on
// a retryable conflict, up to PostgresRangeStoreOptions::max_attempts
// times; everything else fails the batch at once. Private to
// service/store/postgres/.
#ifndef HILO_SERVICE_STORE_POSTGRES_POSTGRES_RETRY_POLICY_H_
#define HILO_SERVICE_STORE_POSTGRES_POSTGRES_RETRY_POLICY_H_

#include <libpq-fe.h>

#include <string>

#include "absl/status/status.h"

namespace hilo {
namespace internal {

// A conflict with another session that a new transaction may not meet:
// a serialization failure, a deadlock, or a collection another server
// created at the same moment (a unique violation on its name).
bool IsRetryableConflict(const PGresult* result);

// Whether `status` (PostgresConnection::Error's) is SQLSTATE 53200: the
// database is out of shared memory, most often its lock table full. Not a
// server to send calls to until a commit goes through again.
bool IsLockTableFull(const absl::Status& status);

// UNAVAILABLE: the batch met a conflict on each of its `attempts` runs;
// nothing was changed.
absl::Status ConflictsExhaustedError(const std::string& description,
                                     int attempts);

// UNAVAILABLE: the rollback after `conflict` lost the connection, so the
// batch cannot run again; nothing was committed.
absl::Status RetryLostConnectionError(const std::string& description,
                                      const absl::Status& conflict);

// What a caller is told of `detail`, a database error: its code, and a
// short reason that names neither the database nor quotes it, with the
// SQLSTATE if `detail` has one.
absl::Status ForClients(const absl::Status& detail);

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_POSTGRES_POSTGRES_RETRY_POLICY_H_
