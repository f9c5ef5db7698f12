#include "service/store/postgres/postgres_node_tag.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace hilo {
namespace internal {
namespace {

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

}  // namespace

absl::StatusOr<std::string> ClaimNodeTag(PostgresConnection& c,
                                         const NodeTagLease& lease,
                                         absl::string_view description) {
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
      if (PQntuples(claimed->get()) == 1) return tag;
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
          description, absl::StrJoin(held, ", ")));
    }
    absl::SleepFor(std::min(left, absl::Milliseconds(200)));
  }
}

Statement RenewNodeTag(absl::string_view tag, const NodeTagLease& lease) {
  Statement renew{kRenewTag, {}};
  renew.params.Text(tag);
  renew.params.Text(lease.holder);
  renew.params.Text(absl::StrCat(absl::ToInt64Milliseconds(lease.duration)));
  return renew;
}

std::optional<std::string> NodeTagTakenBy(PostgresConnection& c,
                                          const PGresult* r,
                                          absl::string_view tag,
                                          const NodeTagLease& lease) {
  // Binary bool: one byte.
  const bool renewed = PQgetvalue(r, 0, 0)[0] != 0;
  if (renewed) return std::nullopt;
  std::string holder = PQgetisnull(r, 0, 1) ? std::string()
                                            : std::string(PQgetvalue(r, 0, 1),
                                                          PQgetlength(r, 0, 1));
  if (holder == lease.holder) {
    // The UPDATE waited for a claim made at this very moment and then
    // saw it; the statement's snapshot did not. A statement of its own
    // (a new snapshot) names the new holder.
    Statement who{kTagHolder, {}};
    who.params.Text(tag);
    if (absl::StatusOr<Result> now = c.Query(who, "reading a node tag");
        now.ok()) {
      holder = PQntuples(now->get()) == 0
                   ? std::string()
                   : std::string(PQgetvalue(now->get(), 0, 0),
                                 PQgetlength(now->get(), 0, 0));
    }
  }
  return holder;
}

absl::Status NodeTagLostError(absl::string_view description,
                              absl::string_view tag, absl::string_view holder,
                              const NodeTagLease& lease) {
  std::string who = absl::StrCat("\"", holder, "\"");
  if (holder.empty()) {
    who = "nobody (its row was deleted)";
  } else if (holder == lease.holder) {
    // Another server's claim, made at this very moment, is not in the
    // renewal's snapshot yet.
    who = "another server";
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "PostgreSQL at %s: node tag %s is now held by %s; this server could "
      "not renew its claim for %s, and must no longer use the tag",
      description, tag, who, absl::FormatDuration(lease.duration)));
}

Statement ReleaseNodeTag(absl::string_view tag, const NodeTagLease& lease) {
  Statement release{kReleaseTag, {}};
  release.params.Text(tag);
  release.params.Text(lease.holder);
  return release;
}

}  // namespace internal
}  // namespace hilo
