// The node-tag lease in PostgreSQL (table hilo_nodes): the statements that
// claim, renew and release a tag, and what a lost claim is reported as.
// See NodeTagLease and PostgresRangeStore for what the lease is for.
//
// A claim is a row (tag, holder, expires_at) with the database's clock: a
// live server renews it on every probe, another server takes it over only
// once it has run out, and the same holder takes its own back at once.
//
// Private to service/. The functions run on the connection given, on its
// thread; none keeps state.
#ifndef HILO_SERVICE_STORE_POSTGRES_POSTGRES_NODE_TAG_H_
#define HILO_SERVICE_STORE_POSTGRES_POSTGRES_NODE_TAG_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/store/postgres/postgres_connection.h"
#include "service/store/postgres/postgres_options.h"

namespace hilo {
namespace internal {

// Claims the first candidate of `lease` that no other live holder has and
// returns it. While every candidate is held, tries again every 200 ms
// until lease.wait_for_held has passed. Errors: FAILED_PRECONDITION naming
// each holder (`description` names the database) if every candidate is
// still held then; the connection's errors otherwise.
absl::StatusOr<std::string> ClaimNodeTag(PostgresConnection& c,
                                         const NodeTagLease& lease,
                                         absl::string_view description);

// The statement that renews `tag` of lease.holder for lease.duration; its
// one row tells NodeTagTakenBy whether it did.
Statement RenewNodeTag(absl::string_view tag, const NodeTagLease& lease);

// Who took `tag`, by the result of RenewNodeTag: nullopt if the renewal
// renewed the claim; "" if the tag's row is gone. When the renewal's
// snapshot still showed lease.holder (it waited for a claim made that very
// moment), reads the holder again on `c`.
std::optional<std::string> NodeTagTakenBy(PostgresConnection& c,
                                          const PGresult* r,
                                          absl::string_view tag,
                                          const NodeTagLease& lease);

// What on_node_tag_lost is told: FAILED_PRECONDITION naming the database,
// the tag and `holder` (as NodeTagTakenBy returned it).
absl::Status NodeTagLostError(absl::string_view description,
                              absl::string_view tag, absl::string_view holder,
                              const NodeTagLease& lease);

// The statement that gives `tag` up, if lease.holder still holds it.
Statement ReleaseNodeTag(absl::string_view tag, const NodeTagLease& lease);

}  // namespace internal
}  // namespace hilo

#endif  // HILO_SERVICE_STORE_POSTGRES_POSTGRES_NODE_TAG_H_
