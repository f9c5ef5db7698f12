// ValidateServerOptions: the rules a node's options must keep before a
// Server starts on them, in-process, one case per rule.
#include "service/server_options.h"

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;
using ::testing::HasSubstr;

TEST(ServerOptionsTest, DefaultsAreValid) {
  EXPECT_THAT(ValidateServerOptions(ServerOptions()), IsOk());
}

TEST(ServerOptionsTest, AlternateTagsAndRetagFitTheirStores) {
  ServerOptions shared;
  shared.postgres_uri = "postgresql://db/hilo";
  shared.node_tag_alternates = {"B", "C"};
  EXPECT_THAT(ValidateServerOptions(shared), IsOk());
  ServerOptions sqlite;
  sqlite.node_tag = "B";
  sqlite.retag_database_from = "A";
  EXPECT_THAT(ValidateServerOptions(sqlite), IsOk());
}

struct BadOptions {
  std::string label;
  std::function<void(ServerOptions&)> change;
  std::string message_part;
};

void PrintTo(const BadOptions& c, std::ostream* os) { *os << c.label; }

class ServerOptionsBadTest : public ::testing::TestWithParam<BadOptions> {};

TEST_P(ServerOptionsBadTest, IsInvalidArgumentNamingTheOption) {
  ServerOptions options;
  GetParam().change(options);
  EXPECT_THAT(ValidateServerOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(GetParam().message_part)));
}

INSTANTIATE_TEST_SUITE_P(
    Table, ServerOptionsBadTest,
    ::testing::Values(
        BadOptions{"LowercaseTag", [](ServerOptions& o) { o.node_tag = "a"; },
                   "node tag \"a\""},
        BadOptions{"BadAlternate",
                   [](ServerOptions& o) {
                     o.postgres_uri = "postgresql://db/hilo";
                     o.node_tag_alternates = {"B", "toolong"};
                   },
                   "node tag \"toolong\""},
        BadOptions{"AlternatesWithoutSharedStore",
                   [](ServerOptions& o) { o.node_tag_alternates = {"B"}; },
                   "alternative node tags need a shared store"},
        BadOptions{"RetagOnSharedStore",
                   [](ServerOptions& o) {
                     o.postgres_uri = "postgresql://db/hilo";
                     o.retag_database_from = "B";
                   },
                   "--retag_database is for an SQLite database"},
        BadOptions{"RetagFromBadTag",
                   [](ServerOptions& o) { o.retag_database_from = "b"; },
                   "node tag \"b\""},
        BadOptions{"MinAboveMax",
                   [](ServerOptions& o) {
                     o.range_sizes.min_size = 64;
                     o.range_sizes.max_size = 32;
                   },
                   "max range size 32 is below min range size 64"},
        BadOptions{"ZeroBatch", [](ServerOptions& o) { o.max_batch = 0; },
                   "max batch is 0; it must be at least 1"},
        BadOptions{"NegativeMetricsCollections",
                   [](ServerOptions& o) { o.metrics_max_collections = -1; },
                   "metrics max collections is -1"},
        BadOptions{"ZeroStreams",
                   [](ServerOptions& o) { o.max_concurrent_streams = 0; },
                   "max concurrent streams is 0"},
        BadOptions{"MemoryBelowOneMiB",
                   [](ServerOptions& o) { o.max_memory_bytes = 1000; },
                   "max memory is 1000 bytes; it must be at least 1 MiB"},
        BadOptions{"OneThread", [](ServerOptions& o) { o.max_threads = 1; },
                   "max threads is 1; it must be at least 2"},
        BadOptions{"ZeroListReply",
                   [](ServerOptions& o) { o.max_list_reply_bytes = 0; },
                   "max ListCollections reply bytes is 0"},
        BadOptions{"NegativeJump",
                   [](ServerOptions& o) { o.max_last_max_jump = -1; },
                   "max last_max jump is -1; it must not be negative"},
        BadOptions{"ShareAboveOne",
                   [](ServerOptions& o) { o.exhaustion_share = 1.5; },
                   "exhaustion share is 1.5; it must be above 0 and at most "
                   "1"},
        BadOptions{"NegativeRefusals",
                   [](ServerOptions& o) { o.audit_refusals_per_second = -1; },
                   "audit refusals per second is -1"},
        BadOptions{"NegativeAnonymousRefusals",
                   [](ServerOptions& o) {
                     o.audit_anonymous_refusals_per_second = -1;
                   },
                   "audit anonymous refusals per second is -1"},
        BadOptions{"TokensWithoutPolicy",
                   [](ServerOptions& o) { o.authz_tokens = "/tokens"; },
                   "an authz token list needs an authz policy"},
        BadOptions{"NegativeCollections",
                   [](ServerOptions& o) { o.max_collections = -1; },
                   "max collections is -1"},
        BadOptions{"NegativeCreations",
                   [](ServerOptions& o) {
                     o.max_collection_creations_per_minute = -1;
                   },
                   "max collection creations per minute is -1"},
        BadOptions{"ZeroProbeFailures",
                   [](ServerOptions& o) { o.listener_probe_failures = 0; },
                   "failures at least 1"},
        BadOptions{"ZeroMetricsThreads",
                   [](ServerOptions& o) { o.metrics_threads = 0; },
                   "metrics threads is 0; it must be at least 1"},
        BadOptions{
            "ZeroKeepalive",
            [](ServerOptions& o) { o.keepalive_time = absl::ZeroDuration(); },
            "keepalive time is 0; it must be positive"},
        BadOptions{"EmptyListen", [](ServerOptions& o) { o.listen = ""; },
                   "listen address is empty"}),
    [](const ::testing::TestParamInfo<BadOptions>& info) {
      return info.param.label;
    });

}  // namespace
}  // namespace hilo
