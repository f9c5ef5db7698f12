// One hilo node in-process, without the network, for the client's tests: the
// real service over the real SQLite store (in a directory of its own), so
// every range and every return obeys exactly the rules a hilo_server
// applies, tokens included. Ranges have a fixed size; range_at comes from a
// manual clock. Thread-safe (the service and the store are).
#ifndef HILO_TESTING_FAKE_NODE_H_
#define HILO_TESTING_FAKE_NODE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"
#include "service/rpc/hilo_service.h"
#include "service/store/range_size_policy.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo::testing_util {

class FakeNode {
 public:
  FakeNode(std::string tag, int64_t size,
           absl::Time start = absl::FromUnixSeconds(1'800'000'000))
      : clock_(start) {
    store_ = OpenTestStore(dir_, "hilo.db");
    service_ = std::make_unique<HiLoService>(
        store_.get(), RangeSizePolicy({.min_size = size, .max_size = size}),
        std::move(tag), &clock_);
  }

  HiLoService& service() { return *service_; }
  void SetTime(absl::Time t) { clock_.Set(t); }

  // The collection's stored Max; 0 if it has no row.
  int64_t Max(absl::string_view collection) {
    absl::StatusOr<std::optional<CollectionState>> row =
        store_->Get(collection);
    EXPECT_THAT(row, IsOk());
    return row.ok() && row->has_value() ? (*row)->max : 0;
  }

 private:
  TempDir dir_;
  ManualClock clock_;
  std::unique_ptr<SqliteRangeStore> store_;
  std::unique_ptr<HiLoService> service_;
};

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_FAKE_NODE_H_
