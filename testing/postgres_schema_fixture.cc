#include "testing/postgres_schema_fixture.h"

#include <utility>

#include "gmock/gmock.h"
#include "testing/postgres_instance.h"
#include "testing/status_matchers.h"

namespace hilo::testing_util {

void PostgresSchemaTest::SetUp() {
  absl::StatusOr<PostgresInstance*> postgres = PostgresInstance::Shared();
  ASSERT_THAT(postgres, IsOk());
  absl::StatusOr<std::string> uri = (*postgres)->NewSchema();
  ASSERT_THAT(uri, IsOk());
  uri_ = *uri;
}

PostgresRangeStoreOptions PostgresSchemaTest::StoreOptions() const {
  PostgresRangeStoreOptions options;
  options.uri = uri_;
  return options;
}

absl::StatusOr<std::unique_ptr<PostgresRangeStore>>
PostgresSchemaTest::OpenStore() const {
  return PostgresRangeStore::Open(StoreOptions());
}

}  // namespace hilo::testing_util
