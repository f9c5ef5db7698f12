// hilo's tables in PostgreSQL: what they are, which version this server
// understands, and how a store creates, migrates or checks them at start.
//
// Private to service/; PostgresRangeStore::Open calls it once, on its first
// connection, before it claims a node tag.
#ifndef HILO_SERVICE_STORE_POSTGRES_POSTGRES_SCHEMA_H_
#define HILO_SERVICE_STORE_POSTGRES_POSTGRES_SCHEMA_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "service/store/postgres/postgres_connection.h"

namespace hilo {
namespace internal {

// Creates hilo's tables in the connection's current schema if it holds no
// table, migrates an older hilo schema, or checks that it holds this
// version; in one transaction under an advisory lock, so that servers
// starting together create the schema once. `description` names the
// database in errors. On failure the transaction is rolled back.
//
// Errors: FAILED_PRECONDITION if the search_path names no schema that
// exists, if the schema holds another application's tables, or a newer
// hilo schema; the connection's errors (UNAVAILABLE, ...) otherwise.
absl::Status CreateOrCheckPostgresSchema(PostgresConnection& c,
                                         absl::string_view description);

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_POSTGRES_POSTGRES_SCHEMA_H_
