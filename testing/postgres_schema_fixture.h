// PostgresSchemaTest: a GoogleTest fixture whose test has a database of its
// own, a new schema on the suite's PostgreSQL (PostgresInstance::Shared),
// and opens its stores there.
//
//   class OrdersTest : public testing_util::PostgresSchemaTest {};
//   TEST_F(OrdersTest, TwoServersShareOneLimit) {
//     PostgresRangeStoreOptions options = StoreOptions();
//     options.max_collections = 3;
//     absl::StatusOr<std::unique_ptr<PostgresRangeStore>> store =
//         PostgresRangeStore::Open(std::move(options));
//   }
//
// A fixture that overrides SetUp calls this one's first, under
// ASSERT_NO_FATAL_FAILURE: without a schema there is nothing to test.
#ifndef HILO_TESTING_POSTGRES_SCHEMA_FIXTURE_H_
#define HILO_TESTING_POSTGRES_SCHEMA_FIXTURE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "service/store/postgres/postgres_options.h"
#include "service/store/postgres/postgres_range_store.h"

namespace hilo::testing_util {

class PostgresSchemaTest : public ::testing::Test {
 protected:
  // Creates the schema and sets uri_; a fatal failure if the suite's
  // PostgreSQL cannot be started or reached.
  void SetUp() override;

  // A store's options on this test's schema, the rest at their defaults.
  PostgresRangeStoreOptions StoreOptions() const;
  // A store opened with StoreOptions(): as one more hilo server on this
  // test's database.
  absl::StatusOr<std::unique_ptr<PostgresRangeStore>> OpenStore() const;

  // A libpq URI whose search_path is this test's schema alone.
  std::string uri_;
};

}  // namespace hilo::testing_util

#endif  // HILO_TESTING_POSTGRES_SCHEMA_FIXTURE_H_
