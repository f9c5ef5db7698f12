// hilo::Client against hilo_server processes that die, stall and come back:
// with every target down NextId fails within its deadline naming each; after
// kill -9 and a restart on the same port it recovers by itself within a
// couple of seconds (the regression of 32f5fb9, where it took about 5 s);
// and no ID it hands out lies outside a range a server gave it.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/client.h"
#include "stress/range_log.h"
#include "stress/range_recorder.h"
#include "testing/server_process.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::stress::RangeRecorder;
using ::hilo::stress::UsedRange;
using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::ServerProcess;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::testing::HasSubstr;

// A restarted server must serve the client again within this: the client's
// reconnect backoff tops out at 1 s plus 20 % jitter (client.cc), and the
// bug this guards against took 5 s. The rest is slack for a loaded machine.
constexpr absl::Duration kRecoveryBound = absl::Seconds(3);

std::unique_ptr<ServerProcess> StartNode(const TempDir& dir,
                                         const std::string& tag) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(
      HILO_SERVER_PATH,
      {"--db=" + dir.File("hilo-" + tag + ".db"), "--create_db",
       "--node_tag=" + tag, "--max_range_size=64"});
  EXPECT_THAT(server, IsOk());
  return server.ok() ? *std::move(server) : nullptr;
}

// Calls NextId until it succeeds or `give_up` passes; failures on the way
// must have one of `allowed` codes. Returns the ID, or the last error.
absl::StatusOr<Id> NextIdUntilOk(Client& client, const std::string& collection,
                                 absl::Time give_up,
                                 const std::set<absl::StatusCode>& allowed) {
  while (true) {
    absl::StatusOr<Id> id = client.NextId(collection);
    if (id.ok() || absl::Now() > give_up) return id;
    EXPECT_EQ(allowed.count(id.status().code()), 1u) << id.status();
    // Pacing, not synchronization: the loop ends on success or the deadline.
    absl::SleepFor(absl::Milliseconds(2));
  }
}

// IDs outside every range the recorder saw replied to this process (or
// above the `last` of a return sent for it), described.
std::vector<std::string> OutsideRanges(const std::string& collection,
                                       const std::vector<Id>& ids) {
  const std::vector<UsedRange> used =
      stress::UsedRanges(RangeRecorder::Install()->Events());
  std::vector<std::string> outside;
  for (const Id& id : ids) {
    const bool inside =
        std::any_of(used.begin(), used.end(), [&](const UsedRange& r) {
          return r.collection == collection && r.node_tag == id.node_tag &&
                 r.low <= id.number && id.number <= r.used_high;
        });
    if (!inside) {
      outside.push_back(absl::StrCat(id.number, "-", id.node_tag.view()));
    }
  }
  return outside;
}

size_t Duplicates(const std::vector<Id>& ids) {
  std::set<std::pair<int64_t, std::string>> seen;
  for (const Id& id : ids) seen.emplace(id.number, id.node_tag);
  return ids.size() - seen.size();
}

class ClientFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Before any channel exists, so it sees every call.
    RangeRecorder::Install()->Clear();
  }
};

TEST_F(ClientFaultsTest, AllTargetsDownFailsWithinDeadlineNamingEachTarget) {
  TempDir dir;
  // One target refuses connections (killed), one accepts them and never
  // answers (stopped).
  std::unique_ptr<ServerProcess> dead = StartNode(dir, "A");
  std::unique_ptr<ServerProcess> stalled = StartNode(dir, "B");
  ASSERT_NE(dead, nullptr);
  ASSERT_NE(stalled, nullptr);
  const std::string dead_address = dead->address();
  ASSERT_THAT(dead->Kill(), IsOk());
  ASSERT_THAT(stalled->Pause(), IsOk());

  ClientOptions options;
  options.targets = {dead_address, stalled->address()};
  options.rpc_deadline = absl::Milliseconds(500);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  ASSERT_THAT(client, IsOk());

  for (int attempt = 0; attempt < 2; ++attempt) {
    const absl::Time start = absl::Now();
    absl::StatusOr<Id> id = (*client)->NextId("orders");
    const absl::Duration took = absl::Now() - start;
    ASSERT_FALSE(id.ok()) << id->number;
    EXPECT_THAT(id, StatusIs(absl::StatusCode::kUnavailable));
    EXPECT_THAT(id.status().message(), HasSubstr(dead_address));
    EXPECT_THAT(id.status().message(), HasSubstr(stalled->address()));
    // One attempt per target, each within its deadline (plus slack for a
    // loaded machine or a sanitizer build); the stalled one is waited for.
    EXPECT_LT(took, options.rpc_deadline * 2 + absl::Seconds(2)) << attempt;
    EXPECT_GE(took, options.rpc_deadline - absl::Milliseconds(50)) << attempt;
  }

  // The stalled node wakes up: the client takes IDs from it by itself.
  ASSERT_THAT(stalled->Resume(), IsOk());
  absl::StatusOr<Id> id =
      NextIdUntilOk(**client, "orders", absl::Now() + absl::Seconds(10),
                    {absl::StatusCode::kUnavailable});
  ASSERT_THAT(id, IsOk());
  EXPECT_EQ(id->node_tag, "B");
  EXPECT_THAT(OutsideRanges("orders", {*id}), ::testing::IsEmpty());
}

TEST_F(ClientFaultsTest, RecoversWithinThreeSecondsOfEachRestartOnTheSamePort) {
  TempDir dir;
  std::unique_ptr<ServerProcess> server = StartNode(dir, "A");
  ASSERT_NE(server, nullptr);
  const int port = server->port();

  ClientOptions options;  // prefetching on, as by default
  ASSERT_GT(options.prefetch_at, 0);
  options.targets = {server->address()};
  options.rpc_deadline = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  ASSERT_THAT(client, IsOk());

  std::vector<Id> ids;
  constexpr int kRounds = 6;
  for (int round = 1; round <= kRounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    // Served: enough IDs for fresh ranges (at most 64 each) and a prefetch.
    for (int i = 0; i < 300; ++i) {
      absl::StatusOr<Id> id = (*client)->NextId("orders");
      ASSERT_THAT(id, IsOk());
      ids.push_back(*id);
    }

    ASSERT_THAT(server->Kill(), IsOk());
    // Down: the client's cached numbers run out, then NextId fails.
    absl::Status down;
    for (int i = 0; i < 10'000 && down.ok(); ++i) {
      absl::StatusOr<Id> id = (*client)->NextId("orders");
      if (id.ok()) {
        ids.push_back(*id);
      } else {
        down = id.status();
      }
    }
    EXPECT_THAT(down, StatusIs(absl::StatusCode::kUnavailable));

    ASSERT_THAT(server->Restart(), IsOk()) << server->StderrText();
    ASSERT_EQ(server->port(), port);
    const absl::Time restarted = absl::Now();  // it is listening
    absl::StatusOr<Id> id =
        NextIdUntilOk(**client, "orders", restarted + absl::Seconds(15),
                      {absl::StatusCode::kUnavailable});
    const absl::Duration recovery = absl::Now() - restarted;
    ASSERT_THAT(id, IsOk());
    ids.push_back(*id);
    EXPECT_LT(recovery, kRecoveryBound);
    std::printf("round %d: recovered %s after the restart\n", round,
                absl::FormatDuration(recovery).c_str());
  }

  EXPECT_EQ(Duplicates(ids), 0u);
  EXPECT_THAT(OutsideRanges("orders", ids), ::testing::IsEmpty());
}

}  // namespace
}  // namespace hilo
