// A hilo server on a PostgreSQL store whose database goes away and comes
// back: NextRange answers UNAVAILABLE within its deadline, health turns
// NOT_SERVING, and both recover by themselves once the database is back.
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "hilo/admin_client.h"
#include "service/access/line_writer.h"
#include "service/store/range_token.h"
#include "testing/postgres_instance.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::PostgresInstance;
using ::hilo::testing_util::StatusIs;

grpc::Status NextRange(hilo::v1::HiLo::Stub& stub, absl::Duration deadline,
                       hilo::v1::NextRangeResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  hilo::v1::NextRangeRequest request;
  request.set_collection("orders");
  return stub.NextRange(&context, request, response);
}

// Health as seen through the server's port, polled until it reads `want`
// or `limit` passes (the store notices a database coming back at its next
// probe, within a second).
ServingStatus HealthBecomes(AdminClient& admin, ServingStatus want,
                            absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  ServingStatus seen = ServingStatus::kUnknown;
  while (absl::Now() < deadline) {
    absl::StatusOr<ServingStatus> status = admin.CheckHealth();
    if (status.ok()) seen = *status;
    if (seen == want) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return seen;
}

TEST(PostgresServerTest, DatabaseDownIsUnavailableAndNotServingThenRecovers) {
  absl::StatusOr<std::unique_ptr<PostgresInstance>> postgres =
      PostgresInstance::Start();
  ASSERT_THAT(postgres, IsOk());
  testing_util::TempDir dir;
  ServerOptions options = testing_util::TestServerOptions(dir);
  options.postgres_uri = (*postgres)->uri();
  std::unique_ptr<Server> server = testing_util::StartServer(options);
  ASSERT_NE(server, nullptr);
  std::unique_ptr<hilo::v1::HiLo::Stub> stub =
      testing_util::NewStub(server->port());
  absl::StatusOr<std::unique_ptr<AdminClient>> admin =
      AdminClient::Create(testing_util::Address(server->port()));
  ASSERT_THAT(admin, IsOk());

  hilo::v1::NextRangeResponse range;
  ASSERT_THAT(NextRange(*stub, absl::Seconds(5), &range), IsOk());
  EXPECT_EQ(range.low(), 1);
  const int64_t high = range.high();
  EXPECT_EQ(*(*admin)->CheckHealth(), ServingStatus::kServing);

  ASSERT_THAT((*postgres)->Stop("immediate"), IsOk());
  ::testing::internal::CaptureStderr();
  grpc::Status down = NextRange(*stub, absl::Seconds(5), &range);
  // Logged before the reply, written by stderr's own thread.
  EXPECT_TRUE(StderrLines().WaitUntilWritten(absl::Seconds(10)));
  const std::string log = ::testing::internal::GetCapturedStderr();
  // Any caller sees the code and a short reason; nothing of where the
  // database is or who the server is there. The server's log has it all.
  const std::string& uri = (*postgres)->uri();  // postgresql://user@host:port/
  const std::string user_at_host =
      uri.substr(uri.find("//") + 2, uri.rfind(':') - uri.find("//") - 2);
  const std::string port =
      uri.substr(uri.rfind(':') + 1, uri.rfind('/') - uri.rfind(':') - 1);
  EXPECT_THAT(down, StatusIs(absl::StatusCode::kUnavailable,
                             ::testing::HasSubstr("database is unavailable")));
  for (const std::string& secret :
       {std::string("postgresql://"), user_at_host, std::string("127.0.0.1"),
        std::string("postgres@"), ":" + port}) {
    EXPECT_THAT(down.error_message(),
                ::testing::Not(::testing::HasSubstr(secret)));
  }
  EXPECT_THAT(log, ::testing::HasSubstr("PostgreSQL at " +
                                        uri.substr(0, uri.rfind('/'))));
  EXPECT_EQ(
      HealthBecomes(**admin, ServingStatus::kNotServing, absl::Seconds(10)),
      ServingStatus::kNotServing);

  ASSERT_THAT((*postgres)->Restart(), IsOk());
  EXPECT_EQ(HealthBecomes(**admin, ServingStatus::kServing, absl::Seconds(10)),
            ServingStatus::kServing);
  ASSERT_THAT(NextRange(*stub, absl::Seconds(5), &range), IsOk());
  EXPECT_EQ(range.low(), high + 1);
}

// Servers on one database never show one tag: the second, finding the
// first's tag claimed, takes its next choice; the IDs of each still come
// from the one shared row.
TEST(PostgresServerTest, ServersOnOneDatabaseShowDistinctTags) {
  absl::StatusOr<PostgresInstance*> postgres = PostgresInstance::Shared();
  ASSERT_THAT(postgres, IsOk());
  absl::StatusOr<std::string> uri = (*postgres)->NewSchema();
  ASSERT_THAT(uri, IsOk());
  testing_util::TempDir dir;
  ServerOptions options = testing_util::TestServerOptions(dir);
  options.postgres_uri = *uri;
  options.node_tag = "P";
  options.node_tag_alternates = {"Q", "R"};
  std::unique_ptr<Server> first = testing_util::StartServer(options);
  ASSERT_NE(first, nullptr);
  std::unique_ptr<Server> second = testing_util::StartServer(options);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(first->node_tag(), "P");
  EXPECT_EQ(second->node_tag(), "Q");

  hilo::v1::NextRangeResponse from_first, from_second;
  ASSERT_THAT(NextRange(*testing_util::NewStub(first->port()), absl::Seconds(5),
                        &from_first),
              IsOk());
  ASSERT_THAT(NextRange(*testing_util::NewStub(second->port()),
                        absl::Seconds(5), &from_second),
              IsOk());
  EXPECT_EQ(from_first.node_tag(), "P");
  EXPECT_EQ(from_second.node_tag(), "Q");
  EXPECT_EQ(from_second.low(), from_first.high() + 1);
}

// Issue 36 item 5: --max_collections holds for every server on the shared
// store together (checked in the creating transaction), where two servers
// with --max_collections=2 once stored 4. A retirement through one server
// frees a place for the other.
TEST(PostgresServerTest, CollectionLimitHoldsForEveryServerOnASharedStore) {
  absl::StatusOr<PostgresInstance*> postgres = PostgresInstance::Shared();
  ASSERT_THAT(postgres, IsOk());
  absl::StatusOr<std::string> uri = (*postgres)->NewSchema();
  ASSERT_THAT(uri, IsOk());
  testing_util::TempDir dir;
  ServerOptions options = testing_util::TestServerOptions(dir);
  options.postgres_uri = *uri;
  options.node_tag = "P";
  options.node_tag_alternates = {"Q", "R"};
  options.max_collections = 2;
  std::unique_ptr<Server> first = testing_util::StartServer(options);
  ASSERT_NE(first, nullptr);
  std::unique_ptr<Server> second = testing_util::StartServer(options);
  ASSERT_NE(second, nullptr);
  auto next = [](Server& server, const std::string& collection) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    hilo::v1::NextRangeRequest request;
    request.set_collection(collection);
    hilo::v1::NextRangeResponse response;
    return testing_util::NewStub(server.port())
        ->NextRange(&context, request, &response);
  };
  EXPECT_THAT(next(*first, "a1"), IsOk());
  EXPECT_THAT(next(*second, "b1"), IsOk());
  EXPECT_THAT(next(*second, "b2"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       ::testing::HasSubstr(
                           "the store already holds its limit of 2 "
                           "collections (--max_collections, counted over "
                           "every server sharing the store)")));
  EXPECT_THAT(next(*first, "a2"),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(next(*second, "a1"), IsOk());
  absl::StatusOr<std::unique_ptr<AdminClient>> admin =
      AdminClient::Create(testing_util::Address(first->port()));
  ASSERT_THAT(admin, IsOk());
  EXPECT_THAT((*admin)->RetireCollection("a1"), IsOk());
  EXPECT_THAT(next(*second, "b2"), IsOk());
  std::unique_ptr<Server> third = testing_util::StartServer(options);
  ASSERT_NE(third, nullptr);
  EXPECT_THAT(next(*third, "c1"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       ::testing::HasSubstr("--max_collections")));
  EXPECT_THAT(next(*third, "b1"), IsOk());
}

// Two containers with one host name and pid 1 (host networking) were one
// lease holder, "hilo pid 1": the second took the first's live claim, and
// both served tag P. Every start is a holder of its own: the second finds P
// held and takes its next choice.
TEST(PostgresServerTest, StartsWithOneHostNameAndPidDoNotShareATag) {
  absl::StatusOr<PostgresInstance*> postgres = PostgresInstance::Shared();
  ASSERT_THAT(postgres, IsOk());
  absl::StatusOr<std::string> uri = (*postgres)->NewSchema();
  ASSERT_THAT(uri, IsOk());
  testing_util::TempDir dir;
  ServerOptions options = testing_util::TestServerOptions(dir);
  options.postgres_uri = *uri;
  options.node_tag = "P";
  options.node_tag_alternates = {"Q"};
  options.lease_host_for_testing = "hilo";
  options.lease_pid_for_testing = 1;
  std::unique_ptr<Server> first = testing_util::StartServer(options);
  ASSERT_NE(first, nullptr);
  std::unique_ptr<Server> second = testing_util::StartServer(options);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(first->node_tag(), "P");
  EXPECT_EQ(second->node_tag(), "Q");
  hilo::v1::NextRangeResponse from_first, from_second;
  ASSERT_THAT(NextRange(*testing_util::NewStub(first->port()), absl::Seconds(5),
                        &from_first),
              IsOk());
  ASSERT_THAT(NextRange(*testing_util::NewStub(second->port()),
                        absl::Seconds(5), &from_second),
              IsOk());
  EXPECT_EQ(from_first.node_tag(), "P");
  EXPECT_EQ(from_second.node_tag(), "Q");
}

TEST(LeaseHolderTest, EveryStartIsItsOwnHolderEvenWithOneHostAndPid) {
  const std::string a = NewLeaseHolder("hilo", 1);
  const std::string b = NewLeaseHolder("hilo", 1);
  EXPECT_NE(a, b);
  EXPECT_THAT(a, ::testing::StartsWith("hilo pid 1 start "));
  EXPECT_THAT(b, ::testing::StartsWith("hilo pid 1 start "));
}

}  // namespace
}  // namespace hilo
