// Gatekeeper (service/rpc/gatekeeper.h): the policy, the audit trail and
// the refusal counts in front of the services, over real services and a real
// SQLite store.
#include "service/rpc/gatekeeper.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/await.h"
#include "prometheus/text_serializer.h"
#include "service/access/audit_log.h"
#include "service/access/authorizer.h"
#include "service/observe/metrics.h"
#include "service/rpc/admin_service.h"
#include "service/rpc/hilo_service.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "testing/authz_policy.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::Bearer;
using ::hilo::testing_util::Cert;
using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::kPolicy;
using ::hilo::testing_util::kTokens;
using ::hilo::testing_util::ReadFile;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::hilo::testing_util::WriteFile;
using ::testing::HasSubstr;
using ::testing::Not;

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

// A Gatekeeper over real services and a real SQLite store, with its audit
// trail in a file and its counts in real Metrics.
class GatekeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteRangeStoreOptions options;
    options.path = dir_.File("h.db");
    options.clock = &clock_;
    auto store = SqliteRangeStore::Open(options);
    ASSERT_THAT(store, IsOk());
    store_ = *std::move(store);
    WriteFile(policy_, kPolicy);
    WriteFile(tokens_, kTokens);
    auto authz = Authorizer::Load(policy_, tokens_);
    ASSERT_THAT(authz, IsOk());
    authz_ = *std::move(authz);
    auto audit = AuditLog::Open(dir_.File("audit.jsonl"), &clock_);
    ASSERT_THAT(audit, IsOk());
    audit_ = *std::move(audit);
    service_ = std::make_unique<HiLoService>(
        store_.get(), RangeSizePolicy({}), "A", &clock_, &metrics_,
        /*allow_returns_without_token=*/false, nullptr, kJump);
    admin_ = std::make_unique<AdminService>(store_.get(), "A");
    gate_ = std::make_unique<Gatekeeper>(service_.get(), admin_.get(),
                                         authz_.get(), audit_.get(), &metrics_);
  }

  absl::Status Next(const Caller& caller, const std::string& collection,
                    int64_t last_max = 0,
                    hilo::v1::NextRangeResponse* out = nullptr) {
    hilo::v1::NextRangeRequest request;
    request.set_collection(collection);
    request.set_last_max(last_max);
    hilo::v1::NextRangeResponse response;
    absl::Status status = base::Await<absl::Status>([&](ServiceCallback done) {
      gate_->NextRange(caller, request, out ? out : &response, std::move(done));
    });
    return status;
  }
  absl::Status Floor(const Caller& caller, const std::string& collection,
                     int64_t floor) {
    hilo::v1::SetFloorRequest request;
    request.set_collection(collection);
    request.set_floor(floor);
    hilo::v1::SetFloorResponse response;
    return base::Await<absl::Status>([&](ServiceCallback done) {
      gate_->SetFloor(caller, request, &response, std::move(done));
    });
  }
  absl::Status Delete(const Caller& caller, const std::string& collection,
                      bool retire = false) {
    hilo::v1::DeleteCollectionRequest request;
    request.set_collection(collection);
    request.set_retire(retire);
    hilo::v1::DeleteCollectionResponse response;
    return base::Await<absl::Status>([&](ServiceCallback done) {
      gate_->DeleteCollection(caller, request, &response, std::move(done));
    });
  }
  int64_t Max(const std::string& collection) {
    auto row = store_->Get(collection);
    return row.ok() && row->has_value() ? (*row)->max : -1;
  }
  // The file once the log's writer thread has written every line so far.
  std::string Audit() {
    EXPECT_TRUE(audit_->WaitUntilWritten(absl::Seconds(10)));
    return ReadFile(dir_.File("audit.jsonl"));
  }
  std::string Exposition() {
    return prometheus::TextSerializer().Serialize(
        metrics_.registry()->Collect());
  }

  static constexpr int64_t kJump = 1000;
  TempDir dir_;
  ManualClock clock_{kStart};
  std::string policy_ = dir_.File("policy.textproto");
  std::string tokens_ = dir_.File("tokens");
  std::unique_ptr<SqliteRangeStore> store_;
  std::unique_ptr<Authorizer> authz_;
  std::unique_ptr<AuditLog> audit_;
  Metrics metrics_{MetricsOptions{"A", "test", 2}};
  std::unique_ptr<HiLoService> service_;
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<Gatekeeper> gate_;
};

TEST_F(GatekeeperTest, RefusalChangesNothingAndIsAuditedAndCounted) {
  const Caller orders = Cert("uri:spiffe://test/orders");
  ASSERT_THAT(Next(orders, "orders"), IsOk());
  EXPECT_THAT(Next(orders, "users", 7),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(Max("users"), -1);
  EXPECT_THAT(Floor(orders, "orders", 500),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(Max("orders"), 32);
  EXPECT_EQ(Audit(),
            "{\"time\":\"2027-01-15T08:00:00.000000Z\","
            "\"identity\":\"uri:spiffe://test/orders\","
            "\"peer\":\"ipv4:127.0.0.1:5555\",\"method\":\"NextRange\","
            "\"collection\":\"users\","
            "\"request\":{\"last_max\":7,\"last_size\":0},"
            "\"code\":\"PERMISSION_DENIED\",\"message\":"
            "\"uri:spiffe://test/orders may not call NextRange on collection "
            "\\\"users\\\"\"}\n"
            "{\"time\":\"2027-01-15T08:00:00.000000Z\","
            "\"identity\":\"uri:spiffe://test/orders\","
            "\"peer\":\"ipv4:127.0.0.1:5555\",\"method\":\"SetFloor\","
            "\"collection\":\"orders\",\"request\":{\"floor\":500},"
            "\"code\":\"PERMISSION_DENIED\",\"message\":"
            "\"uri:spiffe://test/orders may not call SetFloor on collection "
            "\\\"orders\\\"\"}\n");
  const std::string text = Exposition();
  EXPECT_THAT(text, HasSubstr("hilo_requests_denied_total{method=\"NextRange\","
                              "reason=\"permission\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("hilo_requests_denied_total{method=\"SetFloor\","
                              "reason=\"permission\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("hilo_requests_denied_total{method="
                        "\"ListCollections\",reason=\"guard_rail\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("hilo_requests_denied_total{method="
                              "\"ReturnRange\",reason=\"permission\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("hilo_requests_total{code=\"PERMISSION_DENIED\","
                              "method=\"NextRange\"} 1\n"));
}

// ReturnRanges admits each item as a ReturnRange of its own: a denied item
// is refused alone, audited and counted; the others apply.
TEST_F(GatekeeperTest, ReturnRangesRefusesADeniedItemAlone) {
  const Caller orders = Cert("uri:spiffe://test/orders");
  hilo::v1::NextRangeResponse range;
  ASSERT_THAT(Next(orders, "orders", 0, &range), IsOk());
  // Someone else's range of a collection this caller may not use.
  constexpr uint64_t kUsersToken = 0x5EC2E7;
  ASSERT_THAT(store_->Allocate("users", 32, 0, kUsersToken), IsOk());
  hilo::v1::ReturnRangesRequest request;
  for (auto [name, token] :
       {std::pair<const char*, uint64_t>{"users", kUsersToken},
        {"orders", range.range_token()}}) {
    hilo::v1::ReturnRangeRequest* item = request.add_returns();
    item->set_collection(name);
    item->set_end(32);
    item->set_last(4);
    item->set_range_token(token);
  }
  hilo::v1::ReturnRangesResponse response;
  const absl::Status status =
      base::Await<absl::Status>([&](ServiceCallback done) {
        gate_->ReturnRanges(orders, request, &response, std::move(done));
      });
  ASSERT_THAT(status, IsOk());
  ASSERT_EQ(response.results_size(), 2);
  EXPECT_EQ(response.results(0).code(),
            static_cast<int>(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(response.results(0).message(),
              HasSubstr("may not call ReturnRange on collection \"users\""));
  EXPECT_FALSE(response.results(0).applied());
  EXPECT_EQ(response.results(1).code(), 0);
  EXPECT_TRUE(response.results(1).applied());
  EXPECT_EQ(response.results(1).max(), 4);
  EXPECT_EQ(Max("users"), 32);
  EXPECT_EQ(Max("orders"), 4);
  EXPECT_THAT(Audit(), HasSubstr("\"method\":\"ReturnRange\","
                                 "\"collection\":\"users\""));
  const std::string text = Exposition();
  EXPECT_THAT(text, HasSubstr("hilo_requests_denied_total{method="
                              "\"ReturnRange\",reason=\"permission\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("hilo_requests_total{code=\"PERMISSION_DENIED\","
                              "method=\"ReturnRange\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("hilo_requests_total{code=\"OK\","
                              "method=\"ReturnRange\"} 1\n"));
}

// A ReturnRanges of 1000 items resolves its caller once, whatever the
// number of tokens configured: with an unknown token the whole call is
// refused (UNAUTHENTICATED, one audit line) after as many token digest
// comparisons as a one-item call makes, and none for a token longer than
// any configured one may be. (Each item once compared the token with every
// configured one, byte by byte: 218 ms of CPU for a 7,000-byte token and
// 100 tokens.)
TEST_F(GatekeeperTest, ReturnRangesResolvesItsCallerOnceWhateverTheTokenCount) {
  std::string tokens;
  for (int i = 0; i < 100; ++i) {
    tokens += absl::StrFormat("t%d %032d\n", i, i);
  }
  WriteFile(tokens_, tokens);
  WriteFile(policy_, "grant { identity: \"token:t7\" collections: \"*\" }\n");
  ASSERT_THAT(authz_->Reload(), IsOk());

  auto returns = [&](const Caller& caller, int items,
                     hilo::v1::ReturnRangesResponse* response) {
    hilo::v1::ReturnRangesRequest request;
    for (int i = 0; i < items; ++i) {
      hilo::v1::ReturnRangeRequest* item = request.add_returns();
      item->set_collection(absl::StrCat("c", i));
      item->set_end(10);
      item->set_last(5);
      item->set_range_token(1);
    }
    return base::Await<absl::Status>([&](ServiceCallback done) {
      gate_->ReturnRanges(caller, request, response, std::move(done));
    });
  };
  struct Cost {
    int64_t resolutions;
    int64_t comparisons;
  };
  auto cost_of = [&](const Caller& caller, int items, absl::Status* status,
                     hilo::v1::ReturnRangesResponse* response) {
    const Cost before{authz_->resolutions(),
                      authz_->token_digest_comparisons()};
    *status = returns(caller, items, response);
    return Cost{authz_->resolutions() - before.resolutions,
                authz_->token_digest_comparisons() - before.comparisons};
  };

  const std::string unknown(64, 'u');
  for (int items : {1, 1000}) {
    SCOPED_TRACE(absl::StrCat(items, " items, an unknown 64-byte token"));
    absl::Status status;
    hilo::v1::ReturnRangesResponse response;
    const Cost cost = cost_of(Bearer(unknown), items, &status, &response);
    EXPECT_THAT(status,
                StatusIs(absl::StatusCode::kUnauthenticated,
                         "anonymous sent a bearer token this server does not "
                         "know (calling ReturnRanges)"));
    EXPECT_EQ(response.results_size(), 0);
    EXPECT_EQ(cost.resolutions, 1);
    EXPECT_EQ(cost.comparisons, 100);
  }
  {
    SCOPED_TRACE("1000 items, an unknown 7,000-byte token");
    absl::Status status;
    hilo::v1::ReturnRangesResponse response;
    const Cost cost =
        cost_of(Bearer(std::string(7000, 'x')), 1000, &status, &response);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnauthenticated));
    EXPECT_EQ(cost.resolutions, 1);
    EXPECT_EQ(cost.comparisons, 0);
  }
  {
    SCOPED_TRACE("1000 items, a known token");
    absl::Status status;
    hilo::v1::ReturnRangesResponse response;
    const Cost cost =
        cost_of(Bearer(absl::StrFormat("%032d", 7)), 1000, &status, &response);
    ASSERT_THAT(status, IsOk());
    ASSERT_EQ(response.results_size(), 1000);
    // Judged item by item by the store (code 0): none of these ranges
    // exists, so none applies.
    EXPECT_EQ(response.results(999).code(), 0);
    EXPECT_FALSE(response.results(999).applied());
    EXPECT_EQ(cost.resolutions, 1);
    EXPECT_EQ(cost.comparisons, 100);
  }
  // One refusal line for each refused call, none for the items.
  const std::vector<std::string> lines =
      absl::StrSplit(Audit(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[1],
              HasSubstr("\"identity\":\"anonymous\","
                        "\"peer\":\"ipv4:127.0.0.1:6666\","
                        "\"method\":\"ReturnRanges\",\"collection\":\"\","
                        "\"request\":{\"items\":1000},"
                        "\"code\":\"UNAUTHENTICATED\""));
  EXPECT_THAT(Exposition(),
              HasSubstr("hilo_requests_denied_total{method=\"ReturnRange\","
                        "reason=\"permission\"} 3\n"));
}

TEST_F(GatekeeperTest, DeleteIsDeniedToNonAdminsAndEveryDeleteIsAudited) {
  ASSERT_THAT(Floor(Cert("cn:ops"), "typo", 0), IsOk());
  EXPECT_THAT(Delete(Cert("dns:reader.test"), "typo"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(Max("typo"), 0);
  EXPECT_THAT(Delete(Cert("cn:ops"), "typo"), IsOk());
  EXPECT_EQ(Max("typo"), -1);
  const std::string audit = Audit();
  EXPECT_THAT(audit,
              HasSubstr("\"identity\":\"dns:reader.test\","
                        "\"peer\":\"ipv4:127.0.0.1:5555\",\"method\":"
                        "\"DeleteCollection\",\"collection\":\"typo\","
                        "\"request\":{},\"code\":\"PERMISSION_DENIED\""));
  EXPECT_THAT(audit, HasSubstr("\"identity\":\"cn:ops\","
                               "\"peer\":\"ipv4:127.0.0.1:5555\",\"method\":"
                               "\"DeleteCollection\",\"collection\":\"typo\","
                               "\"request\":{},\"code\":\"OK\""));
  EXPECT_THAT(
      Exposition(),
      HasSubstr("hilo_requests_denied_total{method=\"DeleteCollection\","
                "reason=\"permission\"} 1\n"));
}

TEST_F(GatekeeperTest, RetireNeedsTheDeleteRightAndIsAuditedAsARetirement) {
  ASSERT_THAT(Floor(Cert("cn:ops"), "old", 40), IsOk());
  EXPECT_THAT(Delete(Cert("dns:reader.test"), "old", /*retire=*/true),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(Max("old"), 40);
  EXPECT_THAT(Delete(Cert("cn:ops"), "old", /*retire=*/true), IsOk());
  EXPECT_EQ(Max("old"), -1);
  const std::string audit = Audit();
  EXPECT_THAT(audit, HasSubstr("\"identity\":\"dns:reader.test\","
                               "\"peer\":\"ipv4:127.0.0.1:5555\",\"method\":"
                               "\"DeleteCollection\",\"collection\":\"old\","
                               "\"request\":{\"retire\":1},"
                               "\"code\":\"PERMISSION_DENIED\""));
  EXPECT_THAT(audit, HasSubstr("\"identity\":\"cn:ops\","
                               "\"peer\":\"ipv4:127.0.0.1:5555\",\"method\":"
                               "\"DeleteCollection\",\"collection\":\"old\","
                               "\"request\":{\"retire\":1},\"code\":\"OK\""));
}

// A flood of refusals writes refusals_per_second lines and one summary;
// the administrative calls in the middle of it are all written.
TEST_F(GatekeeperTest, RefusalFloodIsSummarizedAndAdminCallsAreAllWritten) {
  AuditLogOptions options;
  options.refusals_per_second = 5;
  options.on_suppressed = [this] { metrics_.OnAuditLineSuppressed(); };
  auto audit =
      AuditLog::Open(dir_.File("flood.jsonl"), &clock_, std::move(options));
  ASSERT_THAT(audit, IsOk());
  gate_ = std::make_unique<Gatekeeper>(service_.get(), admin_.get(),
                                       authz_.get(), audit->get(), &metrics_);
  audit_ = *std::move(audit);
  Caller anonymous;
  anonymous.peer = "ipv4:127.0.0.1:7777";
  for (int i = 0; i < 1000; ++i) {
    ASSERT_THAT(Next(anonymous, "orders"),
                StatusIs(absl::StatusCode::kPermissionDenied));
  }
  for (int floor : {100, 200, 300}) {
    ASSERT_THAT(Floor(Cert("cn:ops"), "orders", floor), IsOk());
  }
  for (int i = 0; i < 10; ++i) {
    ASSERT_THAT(
        Next(Cert("uri:spiffe://test/orders"), "orders", 300 + kJump + 1),
        StatusIs(absl::StatusCode::kFailedPrecondition));
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_THAT(Floor(anonymous, "bad\x01name", 7),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
  clock_.Advance(absl::Milliseconds(1500));
  ASSERT_THAT(Next(anonymous, "orders"),
              StatusIs(absl::StatusCode::kPermissionDenied));

  ASSERT_TRUE(audit_->WaitUntilWritten(absl::Seconds(10)));
  const std::vector<std::string> lines = absl::StrSplit(
      ReadFile(dir_.File("flood.jsonl")), '\n', absl::SkipEmpty());
  // The anonymous address's 5, the 3 SetFloor calls, the 5 of
  // uri:spiffe://test/orders (a budget of its own), the summary, and the
  // anonymous line of the next second.
  ASSERT_EQ(lines.size(), 5 + 3 + 5 + 1 + 1);
  for (int i = 0; i < 5; ++i) {
    EXPECT_THAT(lines[i], HasSubstr("\"method\":\"NextRange\",\"collection\":"
                                    "\"orders\",\"request\":{\"last_max\":0,"
                                    "\"last_size\":0},\"code\":"
                                    "\"PERMISSION_DENIED\""));
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(lines[5 + i],
                HasSubstr(absl::StrCat("\"identity\":\"cn:ops\"",
                                       ",\"peer\":"
                                       "\"ipv4:127.0.0.1:5555\",\"method\":"
                                       "\"SetFloor\",\"collection\":\"orders\","
                                       "\"request\":{\"floor\":",
                                       100 * (i + 1), "},\"code\":\"OK\"")));
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_THAT(lines[8 + i],
                HasSubstr("\"identity\":\"uri:spiffe://test/orders\""));
    EXPECT_THAT(lines[8 + i], HasSubstr("\"code\":\"FAILED_PRECONDITION\""));
  }
  EXPECT_EQ(lines[13],
            "{\"time\":\"2027-01-15T08:00:01.500000Z\",\"suppressed\":{"
            "\"count\":1002,\"first\":\"2027-01-15T08:00:00.000000Z\","
            "\"last\":\"2027-01-15T08:00:00.000000Z\","
            "\"by_method\":{\"NextRange\":1000,\"SetFloor\":2},"
            "\"by_code\":{\"FAILED_PRECONDITION\":5,\"INVALID_ARGUMENT\":2,"
            "\"PERMISSION_DENIED\":995},"
            "\"top_callers\":{\"anonymous ipv4:127.0.0.1\":997,"
            "\"uri:spiffe://test/orders\":5},"
            "\"top_collections\":{\"orders\":1000,\"bad\\u0001name\":2}}}");
  EXPECT_THAT(lines[14], HasSubstr("{\"time\":\"2027-01-15T08:00:01.500000Z\","
                                   "\"identity\":\"anonymous\""));
  EXPECT_THAT(lines[14], HasSubstr("\"code\":\"PERMISSION_DENIED\""));
  EXPECT_THAT(Exposition(),
              HasSubstr("\nhilo_audit_lines_suppressed_total 1002\n"));
}

// The attack of issue 24 item 2: anonymous callers flood refusals while
// token:lowpriv tries SetFloor("payments", 2^62) three times. With one
// budget for everybody, 404 lines were written and none named lowpriv or
// payments; now lowpriv's three refusals are written, whatever the flood.
TEST_F(GatekeeperTest, AnonymousFloodCannotHideAnAuthenticatedRefusal) {
  WriteFile(tokens_, absl::StrCat(kTokens, "lowpriv 0123456789abcdefLOWP\n"));
  WriteFile(policy_, absl::StrCat(kPolicy,
                                  "grant { identity: "
                                  "\"token:lowpriv\" collections: "
                                  "\"lowpriv-ids\" }\n"));
  ASSERT_THAT(authz_->Reload(), IsOk());
  auto audit = AuditLog::Open(dir_.File("drown.jsonl"), &clock_);  // defaults
  ASSERT_THAT(audit, IsOk());
  gate_ = std::make_unique<Gatekeeper>(service_.get(), admin_.get(),
                                       authz_.get(), audit->get(), &metrics_);
  audit_ = *std::move(audit);
  const Caller lowpriv = Bearer("0123456789abcdefLOWP");
  for (int i = 0; i < 4000; ++i) {
    Caller anonymous;
    anonymous.peer = absl::StrCat("ipv4:127.0.0.1:", 40000 + i % 4);
    ASSERT_THAT(Next(anonymous, absl::StrCat("junk-", i % 4)),
                StatusIs(absl::StatusCode::kPermissionDenied));
    if (i == 500 || i == 1500 || i == 2500) {
      ASSERT_THAT(Floor(lowpriv, "payments", int64_t{1} << 62),
                  StatusIs(absl::StatusCode::kPermissionDenied));
    }
  }
  clock_.Advance(absl::Seconds(2));
  audit_->Flush();
  const std::vector<std::string> lines = absl::StrSplit(
      ReadFile(dir_.File("drown.jsonl")), '\n', absl::SkipEmpty());
  int lowpriv_lines = 0;
  for (const std::string& line : lines) {
    if (absl::StrContains(line, "\"identity\":\"token:lowpriv\"")) {
      ++lowpriv_lines;
      EXPECT_THAT(line, HasSubstr("\"method\":\"SetFloor\","
                                  "\"collection\":\"payments\","
                                  "\"request\":{\"floor\":"
                                  "4611686018427387904},"
                                  "\"code\":\"PERMISSION_DENIED\""));
    }
  }
  EXPECT_EQ(lowpriv_lines, 3);
  // One address: its 20 lines, then the summary naming it.
  ASSERT_EQ(lines.size(), 20u + 3 + 1);
  EXPECT_THAT(lines.back(), HasSubstr("\"count\":3980,"));
  EXPECT_THAT(lines.back(),
              HasSubstr("\"top_callers\":{\"anonymous ipv4:127.0.0.1\":3980}"));
}

TEST_F(GatekeeperTest, AuditLineEscapesAnyCollectionName) {
  // Quotes, a backslash and non-ASCII are valid in a name; a control
  // character is not, and that SetFloor is audited too.
  EXPECT_THAT(Floor(Cert("cn:ops"), "q\"b\\s\xC3\xA9", 5), IsOk());
  EXPECT_THAT(Floor(Cert("cn:ops"), "c\x01", 5),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(Audit(),
            "{\"time\":\"2027-01-15T08:00:00.000000Z\",\"identity\":\"cn:ops\","
            "\"peer\":\"ipv4:127.0.0.1:5555\",\"method\":\"SetFloor\","
            "\"collection\":\"q\\\"b\\\\s\xC3\xA9\","
            "\"request\":{\"floor\":5},\"code\":\"OK\",\"message\":\"\"}\n"
            "{\"time\":\"2027-01-15T08:00:00.000000Z\",\"identity\":\"cn:ops\","
            "\"peer\":\"ipv4:127.0.0.1:5555\",\"method\":\"SetFloor\","
            "\"collection\":\"c\\u0001\",\"request\":{\"floor\":5},"
            "\"code\":\"INVALID_ARGUMENT\",\"message\":\"collection name has "
            "control character U+0001 at byte 1\"}\n");
}

TEST_F(GatekeeperTest, GuardRailHoldsLastMaxToTheJumpUnlessAdmin) {
  const Caller orders = Cert("uri:spiffe://test/orders");
  hilo::v1::NextRangeResponse r;
  ASSERT_THAT(Next(orders, "orders", 0, &r), IsOk());  // Max 32
  // Just under and at the limit: allowed.
  ASSERT_THAT(Next(orders, "orders", 32 + kJump - 1, &r), IsOk());
  EXPECT_EQ(r.low(), 32 + kJump);
  const int64_t max = r.high();
  ASSERT_THAT(Next(orders, "orders", max + kJump, &r), IsOk());
  EXPECT_EQ(r.low(), max + kJump + 1);
  // Over it: refused, nothing changes.
  const int64_t max2 = r.high();
  absl::Status over = Next(orders, "orders", max2 + kJump + 1);
  EXPECT_THAT(over, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(over.message(),
            absl::StrFormat("collection \"orders\": last_max %d is %d above "
                            "Max %d; a client may move Max at most 1000 above "
                            "it (the server's --max_last_max_jump). If this "
                            "node fell behind, an administrator raises it "
                            "with SetFloor",
                            max2 + kJump + 1, kJump + 1, max2));
  EXPECT_EQ(Max("orders"), max2);
  EXPECT_THAT(Audit(), HasSubstr(absl::StrFormat(
                           "\"method\":\"NextRange\",\"collection\":\"orders\","
                           "\"request\":{\"last_max\":%d,\"last_size\":0},"
                           "\"code\":\"FAILED_PRECONDITION\"",
                           max2 + kJump + 1)));
  EXPECT_THAT(Exposition(),
              HasSubstr("hilo_requests_denied_total{method=\"NextRange\","
                        "reason=\"guard_rail\"} 1\n"));
  // A new collection's Max is 0.
  EXPECT_THAT(Next(orders, "orders/new", kJump + 1),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(Max("orders/new"), -1);
  // An administrator is exempt.
  ASSERT_THAT(Next(Cert("cn:ops"), "orders", max2 + 10 * kJump, &r), IsOk());
  EXPECT_EQ(r.low(), max2 + 10 * kJump + 1);
}

// The unauthenticated metrics port says how close the fullest collection
// is to the end of its ID space, never which collection or its Max (what
// GetCollection needs admin rights for).
TEST_F(GatekeeperTest, MaxShareGaugeHoldsTheHighestMaxWithoutNames) {
  const Caller ops = Cert("cn:ops");
  ASSERT_THAT(Next(ops, "a"), IsOk());
  ASSERT_THAT(Floor(ops, "b", 500), IsOk());
  ASSERT_THAT(Floor(ops, "d", 9000), IsOk());
  ASSERT_THAT(Floor(ops, "c", 80), IsOk());  // lower: the share stays
  const std::string text = Exposition();
  const std::string name = "\nhilo_collection_max_share ";
  const size_t at = text.find(name);
  ASSERT_NE(at, std::string::npos) << text;
  const double share = std::stod(text.substr(at + name.size()));
  EXPECT_DOUBLE_EQ(share, 9000.0 / static_cast<double>(INT64_MAX));
  EXPECT_THAT(text, Not(HasSubstr("hilo_collection_max{")));
  EXPECT_THAT(text, Not(HasSubstr(" 9000\n")));
  EXPECT_THAT(text, Not(HasSubstr(" 500\n")));
}

TEST_F(GatekeeperTest, WithoutPolicyEveryoneIsAllowedAndNobodyExempt) {
  Gatekeeper open(service_.get(), admin_.get(), nullptr, audit_.get(),
                  &metrics_);
  gate_.reset();
  hilo::v1::NextRangeRequest request;
  request.set_collection("users");
  request.set_last_max(kJump + 1);
  hilo::v1::NextRangeResponse response;
  auto call = [&](const Caller& caller) {
    return base::Await<absl::Status>([&](ServiceCallback done) {
      open.NextRange(caller, request, &response, std::move(done));
    });
  };
  EXPECT_THAT(call(Cert("cn:ops")),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  request.set_last_max(kJump);
  EXPECT_THAT(call(Caller{}), IsOk());
  EXPECT_EQ(response.low(), kJump + 1);
}

}  // namespace
}  // namespace hilo
