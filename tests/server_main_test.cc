// hilo_server as a process: start-up line, clean exit on signals, and one
// clear line plus a non-zero exit for every kind of bad start.
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "testing/held_port.h"
#include "testing/process_threads.h"
#include "testing/server_process.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::HeldPort;
using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::IsOkAndHolds;
using ::hilo::testing_util::Notification;
using ::hilo::testing_util::ServerProcess;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::hilo::testing_util::ThreadPolicies;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

// `args`, with the metrics on a port of their own unless `args` say
// otherwise (never the fixed default: tests run side by side).
std::vector<std::string> WithMetrics(std::vector<std::string> args) {
  if (std::none_of(args.begin(), args.end(), [](const std::string& a) {
        return a.rfind("--metrics_listen=", 0) == 0;
      })) {
    args.push_back("--metrics_listen=127.0.0.1:0");
  }
  return args;
}

// hilo_server with `args`, started: its start-up line was seen.
std::unique_ptr<ServerProcess> Start(std::vector<std::string> args) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start(HILO_SERVER_PATH, WithMetrics(std::move(args)));
  EXPECT_THAT(server, IsOk());
  return server.ok() ? *std::move(server) : nullptr;
}

// hilo_server with `args`, expected to refuse to start: its exit code and
// every line it printed.
std::pair<int, std::vector<std::string>> RunToRefusal(
    std::vector<std::string> args) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Launch(HILO_SERVER_PATH, WithMetrics(std::move(args)));
  EXPECT_THAT(server, IsOk());
  if (!server.ok()) return {-1, {}};
  absl::StatusOr<int> code = (*server)->WaitForExit();
  EXPECT_THAT(code, IsOk());
  return {code.value_or(-1), (*server)->StderrLines()};
}

// NextRange on "orders" against the server on `port`, without credentials.
grpc::Status NextOrders(int port, hilo::v1::NextRangeResponse* response) {
  auto stub = testing_util::NewStub(port);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  hilo::v1::NextRangeRequest request;
  request.set_collection("orders");
  return stub->NextRange(&context, request, response);
}
grpc::Status NextOrders(int port) {
  hilo::v1::NextRangeResponse response;
  return NextOrders(port, &response);
}

TEST(ServerMainTest, ServesAfterOneStartLineAndExitsZeroOnSigterm) {
  TempDir dir;
  std::unique_ptr<ServerProcess> server =
      Start({"--db=" + dir.File("d/h.db"), "--create_db", "--node_tag=Q7"});
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(server->StderrLines().size(), 1u) << server->StderrText();
  const std::string line = server->StderrLines()[0];
  EXPECT_THAT(line, StartsWith("hilo_server: serving node Q7 on port "));
  EXPECT_THAT(line, HasSubstr(", created NEW database " + dir.File("d/h.db") +
                              " with 0 collections, "));
  EXPECT_THAT(line, HasSubstr("sync full"));
  EXPECT_THAT(line, Not(HasSubstr("no --node_tag")));
  const int port = server->port();

  hilo::v1::NextRangeResponse response;
  ASSERT_THAT(NextOrders(port, &response), IsOk());
  EXPECT_EQ(response.low(), 1);
  EXPECT_EQ(response.high(), 32);
  EXPECT_EQ(response.node_tag(), "Q7");

  EXPECT_THAT(server->Terminate(), IsOkAndHolds(0));
  EXPECT_THAT(server->StderrLines(),
              ::testing::ElementsAre(line, HasSubstr("received; draining"),
                                     "hilo_server: stopped"));
}

// A node started without a tag serves as A and says so in its start-up line;
// with a tag (above) the line says nothing of it.
TEST(ServerMainTest, ImplicitNodeTagIsNamedInTheStartLine) {
  TempDir dir;
  std::unique_ptr<ServerProcess> server =
      Start({"--db=" + dir.File("d/h.db"), "--create_db"});
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(server->StderrLines().size(), 1u) << server->StderrText();
  const std::string line = server->StderrLines()[0];
  EXPECT_THAT(line, StartsWith("hilo_server: serving node A on port "));
  EXPECT_THAT(line, HasSubstr("; node tag A because no --node_tag was given: "
                              "every other node serving the same collections "
                              "needs its own"));
  EXPECT_THAT(server->Terminate(), IsOkAndHolds(0));
}

TEST(ServerMainTest, SigintAlsoStopsCleanlyAndStateSurvives) {
  TempDir dir;
  const std::string db = "--db=" + dir.File("h.db");
  for (int64_t want_low : {1, 33}) {
    std::vector<std::string> args = {db};
    if (want_low == 1) args.push_back("--create_db");
    std::unique_ptr<ServerProcess> server = Start(args);
    ASSERT_NE(server, nullptr);
    auto stub = testing_util::NewStub(server->port());
    grpc::ClientContext context;
    hilo::v1::NextRangeRequest request;
    request.set_collection("orders");
    hilo::v1::NextRangeResponse response;
    ASSERT_THAT(stub->NextRange(&context, request, &response), IsOk());
    EXPECT_EQ(response.low(), want_low);
    EXPECT_THAT(server->Signal(SIGINT), IsOk());
    EXPECT_THAT(server->WaitForExit(), IsOkAndHolds(0));
  }
}

// A database file moved to another node's volume, or a tag renamed by
// hand: the server refuses to hand the file's numbers out under the new
// tag, in one line naming both, until told on purpose.
TEST(ServerMainTest, DatabaseOfAnotherTagIsRefusedUntilRetaggedOnPurpose) {
  TempDir dir;
  const std::string db = "--db=" + dir.File("h.db");
  auto serve_once = [&](std::vector<std::string> args, int64_t want_low,
                        const std::string& want_tag) {
    std::unique_ptr<ServerProcess> server = Start(std::move(args));
    ASSERT_NE(server, nullptr);
    hilo::v1::NextRangeResponse response;
    ASSERT_THAT(NextOrders(server->port(), &response), IsOk());
    EXPECT_EQ(response.low(), want_low);
    EXPECT_EQ(response.node_tag(), want_tag);
    EXPECT_THAT(server->Signal(SIGTERM), IsOk());
    EXPECT_THAT(server->WaitForExit(), IsOkAndHolds(0));
  };
  serve_once({db, "--create_db", "--node_tag=A"}, 1, "A");
  {
    const auto [code, lines] = RunToRefusal({db, "--node_tag=B"});
    EXPECT_NE(code, 0);
    ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
    EXPECT_THAT(lines[0], HasSubstr("under node tag A, not B"));
  }
  serve_once({db, "--node_tag=B", "--retag_database=A"}, 33, "B");
  serve_once({db, "--node_tag=B"}, 65, "B");
  const auto [code, lines] = RunToRefusal({db, "--node_tag=A"});
  EXPECT_NE(code, 0);
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("under node tag B, not A"));
}

struct BadStart {
  std::string label;
  std::vector<std::string> args;
  std::string message_part;
};

void PrintTo(const BadStart& c, std::ostream* os) { *os << c.label; }

class ServerMainBadStartTest : public ::testing::TestWithParam<BadStart> {};

TEST_P(ServerMainBadStartTest, PrintsOneClearLineAndExitsOne) {
  TempDir dir;
  std::ofstream(dir.File("garbage.db")) << std::string(8192, 'g');
  std::ofstream(dir.File("file")) << "x";
  std::vector<std::string> args;
  for (const std::string& a : GetParam().args) {
    std::string arg = a;
    const size_t at = arg.find("$DIR");
    if (at != std::string::npos) arg.replace(at, 4, dir.path());
    args.push_back(arg);
  }
  if (std::none_of(args.begin(), args.end(), [](const std::string& a) {
        return a.rfind("--db=", 0) == 0;
      })) {
    args.push_back("--db=" + dir.File("ok.db"));
  }
  if (std::none_of(args.begin(), args.end(), [](const std::string& a) {
        return a.rfind("--listen=", 0) == 0;
      })) {
    args.push_back("--listen=127.0.0.1:0");
  }
  // So that each case fails for its own reason, not for a missing file.
  if (std::none_of(args.begin(), args.end(), [](const std::string& a) {
        return a.rfind("--store=", 0) == 0;
      })) {
    args.push_back("--create_db");
  }
  const auto [code, lines] = RunToRefusal(args);
  EXPECT_EQ(code, 1);  // docs/server.md: 1 is a bad start
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr(GetParam().message_part));
}

INSTANTIATE_TEST_SUITE_P(
    Table, ServerMainBadStartTest,
    ::testing::Values(
        BadStart{"LowercaseNodeTag", {"--node_tag=a"}, "node tag \"a\""},
        BadStart{"LongNodeTag", {"--node_tag=ABCDE"}, "1 to 4"},
        BadStart{"RequiredNodeTagMissing",
                 {"--require_node_tag"},
                 "--require_node_tag: no node tag given"},
        BadStart{"UnknownFlag",
                 {"--colour=red"},
                 "hilo_server: unknown flag --colour (--help lists every "
                 "flag)"},
        BadStart{"MistypedFlagGetsTheNearest",
                 {"--nodetag=B"},
                 "hilo_server: unknown flag --nodetag; did you mean "
                 "--node_tag? (--help lists every flag)"},
        BadStart{"BadFlagValue",
                 {"--shutdown_grace=soon"},
                 "\"soon\" is not a valid value for --shutdown_grace"},
        BadStart{"StrayArgument", {"serve"}, "unexpected argument \"serve\""},
        BadStart{"BadSync", {"--sync=sometimes"}, "sometimes"},
        BadStart{"MinAboveMax",
                 {"--min_range_size=64", "--max_range_size=32"},
                 "max range size 32 is below min range size 64"},
        BadStart{"ZeroMin", {"--min_range_size=0"}, "at least 1"},
        BadStart{"NegativeRunway",
                 {"--range_runway=-1s"},
                 "range runway is -1s; it must be from 0 to 1h"},
        BadStart{"NotANumber", {"--max_batch=many"}, "max_batch"},
        BadStart{"GarbageDatabase", {"--db=$DIR/garbage.db"}, "not a database"},
        BadStart{"DatabaseUnderAFile",
                 {"--db=$DIR/file/hilo.db"},
                 "cannot create directory"},
        BadStart{"BadListenAddress",
                 {"--listen=256.1.1.1:99999"},
                 "cannot listen on 256.1.1.1:99999"},
        // gRPC would serve on 80000 - 65536 = 14464.
        BadStart{"ListenPortOutOfRange",
                 {"--listen=127.0.0.1:80000"},
                 "cannot listen on 127.0.0.1:80000 (--listen): port 80000 is "
                 "out of range: a port is 0 to 65535; give HOST:PORT"},
        BadStart{"ListenWithoutPort",
                 {"--listen=localhost"},
                 "cannot listen on localhost (--listen): it has no port; give "
                 "HOST:PORT, such as 127.0.0.1:50051"},
        BadStart{"ListenOnAnotherMachinesAddress",
                 {"--listen=192.0.2.1:0"},
                 "(--listen): 192.0.2.1 is not an address of this machine"},
        BadStart{"BadMetricsAddress",
                 {"--metrics_listen=nonsense"},
                 "cannot serve metrics on nonsense (--metrics_listen): it has "
                 "no port"},
        BadStart{"MetricsPortOutOfRange",
                 {"--metrics_listen=127.0.0.1:70000"},
                 "(--metrics_listen): port 70000 is out of range"},
        BadStart{"MissingAuthzPolicy",
                 {"--authz_policy=$DIR/none.textproto"},
                 "none.textproto cannot be read: No such file or directory"},
        BadStart{"TokensWithoutPolicy",
                 {"--authz_tokens=$DIR/file"},
                 "an authz token list needs an authz policy"},
        BadStart{"NegativeAnonymousAuditRefusals",
                 {"--audit_anonymous_refusals_per_second=-1"},
                 "audit anonymous refusals per second is -1; it must not be "
                 "negative (0: no limit)"},
        BadStart{"NegativeJump",
                 {"--max_last_max_jump=-1"},
                 "max last_max jump is -1; it must not be negative"},
        BadStart{"NegativeCreationRate",
                 {"--max_collection_creations_per_minute=-1"},
                 "max collection creations per minute is -1; it must not be "
                 "negative (0: no limit)"},
        BadStart{
            "RetagOnASharedStore",
            {"--store=postgresql://127.0.0.1:1/hilo", "--retag_database=B"},
            "--retag_database is for an SQLite database"},
        BadStart{"RetagToABadTag", {"--retag_database=b"}, "node tag \"b\""},
        BadStart{"CreateDbOnASharedStore",
                 {"--store=postgresql://127.0.0.1:1/hilo", "--create_db"},
                 "--create_db is for the SQLite file --db; with --store there "
                 "is no file to create"},
        BadStart{"ZeroExhaustionShare",
                 {"--exhaustion_share=0"},
                 "exhaustion share is 0; it must be above 0 and at most 1"}),
    [](const ::testing::TestParamInfo<BadStart>& info) {
      return info.param.label;
    });

// The line `server` printed after the first `seen` lines, once there is one
// (bounded: "" and a test failure if none comes within 20 s).
std::string NextLine(const ServerProcess& server, size_t seen) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    const std::vector<std::string> lines = server.StderrLines();
    if (lines.size() > seen) return lines[seen];
    absl::SleepFor(absl::Milliseconds(10));
  }
  ADD_FAILURE() << "no line after " << seen << ": " << server.StderrText();
  return "";
}

TEST(ServerMainTest, SighupReloadsThePolicyAndKeepsItOverABadFile) {
  TempDir dir;
  const std::string policy = dir.File("policy.textproto");
  std::ofstream(policy) << "grant { identity: \"anonymous\" "
                           "collections: \"orders\" }\n";
  std::unique_ptr<ServerProcess> server = Start(
      {"--db=" + dir.File("h.db"), "--create_db", "--authz_policy=" + policy,
       "--authz_reload_interval=0", "--audit_log=" + dir.File("audit.jsonl")});
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  ASSERT_THAT(NextOrders(port), IsOk());

  size_t seen = server->StderrLines().size();
  std::ofstream(policy, std::ios::trunc) << "grant { identity: anonymous }\n";
  ASSERT_THAT(server->Signal(SIGHUP), IsOk());
  EXPECT_EQ(NextLine(*server, seen++),
            "hilo_server: authz policy " + policy +
                " line 1 column 19: Expected string, got: anonymous; keeping "
                "the policy in force");
  EXPECT_THAT(NextOrders(port), IsOk());

  std::ofstream(policy, std::ios::trunc) << "grant { identity: \"cn:ops\" }\n";
  ASSERT_THAT(server->Signal(SIGHUP), IsOk());
  EXPECT_EQ(NextLine(*server, seen++),
            "hilo_server: authz policy " + policy + " reloaded");
  grpc::Status denied = NextOrders(port);
  EXPECT_THAT(
      denied,
      StatusIs(absl::StatusCode::kPermissionDenied,
               "anonymous may not call NextRange on collection \"orders\""));

  EXPECT_THAT(server->Terminate(), IsOkAndHolds(0));
}

// A policy file emptied (a truncated write) is refused on SIGHUP and the
// policy in force stays; a token file deleted revokes every token, and the
// reload line says so.
TEST(ServerMainTest, SighupRefusesAnEmptyPolicyAndSaysWhenTheTokensAreGone) {
  TempDir dir;
  const std::string policy = dir.File("policy.textproto");
  const std::string tokens = dir.File("tokens");
  std::ofstream(policy) << "grant { identity: \"anonymous\" "
                           "collections: \"orders\" }\n";
  std::ofstream(tokens) << "ops 0123456789abcdef0123\n";
  std::unique_ptr<ServerProcess> server = Start(
      {"--db=" + dir.File("h.db"), "--create_db", "--authz_policy=" + policy,
       "--authz_tokens=" + tokens, "--authz_reload_interval=0",
       "--audit_log=" + dir.File("audit.jsonl")});
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  ASSERT_THAT(NextOrders(port), IsOk());

  size_t seen = server->StderrLines().size();
  std::ofstream(policy, std::ios::trunc).flush();
  ASSERT_THAT(server->Signal(SIGHUP), IsOk());
  EXPECT_EQ(NextLine(*server, seen++),
            "hilo_server: authz policy " + policy +
                " grants nothing: an empty or truncated file would refuse "
                "every caller; to refuse every caller on purpose, write "
                "\"deny_all: true\"; keeping the policy in force");
  EXPECT_THAT(NextOrders(port), IsOk());

  std::ofstream(policy, std::ios::trunc)
      << "grant { identity: \"anonymous\" collections: \"orders\" }\n"
         "grant { identity: \"token:ops\" admin: ADMIN_SET_FLOOR }\n";
  ASSERT_EQ(std::remove(tokens.c_str()), 0);
  ASSERT_THAT(server->Signal(SIGHUP), IsOk());
  EXPECT_EQ(NextLine(*server, seen++),
            "hilo_server: authz policy " + policy + " reloaded; authz token " +
                "file " + tokens +
                " is gone: every bearer token is refused until it is back");
  EXPECT_THAT(NextOrders(port), IsOk());

  EXPECT_THAT(server->Terminate(), IsOkAndHolds(0));
}

// A server started under one policy (its parent's: this thread's, as
// fork passes it on), with or without --cpu_scheduling.
struct SchedulingCase {
  const char* name;
  int parent_policy;
  const char* flag;  // nullptr: none
  int policy;        // every thread's, once it serves
  const char* start_line;
};
void PrintTo(const SchedulingCase& c, std::ostream* out) { *out << c.name; }

class ServerMainSchedulingTest
    : public ::testing::TestWithParam<SchedulingCase> {};

// The policy reaches every thread: gRPC's, the store's, the metrics
// endpoint's, those a first call starts; and the start-up line names the
// policy the server runs under.
TEST_P(ServerMainSchedulingTest, ReachesEveryThreadAndTheStartLine) {
  const SchedulingCase& c = GetParam();
  const int own_policy = sched_getscheduler(0);
  sched_param param{};
  ASSERT_EQ(sched_setscheduler(0, c.parent_policy, &param), 0);
  TempDir dir;
  std::vector<std::string> args = {"--db=" + dir.File("h.db"), "--create_db"};
  if (c.flag != nullptr) args.push_back(c.flag);
  std::unique_ptr<ServerProcess> server = Start(args);
  ASSERT_EQ(sched_setscheduler(0, own_policy, &param), 0);
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(server->StderrLines().size(), 1u) << server->StderrText();
  EXPECT_THAT(server->StderrLines()[0], HasSubstr(c.start_line));
  hilo::v1::NextRangeResponse response;
  ASSERT_THAT(NextOrders(server->port(), &response), IsOk());
  EXPECT_EQ(response.high(), 32);

  const std::map<pid_t, int> policies = ThreadPolicies(server->pid());
  // The main thread, gRPC's pollers and executor, the committer, the
  // metrics endpoint's workers: far more than a handful.
  EXPECT_GE(policies.size(), 10u);
  for (const auto& [tid, policy] : policies) {
    EXPECT_EQ(policy, c.policy) << "thread " << tid;
  }
  EXPECT_THAT(server->Terminate(), IsOkAndHolds(0));
}

INSTANTIATE_TEST_SUITE_P(
    Policies, ServerMainSchedulingTest,
    ::testing::Values(
        SchedulingCase{"NormalByDefault", SCHED_OTHER, nullptr, SCHED_OTHER,
                       ", cpu scheduling normal, batch when "
                       "busy, reflection "},
        SchedulingCase{"NormalInherited", SCHED_OTHER,
                       "--cpu_scheduling=inherit", SCHED_OTHER,
                       ", cpu scheduling normal, reflection "},
        SchedulingCase{"BatchByFlag", SCHED_OTHER, "--cpu_scheduling=batch",
                       SCHED_BATCH, ", cpu scheduling batch, reflection "},
        SchedulingCase{"BatchInherited", SCHED_BATCH, nullptr, SCHED_BATCH,
                       ", cpu scheduling batch, reflection "},
        SchedulingCase{"NormalByFlagUnderBatch", SCHED_BATCH,
                       "--cpu_scheduling=normal", SCHED_OTHER,
                       ", cpu scheduling normal, reflection "}),
    [](const ::testing::TestParamInfo<SchedulingCase>& info) {
      return info.param.name;
    });

TEST(ServerMainTest, UnknownCpuSchedulingIsOneLineAndNoStart) {
  TempDir dir;
  const auto [code, lines] = RunToRefusal(
      {"--db=" + dir.File("h.db"), "--create_db", "--cpu_scheduling=fifo"});
  EXPECT_EQ(code, 1);
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], StartsWith("hilo_server: --cpu_scheduling is \"fifo\"; "
                                   "it must be adaptive"));
  EXPECT_FALSE(std::filesystem::exists(dir.File("h.db")));
}

// Under a system call filter that refuses sched_setscheduler (systemd's
// SystemCallFilter= can), a server that turns busy says in one line that
// the kernel refused SCHED_BATCH, to how many threads and why; every
// thread keeps SCHED_OTHER, and every call still gets a range of its own.
TEST(ServerMainTest, ABusyServerRefusedSchedBatchSaysSoAndServesOn) {
  TempDir dir;
  std::unique_ptr<ServerProcess> server;
  // Started on a thread of its own: the filter and the policy are the
  // thread's, and the server's process starts with them. The thread lives
  // as long as the server: the server dies with the thread that forked it
  // (PR_SET_PDEATHSIG).
  Notification started;
  Notification stopped;
  absl::Status launch;
  std::thread launcher([&] {
    sched_param param{};
    if (sched_setscheduler(0, SCHED_OTHER, &param) != 0) {
      launch = absl::InternalError("this thread may not take SCHED_OTHER");
    } else {
      launch = testing_util::RefuseSystemCallOnThisThread(
          SYS_sched_setscheduler, EPERM);
    }
    if (launch.ok()) {
      server = Start({"--db=" + dir.File("h.db"), "--create_db"});
    }
    started.Notify();
    stopped.WaitForNotification();
  });
  absl::Cleanup join = [&] {
    if (server != nullptr && server->running()) {
      EXPECT_THAT(server->Kill(), IsOk());
    }
    stopped.Notify();
    launcher.join();
  };
  started.WaitForNotification();
  ASSERT_THAT(launch, IsOk());
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(server->StderrLines().size(), 1u) << server->StderrText();
  EXPECT_THAT(server->StderrLines()[0],
              HasSubstr(", cpu scheduling normal, batch when busy, "));

  // Rounds of 64 calls at once (busy from 16 in flight) until the server
  // says something; bounded.
  auto stub = testing_util::NewStub(server->port());
  hilo::v1::NextRangeRequest request;
  request.set_collection("orders");
  std::vector<std::pair<int64_t, int64_t>> ranges;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (server->StderrLines().size() < 2 && absl::Now() < deadline) {
    constexpr int kInFlight = 64;
    std::vector<grpc::ClientContext> contexts(kInFlight);
    std::vector<hilo::v1::NextRangeResponse> responses(kInFlight);
    std::vector<grpc::Status> statuses(kInFlight);
    absl::BlockingCounter left(kInFlight);
    for (int i = 0; i < kInFlight; ++i) {
      // Every callback runs by the deadline at the latest.
      contexts[i].set_deadline(
          absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
      stub->async()->NextRange(&contexts[i], &request, &responses[i],
                               [&, i](grpc::Status status) {
                                 statuses[i] = std::move(status);
                                 left.DecrementCount();
                               });
    }
    left.Wait();
    for (int i = 0; i < kInFlight; ++i) {
      ASSERT_TRUE(statuses[i].ok())
          << statuses[i].error_message() << "; " << server->StderrText();
      ranges.emplace_back(responses[i].low(), responses[i].high());
    }
  }
  const std::vector<std::string> lines = server->StderrLines();
  ASSERT_GE(lines.size(), 2u) << "no line after " << ranges.size()
                              << " calls: " << server->StderrText();
  EXPECT_THAT(lines[1],
              MatchesRegex("hilo_server: the kernel refused SCHED_BATCH to "
                           "[1-9][0-9]* thread\\(s\\) as the server turned "
                           "busy: Operation not permitted; they keep their "
                           "policy"));
  const std::map<pid_t, int> policies = ThreadPolicies(server->pid());
  EXPECT_GE(policies.size(), 10u);
  for (const auto& [tid, policy] : policies) {
    EXPECT_EQ(policy, SCHED_OTHER) << "thread " << tid;
  }
  // Fresh callers all: ranges of 32, together exactly 1..32 x calls.
  std::sort(ranges.begin(), ranges.end());
  for (size_t k = 0; k < ranges.size(); ++k) {
    ASSERT_EQ(ranges[k],
              std::make_pair(int64_t{32} * static_cast<int64_t>(k) + 1,
                             int64_t{32} * static_cast<int64_t>(k + 1)));
  }
  EXPECT_THAT(server->Terminate(), IsOkAndHolds(0));
  server = nullptr;
}

TEST(ServerMainTest, PortInUseIsOneClearLineAndNonZeroExit) {
  TempDir dir;
  std::unique_ptr<ServerProcess> first =
      Start({"--db=" + dir.File("a.db"), "--create_db"});
  ASSERT_NE(first, nullptr);
  const int port = first->port();
  const auto [code, lines] =
      RunToRefusal({"--listen=" + testing_util::Address(port),
                    "--db=" + dir.File("b.db"), "--create_db"});
  EXPECT_NE(code, 0);
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0],
              HasSubstr("cannot listen on " + testing_util::Address(port)));
  EXPECT_THAT(first->Terminate(), IsOkAndHolds(0));
}

// A port some other program holds: the line names the flag and the port,
// says it is in use and what to do, and no library's words.
TEST(ServerMainTest, PortsInUseNameTheFlagThePortAndWhatToDo) {
  TempDir dir;
  HeldPort held;
  ASSERT_NE(held.port(), 0);
  const std::string address = testing_util::Address(held.port());
  const std::string port = std::to_string(held.port());
  {
    const auto [code, lines] =
        RunToRefusal({"--metrics_listen=" + address, "--db=" + dir.File("a.db"),
                      "--create_db"});
    EXPECT_EQ(code, 1);
    ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
    EXPECT_EQ(lines[0], "hilo_server: cannot serve metrics on " + address +
                            " (--metrics_listen): port " + port +
                            " is in use by another program (another "
                            "hilo_server?); stop it, or give --metrics_listen "
                            "another port (0 picks a free one); or "
                            "--metrics_listen= (empty) to serve no metrics");
  }
  const auto [code, lines] = RunToRefusal(
      {"--listen=" + address, "--db=" + dir.File("b.db"), "--create_db"});
  EXPECT_EQ(code, 1);
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0], "hilo_server: cannot listen on " + address +
                          " (--listen): port " + port +
                          " is in use by another program (another "
                          "hilo_server?); stop it, or give --listen another "
                          "port (0 picks a free one)");
}

// The database file, as `ls` names it: the server says which one it opened
// and whether it made it, so a server started from the wrong directory, or
// on a lost volume, does not look like the real one.
std::string StartLineDatabase(const std::string& line) {
  const size_t at = line.find("plaintext, ");
  const size_t end = line.find(", sync ");
  if (at == std::string::npos || end == std::string::npos) return line;
  return line.substr(at + 11, end - at - 11);
}

TEST(ServerMainTest, MissingDatabaseWithoutCreateDbIsOneLineAndNothingMade) {
  TempDir dir;
  const std::string db = dir.File("d/h.db");
  const auto [code, lines] = RunToRefusal({"--db=" + db});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(lines,
              ::testing::ElementsAre(
                  "hilo_server: database " + db +
                  " does not exist; pass --create_db to create a new, empty "
                  "database there; a new database hands out numbers from 1 "
                  "again, so if this node served before, start it on its old "
                  "file"));
  EXPECT_FALSE(std::filesystem::exists(dir.File("d")));
}

TEST(ServerMainTest, StartLineSaysNewOrExistingWithTheAbsolutePathAndCount) {
  TempDir dir;
  const std::string db = dir.File("d/h.db");
  // --db relative to the server's directory: the line names it absolute.
  const std::string relative = std::filesystem::relative(db).string();
  ASSERT_FALSE(relative.empty());
  ASSERT_NE(relative[0], '/');
  const std::vector<std::pair<std::vector<std::string>, std::string>> starts = {
      {{"--db=" + relative, "--create_db"},
       "created NEW database " + db + " with 0 collections"},
      {{"--db=" + db, "--create_db"},
       "opened existing database " + db + " with 1 collection"},
      {{"--db=" + db},
       "opened existing database " + db + " with 1 collection"}};
  for (const auto& [args, want] : starts) {
    std::unique_ptr<ServerProcess> server = Start(args);
    ASSERT_NE(server, nullptr);
    ASSERT_EQ(server->StderrLines().size(), 1u) << server->StderrText();
    EXPECT_EQ(StartLineDatabase(server->StderrLines()[0]), want);
    ASSERT_THAT(NextOrders(server->port()), IsOk());
    EXPECT_THAT(server->Terminate(), IsOkAndHolds(0));
  }
}

// The Debian package's first start: a marker its install script left makes
// the one database, and is gone once the server serves.
TEST(ServerMainTest, CreateDbMarkerCreatesOnceAndIsRemoved) {
  TempDir dir;
  const std::string db = dir.File("h.db");
  const std::string marker = dir.File("create-db");
  testing_util::WriteFile(marker, "");
  {
    std::unique_ptr<ServerProcess> server =
        Start({"--db=" + db, "--create_db_marker=" + marker});
    ASSERT_NE(server, nullptr);
    EXPECT_EQ(StartLineDatabase(server->StderrLines()[0]),
              "created NEW database " + db + " with 0 collections");
    EXPECT_FALSE(std::filesystem::exists(marker));
    EXPECT_THAT(server->Terminate(), IsOkAndHolds(0));
  }
  ASSERT_EQ(unlink(db.c_str()), 0);
  const auto [code, lines] =
      RunToRefusal({"--db=" + db, "--create_db_marker=" + marker});
  EXPECT_EQ(code, 1);
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr(db + " does not exist; pass --create_db"));
}

TEST(ServerMainTest, SecondServerOnOneFileIsRefusedUntilTheFirstIsKilled) {
  TempDir dir;
  const std::string db = dir.File("h.db");
  std::unique_ptr<ServerProcess> first = Start({"--db=" + db, "--create_db"});
  ASSERT_NE(first, nullptr);
  ASSERT_THAT(NextOrders(first->port()), IsOk());
  for (bool create : {false, true}) {
    std::vector<std::string> args = {"--db=" + db};
    if (create) args.push_back("--create_db");
    const auto [code, lines] = RunToRefusal(args);
    EXPECT_EQ(code, 1);
    EXPECT_THAT(
        lines,
        ::testing::ElementsAre(absl::StrCat(
            "hilo_server: database ", db,
            " is already served by another hilo_server (pid ", first->pid(),
            "), which holds its lock; one file serves one server: "
            "stop the other, or give this one its own --db")));
  }
  // kill -9 leaves no lock behind: the kernel dropped it with the process.
  ASSERT_THAT(first->Kill(), IsOk());
  std::unique_ptr<ServerProcess> second = Start({"--db=" + db});
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(StartLineDatabase(second->StderrLines()[0]),
            "opened existing database " + db + " with 1 collection");
  hilo::v1::NextRangeResponse response;
  ASSERT_THAT(NextOrders(second->port(), &response), IsOk());
  EXPECT_EQ(response.low(), 33);
  EXPECT_THAT(second->Terminate(), IsOkAndHolds(0));
}

// The database deleted, or another file moved over it, under a running
// server: no range comes out of the lost file, and the server exits with
// status 6 and one line saying what happened to which file.
class ServerMainLostDatabaseTest : public ::testing::TestWithParam<bool> {};

TEST_P(ServerMainLostDatabaseTest, ExitsWithStatus6AndOneLine) {
  const bool replace = GetParam();
  TempDir dir;
  const std::string db = dir.File("h.db");
  std::string what = "was deleted";
  if (replace) {
    // A database of its own, made by a server that then stopped.
    std::unique_ptr<ServerProcess> other =
        Start({"--db=" + dir.File("other.db"), "--create_db"});
    ASSERT_NE(other, nullptr);
    EXPECT_THAT(other->Terminate(), IsOkAndHolds(0));
  }
  std::unique_ptr<ServerProcess> server = Start({"--db=" + db, "--create_db"});
  ASSERT_NE(server, nullptr);
  hilo::v1::NextRangeResponse response;
  ASSERT_THAT(NextOrders(server->port(), &response), IsOk());
  EXPECT_EQ(response.low(), 1);

  if (replace) {
    struct stat was;
    struct stat now;
    ASSERT_EQ(stat(db.c_str(), &was), 0);
    ASSERT_EQ(stat(dir.File("other.db").c_str(), &now), 0);
    ASSERT_EQ(std::rename(dir.File("other.db").c_str(), db.c_str()), 0);
    what = absl::StrCat("was replaced by another file (inode ", now.st_ino,
                        ", was ", was.st_ino, ")");
  } else {
    ASSERT_EQ(unlink(db.c_str()), 0);
  }
  // Whether the call comes before the server's next check (the commit
  // finds the file lost) or after it (the server is gone): no range.
  EXPECT_THAT(NextOrders(server->port()),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(server->WaitForExit(), IsOkAndHolds(6));
  const std::vector<std::string> lines = server->StderrLines();
  ASSERT_EQ(lines.size(), 2u) << server->StderrText();
  EXPECT_EQ(lines[1],
            "hilo_server: database " + db + " " + what +
                " while this server had it open; health is NOT_SERVING and "
                "no range is handed out from it any more; exiting with "
                "status 6. Do not start a new database in its place: restore "
                "the file and raise every collection above what it handed "
                "out (docs/reliability.md)");
}

INSTANTIATE_TEST_SUITE_P(DeletedOrReplaced, ServerMainLostDatabaseTest,
                         ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Replaced" : "Deleted";
                         });

}  // namespace
}  // namespace hilo
