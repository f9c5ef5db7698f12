// AuditLog's limit on refusal lines: N a second, the rest counted in one
// summary line; administrative calls always written. Also through a real
// server over gRPC (so not among the unit.tsan suites).
#include "service/access/audit_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"
#include "hilo/v1/hilo.grpc.pb.h"
#include "prometheus/text_serializer.h"
#include "service/server.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::ReadFile;
using ::hilo::testing_util::TempDir;
using ::hilo::testing_util::WriteFile;
using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

AuditRecord Refusal(std::string method, absl::Status outcome) {
  AuditRecord record;
  record.identity = "anonymous";
  record.peer = "ipv4:10.0.0.9:4000";
  record.method = std::move(method);
  record.collection = "orders";
  record.outcome = std::move(outcome);
  return record;
}

AuditRecord Denied(std::string method) {
  return Refusal(std::move(method),
                 absl::PermissionDeniedError("anonymous may not"));
}

AuditRecord Accepted() {
  AuditRecord record;
  record.identity = "cn:ops";
  record.peer = "ipv4:10.0.0.7:5000";
  record.method = "SetFloor";
  record.collection = "orders";
  record.request = {{"floor", 1000}};
  return record;
}

std::string Line(const AuditRecord& record, absl::Time time) {
  return AuditJson(record, time) + "\n";
}

class AuditLogLimitTest : public ::testing::Test {
 protected:
  // Each caller's budget; all anonymous callers together have none of
  // their own unless given one.
  std::unique_ptr<AuditLog> Open(int refusals_per_second,
                                 int anonymous_refusals_per_second = 0) {
    AuditLogOptions options;
    options.refusals_per_second = refusals_per_second;
    options.anonymous_refusals_per_second = anonymous_refusals_per_second;
    options.on_suppressed = [this] { ++suppressed_; };
    auto log = AuditLog::Open(path_, &clock_, std::move(options));
    EXPECT_THAT(log, IsOk());
    return log.ok() ? *std::move(log) : nullptr;
  }
  // What the file holds once `log` (if not null) has written every line
  // it was given: its writer thread writes them.
  std::string Contents(AuditLog* log) {
    if (log != nullptr) {
      EXPECT_TRUE(log->WaitUntilWritten(absl::Seconds(30)));
    }
    return ReadFile(path_);
  }

  TempDir dir_;
  const std::string path_ = dir_.File("audit.jsonl");
  ManualClock clock_{kStart};
  int suppressed_ = 0;
};

TEST_F(AuditLogLimitTest, WritesNRefusalsASecondThenOneSummaryOfTheRest) {
  std::unique_ptr<AuditLog> log = Open(3);
  for (int i = 0; i < 3; ++i) log->WriteRefusal(Denied("NextRange"));
  for (int i = 0; i < 1000; ++i) log->WriteRefusal(Denied("NextRange"));
  clock_.Advance(absl::Milliseconds(10));
  log->WriteRefusal(Denied("SetFloor"));
  log->WriteRefusal(
      Refusal("NextRange", absl::FailedPreconditionError("guard rail")));
  clock_.Advance(absl::Milliseconds(989));  // still the first second
  log->WriteRefusal(Denied("ReturnRange"));
  EXPECT_EQ(suppressed_, 1003);
  std::string expected;
  for (int i = 0; i < 3; ++i) expected += Line(Denied("NextRange"), kStart);
  EXPECT_EQ(Contents(log.get()), expected);

  clock_.Advance(absl::Milliseconds(1));  // the next second
  log->WriteRefusal(Denied("GetCollection"));
  log->WriteRefusal(Denied("GetCollection"));
  expected += absl::StrCat(
      "{\"time\":\"2027-01-15T08:00:01.000000Z\",\"suppressed\":{"
      "\"count\":1003,\"first\":\"2027-01-15T08:00:00.000000Z\","
      "\"last\":\"2027-01-15T08:00:00.999000Z\","
      "\"by_method\":{\"NextRange\":1001,\"ReturnRange\":1,\"SetFloor\":1},"
      "\"by_code\":{\"FAILED_PRECONDITION\":1,\"PERMISSION_DENIED\":1002},"
      "\"top_callers\":{\"anonymous "
      "ipv4:10.0.0.9\":1003},\"top_collections\":{\"orders\":1003}}}\n",
      Line(Denied("GetCollection"), kStart + absl::Seconds(1)),
      Line(Denied("GetCollection"), kStart + absl::Seconds(1)));
  EXPECT_EQ(Contents(log.get()), expected);
  log.reset();  // nothing left to summarize
  EXPECT_EQ(Contents(log.get()), expected);
}

AuditRecord From(std::string identity, std::string peer,
                 std::string collection) {
  AuditRecord record = Denied("NextRange");
  record.identity = std::move(identity);
  record.peer = std::move(peer);
  record.collection = std::move(collection);
  return record;
}

// Each authenticated identity has a budget of its own, which no flood of
// anyone else's touches; anonymous callers are counted by address (the
// port dropped), each address with a budget, all of them within one total.
// The summary names the callers and collections it counted most.
TEST_F(AuditLogLimitTest,
       EachCallerHasItsOwnBudgetAndAnonymousOnesShareATotal) {
  std::unique_ptr<AuditLog> log = Open(3, /*anonymous_refusals_per_second=*/5);
  const AuditRecord a1 = From("anonymous", "ipv4:10.0.0.1:1000", "junk-a");
  const AuditRecord a1_other_port =
      From("anonymous", "ipv4:10.0.0.1:2000", "junk-a");
  const AuditRecord a2 = From("anonymous", "ipv6:[::2]:3000", "junk-b");
  const AuditRecord a3 = From("anonymous", "ipv4:10.0.0.3:4000", "junk-c");
  const AuditRecord lowpriv =
      From("token:lowpriv", "ipv4:10.0.0.1:5000", "payments");
  const AuditRecord ops = From("cn:ops", "ipv4:10.0.0.7:5000", "orders");
  std::string expected;
  for (int i = 0; i < 500; ++i) {
    log->WriteRefusal(a1);
    log->WriteRefusal(a1_other_port);
    log->WriteRefusal(a2);
    log->WriteRefusal(a3);
    if (i < 3) {
      // Written line by line for a1, a2 and a3 until the total of 5.
      if (i == 0) {
        expected += Line(a1, kStart) + Line(a1_other_port, kStart) +
                    Line(a2, kStart) + Line(a3, kStart);
      } else if (i == 1) {
        expected += Line(a1, kStart);
      }
      log->WriteRefusal(lowpriv);
      expected += Line(lowpriv, kStart);
    }
  }
  log->WriteRefusal(lowpriv);  // its fourth: over its own budget
  log->WriteRefusal(ops);
  log->WriteRefusal(ops);
  expected += Line(ops, kStart) + Line(ops, kStart);
  EXPECT_EQ(Contents(log.get()), expected);
  EXPECT_EQ(suppressed_, 2000 - 5 + 1);

  clock_.Advance(absl::Seconds(1));
  log->WriteRefusal(a3);
  expected += absl::StrCat(
      "{\"time\":\"2027-01-15T08:00:01.000000Z\",\"suppressed\":{"
      "\"count\":1996,\"first\":\"2027-01-15T08:00:00.000000Z\","
      "\"last\":\"2027-01-15T08:00:00.000000Z\","
      "\"by_method\":{\"NextRange\":1996},"
      "\"by_code\":{\"PERMISSION_DENIED\":1996},"
      "\"top_callers\":{\"anonymous ipv4:10.0.0.1\":997,"
      "\"anonymous ipv4:10.0.0.3\":499,\"anonymous ipv6:[::2]\":499,"
      "\"token:lowpriv\":1},"
      "\"top_collections\":{\"junk-a\":997,\"junk-b\":499,"
      "\"junk-c\":499,\"payments\":1}}}\n",
      Line(a3, kStart + absl::Seconds(1)));
  EXPECT_EQ(Contents(log.get()), expected);
}

TEST(AuditCallerTest, AnonymousCallersAreTheirAddressWithoutThePort) {
  EXPECT_EQ(AuditCaller("anonymous", "ipv4:10.0.0.9:41234"),
            "anonymous ipv4:10.0.0.9");
  EXPECT_EQ(AuditCaller("anonymous", "ipv6:[::1]:41234"),
            "anonymous ipv6:[::1]");
  EXPECT_EQ(AuditCaller("anonymous", "unix:/run/hilo.sock"),
            "anonymous unix:/run/hilo.sock");
  EXPECT_EQ(AuditCaller("token:lowpriv", "ipv4:10.0.0.9:41234"),
            "token:lowpriv");
}

TEST_F(AuditLogLimitTest, AcceptedAdministrativeCallsAreNeverSuppressed) {
  std::unique_ptr<AuditLog> log = Open(1);
  std::string expected;
  for (int i = 0; i < 100; ++i) {
    log->WriteRefusal(Denied("SetFloor"));
    log->Write(Accepted());
    expected += i == 0 ? Line(Denied("SetFloor"), kStart) : "";
    expected += Line(Accepted(), kStart);
  }
  EXPECT_EQ(suppressed_, 99);
  EXPECT_EQ(Contents(log.get()), expected);
  // The first line of a later second, an accepted one too, is preceded by
  // the summary.
  clock_.Advance(absl::Seconds(5));
  log->Write(Accepted());
  expected += absl::StrCat(
      "{\"time\":\"2027-01-15T08:00:05.000000Z\",\"suppressed\":{"
      "\"count\":99,\"first\":\"2027-01-15T08:00:00.000000Z\","
      "\"last\":\"2027-01-15T08:00:00.000000Z\","
      "\"by_method\":{\"SetFloor\":99},"
      "\"by_code\":{\"PERMISSION_DENIED\":99},"
      "\"top_callers\":{\"anonymous "
      "ipv4:10.0.0.9\":99},\"top_collections\":{\"orders\":99}}}\n",
      Line(Accepted(), kStart + absl::Seconds(5)));
  EXPECT_EQ(Contents(log.get()), expected);
}

TEST_F(AuditLogLimitTest, SummaryIsWrittenAtClose) {
  std::unique_ptr<AuditLog> log = Open(1);
  log->WriteRefusal(Denied("NextRange"));
  log->WriteRefusal(Denied("NextRange"));
  log->WriteRefusal(Denied("NextRange"));
  clock_.Advance(absl::Milliseconds(250));
  log.reset();
  EXPECT_EQ(Contents(log.get()),
            absl::StrCat(
                Line(Denied("NextRange"), kStart),
                "{\"time\":\"2027-01-15T08:00:00.250000Z\","
                "\"suppressed\":{\"count\":2,"
                "\"first\":\"2027-01-15T08:00:00.000000Z\","
                "\"last\":\"2027-01-15T08:00:00.000000Z\","
                "\"by_method\":{\"NextRange\":2},"
                "\"by_code\":{\"PERMISSION_DENIED\":2},"
                "\"top_callers\":{\"anonymous "
                "ipv4:10.0.0.9\":2},\"top_collections\":{\"orders\":2}}}\n"));
}

TEST_F(AuditLogLimitTest, FlushWritesTheSummaryOnceAndNothingWhenNoneIsDue) {
  std::unique_ptr<AuditLog> log = Open(1);
  log->Flush();
  EXPECT_EQ(Contents(log.get()), "");
  log->WriteRefusal(Denied("NextRange"));
  log->WriteRefusal(Denied("NextRange"));
  log->Flush();
  log->Flush();
  EXPECT_EQ(Contents(log.get()),
            absl::StrCat(
                Line(Denied("NextRange"), kStart),
                "{\"time\":\"2027-01-15T08:00:00.000000Z\","
                "\"suppressed\":{\"count\":1,"
                "\"first\":\"2027-01-15T08:00:00.000000Z\","
                "\"last\":\"2027-01-15T08:00:00.000000Z\","
                "\"by_method\":{\"NextRange\":1},"
                "\"by_code\":{\"PERMISSION_DENIED\":1},"
                "\"top_callers\":{\"anonymous "
                "ipv4:10.0.0.9\":1},\"top_collections\":{\"orders\":1}}}\n"));
}

TEST_F(AuditLogLimitTest, ZeroMeansNoLimit) {
  std::unique_ptr<AuditLog> log = Open(0);
  std::string expected;
  for (int i = 0; i < 500; ++i) {
    log->WriteRefusal(Denied("NextRange"));
    expected += Line(Denied("NextRange"), kStart);
  }
  log.reset();
  EXPECT_EQ(suppressed_, 0);
  EXPECT_EQ(Contents(log.get()), expected);
}

// A wall clock stepped back must not hold every refusal in one long
// "second": the step starts a new one.
TEST_F(AuditLogLimitTest, ClockSteppedBackStartsANewSecond) {
  std::unique_ptr<AuditLog> log = Open(1);
  log->WriteRefusal(Denied("NextRange"));
  log->WriteRefusal(Denied("NextRange"));
  clock_.Set(kStart - absl::Hours(1));
  log->WriteRefusal(Denied("NextRange"));
  EXPECT_EQ(suppressed_, 1);
  EXPECT_EQ(
      Contents(log.get()),
      absl::StrCat(Line(Denied("NextRange"), kStart),
                   "{\"time\":\"2027-01-15T07:00:00.000000Z\","
                   "\"suppressed\":{\"count\":1,"
                   "\"first\":\"2027-01-15T08:00:00.000000Z\","
                   "\"last\":\"2027-01-15T08:00:00.000000Z\","
                   "\"by_method\":{\"NextRange\":1},"
                   "\"by_code\":{\"PERMISSION_DENIED\":1},"
                   "\"top_callers\":{\"anonymous "
                   "ipv4:10.0.0.9\":1},\"top_collections\":{\"orders\":1}}}\n",
                   Line(Denied("NextRange"), kStart - absl::Hours(1))));
}

// A refused name may be a whole request long; its line holds its first
// 256 bytes only, so a refusal line stays about 2 KB at most.
TEST(JsonStringTest, EscapesWhatJsonNeedsAndKeepsUtf8) {
  EXPECT_EQ(JsonString("orders"), "\"orders\"");
  EXPECT_EQ(JsonString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonString(std::string("\n\r\t\x01\x1f\x7f\0z", 8)),
            "\"\\n\\r\\t\\u0001\\u001f\\u007f\\u0000z\"");
  EXPECT_EQ(JsonString("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"),
            "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"");
  // Invalid UTF-8: a lone continuation byte, a truncated sequence, a
  // surrogate, an overlong '/'.
  EXPECT_EQ(JsonString("a\x80"
                       "b\xE2\x82"
                       "c\xED\xA0\x80"
                       "d\xC0\xAF"),
            "\"a\\ufffdb\\ufffd\\ufffdc\\ufffd\\ufffd\\ufffdd\\ufffd\\ufffd\"");
}

TEST(AuditLogTest, AFailedWriteIsReportedOnceAndNeverStopsTheServer) {
  ManualClock clock(kStart);
  absl::StatusOr<std::unique_ptr<AuditLog>> audit =
      AuditLog::Open("/dev/full", &clock);
  ASSERT_THAT(audit, IsOk());
  AuditRecord record;
  record.method = "SetFloor";
  ::testing::internal::CaptureStderr();
  (*audit)->Write(record);
  (*audit)->Write(record);
  // Reported by the log's writer thread, through stderr's.
  EXPECT_TRUE((*audit)->WaitUntilWritten(absl::Seconds(10)));
  EXPECT_TRUE(StderrLines().WaitUntilWritten(absl::Seconds(10)));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "hilo_server: audit log /dev/full: a write failed (No space left "
            "on device); audit lines may be lost until it works again\n");
}

TEST(AuditLogTest, UnopenableFileIsNamed) {
  ManualClock clock(kStart);
  TempDir dir;
  EXPECT_EQ(AuditLog::Open(dir.File("no/such/dir"), &clock).status().message(),
            absl::StrCat("audit log ", dir.File("no/such/dir"),
                         " cannot be opened: No such file or directory"));
}

TEST(AuditJsonTest, LongCollectionNameIsCutTo256Bytes) {
  AuditRecord record = Denied("SetFloor");
  record.collection = std::string(60'000, '\xff');
  record.outcome = absl::InvalidArgumentError(
      "collection name is 60000 bytes; the limit is 256");
  std::string escaped;
  for (int i = 0; i < 256; ++i) escaped += "\\ufffd";
  EXPECT_EQ(AuditJson(record, kStart),
            absl::StrCat("{\"time\":\"2027-01-15T08:00:00.000000Z\","
                         "\"identity\":\"anonymous\","
                         "\"peer\":\"ipv4:10.0.0.9:4000\",\"method\":"
                         "\"SetFloor\",\"collection\":\"",
                         escaped,
                         "\",\"request\":{},\"code\":\"INVALID_ARGUMENT\","
                         "\"message\":\"collection name is 60000 bytes; the "
                         "limit is 256\"}"));
}

// Every Unicode line separator and bidirectional control in a refused
// name (or any field) is escaped: the line stays one line for a reader
// that splits on Unicode line breaks (U+2028 made one refusal several
// unparsable lines) and shows in the order it was written (U+202E).
// Their neighbours, ordinary characters, are kept as they are.
TEST(AuditJsonTest, EscapesEveryUnicodeLineSeparatorAndBidiControl) {
  struct Case {
    const char* utf8;
    const char* escaped;
  };
  const Case kEscaped[] = {
      {"\x0B", "\\u000b"},         {"\x0C", "\\u000c"},
      {"\xC2\x85", "\\u0085"},     {"\xE2\x80\xA8", "\\u2028"},
      {"\xE2\x80\xA9", "\\u2029"}, {"\xD8\x9C", "\\u061c"},
      {"\xE2\x80\x8E", "\\u200e"}, {"\xE2\x80\x8F", "\\u200f"},
      {"\xE2\x80\xAA", "\\u202a"}, {"\xE2\x80\xAB", "\\u202b"},
      {"\xE2\x80\xAC", "\\u202c"}, {"\xE2\x80\xAD", "\\u202d"},
      {"\xE2\x80\xAE", "\\u202e"}, {"\xE2\x81\xA6", "\\u2066"},
      {"\xE2\x81\xA7", "\\u2067"}, {"\xE2\x81\xA8", "\\u2068"},
      {"\xE2\x81\xA9", "\\u2069"}, {"\xC2\x80", "\\u0080"},
      {"\xC2\x9F", "\\u009f"},
  };
  for (const Case& c : kEscaped) {
    SCOPED_TRACE(c.escaped);
    AuditRecord record = Denied("NextRange");
    record.identity = absl::StrCat("uri:spiffe://x/", c.utf8);
    record.collection = absl::StrCat("pay", c.utf8, "ments");
    record.outcome = absl::PermissionDeniedError(
        absl::StrCat("may not call NextRange on \"", record.collection, "\""));
    const std::string line = AuditJson(record, kStart);
    EXPECT_THAT(line, HasSubstr(absl::StrCat("\"identity\":\"uri:spiffe://x/",
                                             c.escaped, "\"")));
    EXPECT_THAT(line, HasSubstr(absl::StrCat("\"collection\":\"pay", c.escaped,
                                             "ments\"")));
    EXPECT_THAT(
        line, HasSubstr(absl::StrCat("on \\\"pay", c.escaped, "ments\\\"\"")));
    EXPECT_THAT(line, ::testing::Not(HasSubstr(c.utf8)));
  }
  // Neighbours of the ranges, and ordinary non-ASCII: kept.
  for (const char* kept :
       {"\xC2\xA0", "\xD8\x9B", "\xE2\x80\x8D", "\xE2\x80\xA7", "\xE2\x80\xAF",
        "\xE2\x81\xA5", "\xE2\x81\xAA", "\xC3\xA9"}) {
    SCOPED_TRACE(absl::CHexEscape(kept));
    EXPECT_EQ(JsonString(kept), absl::StrCat("\"", kept, "\""));
  }
}

// The flag's plumbing, the metric and the summary at shutdown, through a
// real server: refused NextRange calls over gRPC on a manual clock.
TEST(AuditLogServerTest, RefusalFloodIsLimitedAndSummarizedAtShutdown) {
  TempDir dir;
  ManualClock clock(kStart);  // outlives the server
  WriteFile(dir.File("policy.textproto"),
            "grant { identity: \"cn:ops\" collections: \"*\" }\n");
  ServerOptions options = testing_util::TestServerOptions(dir);
  options.authz_policy = dir.File("policy.textproto");
  options.audit_log = dir.File("audit.jsonl");
  options.audit_refusals_per_second = 3;
  options.clock = &clock;
  std::unique_ptr<Server> server = testing_util::StartServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = hilo::v1::HiLo::NewStub(
      grpc::CreateChannel(testing_util::Address(server->port()),
                          grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 50; ++i) {
    grpc::ClientContext context;
    hilo::v1::NextRangeRequest request;
    request.set_collection("orders");
    hilo::v1::NextRangeResponse response;
    ASSERT_EQ(stub->NextRange(&context, request, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  clock.Advance(absl::Milliseconds(250));
  EXPECT_THAT(prometheus::TextSerializer().Serialize(
                  server->metrics()->registry()->Collect()),
              HasSubstr("\nhilo_audit_lines_suppressed_total 47\n"));
  server->Shutdown(absl::ZeroDuration());

  const std::vector<std::string> lines = absl::StrSplit(
      ReadFile(dir.File("audit.jsonl")), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3 + 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(lines[i], HasSubstr("\"method\":\"NextRange\",\"collection\":"
                                    "\"orders\""));
    EXPECT_THAT(lines[i], HasSubstr("\"code\":\"PERMISSION_DENIED\""));
  }
  EXPECT_EQ(lines[3],
            "{\"time\":\"2027-01-15T08:00:00.250000Z\",\"suppressed\":{"
            "\"count\":47,\"first\":\"2027-01-15T08:00:00.000000Z\","
            "\"last\":\"2027-01-15T08:00:00.000000Z\","
            "\"by_method\":{\"NextRange\":47},"
            "\"by_code\":{\"PERMISSION_DENIED\":47},"
            "\"top_callers\":{\"anonymous ipv4:127.0.0.1\":47},"
            "\"top_collections\":{\"orders\":47}}}");
}

// An audit file nobody reads (a FIFO whose reader stalls, as a log shipper
// that stopped): refusals are still answered at once, the lines past the
// writer's queue are dropped and counted in hilo_log_lines_dropped_total,
// and once the reader is back the file has every line that was queued,
// then one line saying how many were dropped.
TEST(AuditLogServerTest, StalledAuditFileDropsLinesCountsThemAndSaysSoOnce) {
  TempDir dir;
  const std::string fifo = dir.File("audit.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opened before the server opens its end, and not read until the end.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  WriteFile(dir.File("policy.textproto"),
            "grant { identity: \"cn:ops\" collections: \"*\" }\n");
  ServerOptions options = testing_util::TestServerOptions(dir);
  options.authz_policy = dir.File("policy.textproto");
  options.audit_log = fifo;
  options.audit_refusals_per_second = 0;  // every refusal a line
  options.audit_anonymous_refusals_per_second = 0;
  std::unique_ptr<Server> server = testing_util::StartServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = hilo::v1::HiLo::NewStub(
      grpc::CreateChannel(testing_util::Address(server->port()),
                          grpc::InsecureChannelCredentials()));
  // Lines of about 500 bytes: 64 KiB of pipe and the 1 MiB queue hold
  // about 2,200 of them.
  const int kRefusals = 4000;
  for (int i = 0; i < kRefusals; ++i) {
    grpc::ClientContext context;
    hilo::v1::NextRangeRequest request;
    request.set_collection(absl::StrCat(i, std::string(200, 'n')));
    hilo::v1::NextRangeResponse response;
    ASSERT_EQ(stub->NextRange(&context, request, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  const std::string scrape = prometheus::TextSerializer().Serialize(
      server->metrics()->registry()->Collect());
  const std::string series = "\nhilo_log_lines_dropped_total{log=\"audit\"} ";
  const size_t at = scrape.find(series);
  ASSERT_NE(at, std::string::npos) << scrape;
  int64_t dropped = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      scrape.substr(at + series.size(),
                    scrape.find('\n', at + series.size()) - at - series.size()),
      &dropped));
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, kRefusals);

  // The reader is back; the server's end closes when it has written all.
  ASSERT_EQ(::fcntl(reader, F_SETFL, 0), 0);
  std::string text;
  std::thread read([&] {
    char buffer[65536];
    ssize_t n;
    while ((n = ::read(reader, buffer, sizeof(buffer))) > 0) {
      text.append(buffer, static_cast<size_t>(n));
    }
  });
  server.reset();
  read.join();
  ::close(reader);
  const std::vector<std::string> lines =
      absl::StrSplit(text, '\n', absl::SkipEmpty());
  int refusal_lines = 0;
  std::vector<std::string> dropped_lines;
  for (const std::string& line : lines) {
    if (absl::StrContains(line, "\"method\":\"NextRange\"")) {
      ++refusal_lines;
    } else {
      dropped_lines.push_back(line);
    }
  }
  EXPECT_EQ(refusal_lines + dropped, kRefusals);
  ASSERT_EQ(dropped_lines.size(), 1u);
  EXPECT_THAT(dropped_lines[0], ::testing::StartsWith("{\"time\":\""));
  EXPECT_THAT(dropped_lines[0],
              ::testing::EndsWith(
                  absl::StrCat(",\"dropped\":{\"count\":", dropped, "}}")));
}

}  // namespace
}  // namespace hilo
