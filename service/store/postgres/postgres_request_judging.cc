// The PostgreSQL store's judging of requests: the step of a batch's run
// (PostgresRangeStore::RunBatchOnce) that, once the rows are read and the
// creation locks taken, answers the reads and judges each write on the rows
// in memory: set aside (a row another session holds or is creating),
// postponed (past the batch's share of creations), or run by the rules of
// collection_rules.h.
#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "service/store/collection_rules.h"
#include "service/store/postgres/postgres_batch.h"
#include "service/store/postgres/postgres_range_store.h"
#include "service/store/postgres/postgres_request.h"
#include "service/store/postgres/postgres_row_codec.h"
#include "service/store/range_store.h"
#include "service/store/store_arguments.h"

namespace hilo {

using internal::ReadInt64;
using internal::ReadRow;

void PostgresRangeStore::JudgeRequests(Batch& batch) {
  const auto steady_now = std::chrono::steady_clock::now();
  const bool writer = &batch.link == &writer_;
  for (size_t i = 0; i < batch.requests.size(); ++i) {
    Request* r = batch.requests[i];
    // Refused before judging (LockCount, postgres_collection_count.cc).
    if (!r->status.ok()) continue;
    if (batch.list_at[i] >= 0) {
      const PGresult* result = batch.results[batch.list_at[i]].get();
      if (r->kind == Request::Kind::kProbe) {
        r->count = ReadInt64(result, 0, 0);
        batch.counted = r->count;
        continue;
      }
      r->rows.clear();
      for (int j = 0; j < PQntuples(result); ++j) {
        r->rows.push_back(ReadRow(result, j));
      }
      continue;
    }
    if (r->kind == Request::Kind::kGet) {
      // As the batch leaves it so far (as stored, if the commit fails).
      auto it = batch.rows.find(r->name);
      r->state = it != batch.rows.end() ? it->second.now : std::nullopt;
      continue;
    }
    if (r->kind == Request::Kind::kRenew) continue;  // judged above
    std::vector<std::string> writes_to, reads;
    r->Rows(&writes_to, &reads);
    if (std::any_of(writes_to.begin(), writes_to.end(),
                    [&](const std::string& name) {
                      return batch.postponed.count(name) > 0;
                    })) {
      // Nobody holds it: only the batch's share of creations is used up.
      // Its deadline orders it before newer creations next time, and ends
      // the wait if new names keep coming faster than they are created.
      if (!r->lock_deadline.has_value()) {
        r->lock_deadline =
            steady_now + absl::ToChronoMilliseconds(options_.lock_timeout);
      }
      if (steady_now < *r->lock_deadline) {
        r->deferred = true;
        r->postponed = true;
      } else {
        r->status = absl::UnavailableError(absl::StrFormat(
            "collection \"%s\" was not created within %s: more new "
            "collections are being created than the store creates per "
            "commit (%d); nothing was changed",
            r->name, absl::FormatDuration(options_.lock_timeout),
            internal::kMaxCreationsPerBatch));
      }
      continue;
    }
    const bool waits = std::any_of(
        writes_to.begin(), writes_to.end(),
        [&](const std::string& name) { return batch.held.count(name) > 0; });
    if (waits) {
      if (!r->lock_deadline.has_value()) {
        r->lock_deadline =
            steady_now + absl::ToChronoMilliseconds(options_.lock_timeout);
      }
      if (steady_now < *r->lock_deadline) {
        r->deferred = true;
        set_aside_.fetch_add(1, std::memory_order_relaxed);
        if (batch.creating_elsewhere.count(r->name) > 0) {
          creations_set_aside_.fetch_add(1, std::memory_order_relaxed);
        }
        continue;
      }
      // Waited long enough: fails, but for the items of a ReturnMany on
      // rows this batch holds, which are judged below.
      if (r->kind != Request::Kind::kReturnMany) {
        locked_failures_.fetch_add(1, std::memory_order_relaxed);
        r->status = LockedRowError(r->name,
                                   batch.creating_elsewhere.count(r->name) > 0);
        continue;
      }
    }
    const absl::Time now = clock_->Now();
    if (r->kind == Request::Kind::kReturnMany) {
      // One operation, every item judged alone, in order, as a Return
      // (kReturn below) would judge it.
      for (const ReturnItem& item : r->items) {
        if (absl::Status s = CheckReturnArguments(item.end, item.last);
            !s.ok()) {
          r->many.push_back(std::move(s));
          continue;
        }
        if (batch.held.count(item.collection) > 0) {
          locked_failures_.fetch_add(1, std::memory_order_relaxed);
          r->many.push_back(LockedRowError(
              item.collection,
              batch.creating_elsewhere.count(item.collection) > 0));
          continue;
        }
        auto it = batch.rows.find(item.collection);
        const std::optional<CollectionState>* stored =
            it != batch.rows.end() ? &it->second.now : nullptr;
        if (item.foreign || stored == nullptr || !stored->has_value()) {
          r->many.push_back(ReturnOutcome{
              false,
              stored != nullptr && stored->has_value() ? (*stored)->max : 0});
          continue;
        }
        ReturnOutcome outcome;
        std::optional<CollectionState> next = ApplyReturn(
            **stored, item.end, item.last, item.token, now, &outcome);
        if (next.has_value()) {
          it->second.now = *next;
          it->second.dirty = true;
        }
        r->many.push_back(outcome);
      }
      continue;
    }
    Batch::Row& row = batch.rows[r->name];
    switch (r->kind) {
      case Request::Kind::kAllocate: {
        if (!row.now.has_value() && !r->may_create) {
          r->status = NoRowRefusal(r->name);
          break;
        }
        absl::StatusOr<CollectionState> next = ApplyAllocate(
            r->name, row.now.value_or(StartAfterRetirement(row.retired_max)),
            r->size, r->floor, r->max_floor_jump, r->token, now,
            &r->allocation.range);
        if (!next.ok()) {
          r->status = next.status();
          break;
        }
        r->allocation.created = !row.now.has_value();
        row.now = *next;
        row.dirty = true;
        if (writer) {
          Reserve(batch, *r, r->name, r->allocation.range.high, r->size);
        }
        break;
      }
      case Request::Kind::kReturn: {
        if (!row.now.has_value()) {
          r->returned = ReturnOutcome{false, 0};
          break;
        }
        std::optional<CollectionState> next =
            ApplyReturn(*row.now, r->end, r->last, r->token, now, &r->returned);
        if (next.has_value()) {
          row.now = *next;
          row.dirty = true;
        }
        break;
      }
      case Request::Kind::kSetFloor: {
        const CollectionState start =
            row.now.value_or(StartAfterRetirement(row.retired_max));
        std::optional<CollectionState> next =
            ApplySetFloor(start, r->floor, now, &r->floored);
        if (next.has_value() || !row.now.has_value()) {
          r->floored.created = !row.now.has_value();
          if (!next.has_value()) {
            next = start;
            next->updated_at = now;
          }
          row.now = *next;
          row.dirty = true;
          // A floor is a promise that no number up to it is handed out:
          // one lost with the history would break it.
          if (writer && r->floored.raised) {
            Reserve(batch, *r, r->name, row.now->max, 1);
          }
        }
        break;
      }
      case Request::Kind::kPut:
        row.now = r->put;
        row.dirty = true;
        break;
      case Request::Kind::kDelete: {
        if (r->retire) {
          JudgeRetire(*r, batch);
          break;
        }
        if (!row.now.has_value()) {
          r->status = absl::NotFoundError(absl::StrFormat(
              "collection \"%s\" has no row; there is nothing to delete",
              r->name));
          break;
        }
        if (absl::Status s = CheckDeletable(r->name, *row.now); !s.ok()) {
          r->status = std::move(s);
          break;
        }
        r->deleted = *row.now;
        row.now.reset();
        row.dirty = true;
        break;
      }
      default:
        break;
    }
  }
}

}  // namespace hilo
