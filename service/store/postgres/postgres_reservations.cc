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
  auto confirmed = confirmed_ceiling_.find(name);
  if (confirmed != confirmed_ceiling_.end() && high <= confirmed->second) {
    return;
  }
  r.awaits_standbys = true;
  batch.awaits_standbys = true;
  PostgresBatch::Row& row = batch.rows[name];
  if (high <= row.ceiling) return;  // reserved already, perhaps elsewhere
  const int64_t room = std::numeric_limits<int64_t>::max() - high;
  const int64_t ahead = std::max<int64_t>(size, 1);
  row.ceiling = ahead > room / options_.store.reserve_ranges
                    ? std::numeric_limits<int64_t>::max()
                    : high + ahead * options_.store.reserve_ranges;
  row.dirty = true;
}

void PostgresBatchRunner::ConfirmReservations(PostgresBatch& batch) {
  for (const auto& [name, row] : batch.rows) {
    // Deleted here: a later row of that name starts anew.
    if (row.dirty && !row.now.has_value()) confirmed_ceiling_.erase(name);
  }
  if (!batch.awaits_standbys) return;
  absl::Status s = WaitForStandbys(*connection_, options_.store.standby_wait,
                                   absl::Milliseconds(1), options_.description);
  if (!s.ok()) {
    // Committed, but a failover may lose it: the ranges are not handed
    // out (their numbers are skipped), exactly as for a COMMIT whose wait
    // for a synchronous standby was cancelled.
    for (PostgresRequest* r : batch.requests) {
      if (r->awaits_standbys) r->status = s;
    }
    if (!connection_->ok()) LostConnection();
    return;
  }
  for (const auto& [name, row] : batch.rows) {
    if (row.now.has_value() && (row.locked || row.dirty)) {
      int64_t& confirmed = confirmed_ceiling_[name];
      confirmed = std::max(confirmed, row.ceiling);
    }
  }
}

}  // namespace internal
}  // namespace hilo
