// The PostgreSQL store's reservations (the design is in
// postgres_history.h): the steps of a write batch that reserve numbers
// ahead and wait for the standbys to confirm them.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_format.h"
#include "service/store/postgres/postgres_batch_runner.h"
#include "service/store/postgres/postgres_history.h"

namespace hilo {
namespace internal {

void PostgresBatchRunner::Reserve(PostgresBatch& batch, PostgresRequest& r,
                                  const std::string& name, int64_t high,
                                  int64_t size) {
  PostgresBatch::Row& row = batch.rows[name];
  auto confirmed = confirmed_ceiling_.find(name);
  // What was confirmed belongs to the row it was made for. A row not
  // stored, or stored with another incarnation, was deleted or retired
  // since, perhaps by another server, and made anew: its reservation may
  // be on the primary alone, even where its ceiling equals the one
  // remembered. A ceiling only rises while its row lives, so one stored
  // lower is not what was confirmed either (a table put back from an older
  // copy, say).
  if (confirmed != confirmed_ceiling_.end() &&
      (!row.stored.has_value() ||
       row.incarnation != confirmed->second.incarnation ||
       row.stored_ceiling < confirmed->second.ceiling)) {
    confirmed_ceiling_.erase(confirmed);
    confirmed = confirmed_ceiling_.end();
  }
  if (confirmed != confirmed_ceiling_.end() &&
      high <= confirmed->second.ceiling) {
    return;
  }
  r.awaits_standbys = true;
  batch.awaits_standbys = true;
  if (high <= row.ceiling) return;  // reserved already, perhaps elsewhere
  const int64_t ranges = ReserveReach(name);
  const int64_t room = std::numeric_limits<int64_t>::max() - high;
  const int64_t ahead = std::max<int64_t>(size, 1);
  row.ceiling = ahead > room / ranges ? std::numeric_limits<int64_t>::max()
                                      : high + ahead * ranges;
  row.dirty = true;
}

int64_t PostgresBatchRunner::ReserveReach(const std::string& name) {
  const absl::Time now = windows_clock_->Now();
  const int64_t least = options_.reserve_ranges;
  Remember(reach_, name);
  auto [it, first] = reach_.try_emplace(name);
  Reach& reach = it->second;
  if (first) {
    reach.ranges = least;
  } else if (const absl::Duration lasted = now - reach.reserved_at;
             lasted < kReserveFor) {
    reach.ranges = std::min(reach.ranges * 2, least << kMaxReachDoublings);
  } else if (lasted > kReserveFor * 16) {
    reach.ranges = std::max(reach.ranges / 2, least);
  }
  reach.reserved_at = now;
  return reach.ranges;
}

void PostgresBatchRunner::ConfirmReservations(PostgresBatch& batch) {
  for (const auto& [name, row] : batch.rows) {
    // Deleted here: a later row of that name starts anew.
    if (row.dirty && !row.now.has_value()) {
      confirmed_ceiling_.erase(name);
      reach_.erase(name);
    }
  }
  if (!batch.awaits_standbys) return;
  standby_waits_.fetch_add(1, std::memory_order_relaxed);
  // One counted not listed for standby_left_grace: those found missing
  // when the clock started (`left_`) are taken as gone for good, and those
  // counted are those this wait finds; every other one counted must still
  // be listed.
  const absl::Time started = windows_clock_->Now();
  const bool grace_over =
      fewer_since_.has_value() &&
      started - *fewer_since_ >= options_.standby_left_grace;
  const StandbyWait standbys = WaitForStandbys(
      *connection_, options_.standby_wait, absl::Milliseconds(1),
      options_.description,
      grace_over ? Without(standbys_expected_, left_) : standbys_expected_);
  if (!standbys.status.ok()) {
    standbys_expected_ = MostOf(standbys_expected_, standbys.most_listed);
    StandbySet missing = Without(standbys_expected_, standbys.listed_standbys);
    // The clock runs for those missing when it started: one missing that
    // was not (it left since, perhaps after the others came back with no
    // wait in between) starts it again, for all missing now.
    if (!missing.empty() &&
        (!fewer_since_.has_value() || !Without(missing, left_).empty())) {
      fewer_since_ = started;
      left_ = std::move(missing);
    }
    const absl::Status& s = standbys.status;
    // Committed, but a failover may lose it: the ranges are not handed
    // out (their numbers are skipped), exactly as for a COMMIT whose wait
    // for a synchronous standby was cancelled.
    for (PostgresRequest* r : batch.requests) {
      if (r->awaits_standbys) r->status = s;
    }
    if (!connection_->ok()) LostConnection();
    return;
  }
  standbys_expected_ = standbys.listed_standbys;
  fewer_since_.reset();
  left_.clear();
  const bool seen =
      standbys.seen_recorded || standbys.listed > 0 || standby_unrecorded_;
  if (seen && !standbys.seen_recorded) {
    // For every server of the store, this one restarted included. The
    // replies stand whatever this answers; until it succeeds, this server
    // remembers it has to.
    standby_unrecorded_ =
        !RecordStandbySeen(*connection_, "a server's wait counted a standby")
             .ok();
    if (!connection_->ok()) LostConnection();
  }
  // None listed where one was seen (say the old primary, being rebuilt as
  // the new standby after a failover): the replies go out, as they must
  // while a fleet runs on its primary alone, but their reservations are not
  // remembered as confirmed, so every later range waits again, and once a
  // standby attaches, for its flush.
  if (standbys.listed == 0 && seen) return;
  for (const auto& [name, row] : batch.rows) {
    if (!row.now.has_value() || !(row.locked || row.dirty)) continue;
    Remember(confirmed_ceiling_, name);
    Confirmed& confirmed = confirmed_ceiling_[name];
    if (confirmed.incarnation != row.incarnation) {
      confirmed = Confirmed{row.incarnation, row.ceiling};
    } else {
      confirmed.ceiling = std::max(confirmed.ceiling, row.ceiling);
    }
  }
}

}  // namespace internal
}  // namespace hilo
