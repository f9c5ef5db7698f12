// The authorization policy (Authorizer, service/access/authorizer.h) and
// what rests on it, without gRPC: collection patterns, bearer tokens, reload,
// and each identity's creation budget through a Gatekeeper. The Gatekeeper's
// own suite is gatekeeper_test.cc.
#include <memory>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hilo/base/await.h"
#include "prometheus/text_serializer.h"
#include "service/access/authorizer.h"
#include "service/access/collection_limit.h"
#include "service/observe/metrics.h"
#include "service/rpc/admin_service.h"
#include "service/rpc/gatekeeper.h"
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
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::hilo::testing_util::WriteFile;
using ::testing::AllOf;
using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

TEST(CollectionPatternTest, StarMatchesAnyRunOfBytes) {
  EXPECT_TRUE(MatchesCollectionPattern("orders", "orders"));
  EXPECT_FALSE(MatchesCollectionPattern("orders", "orders2"));
  EXPECT_FALSE(MatchesCollectionPattern("orders", "Orders"));
  EXPECT_TRUE(MatchesCollectionPattern("orders/*", "orders/eu"));
  EXPECT_TRUE(MatchesCollectionPattern("orders/*", "orders/"));
  EXPECT_FALSE(MatchesCollectionPattern("orders/*", "orders"));
  EXPECT_TRUE(MatchesCollectionPattern("*-ids", "user-ids"));
  EXPECT_FALSE(MatchesCollectionPattern("*-ids", "user-ids2"));
  EXPECT_TRUE(MatchesCollectionPattern("a*b*c", "a-b-b-c"));
  EXPECT_FALSE(MatchesCollectionPattern("a*b*c", "a-c-b"));
  EXPECT_TRUE(MatchesCollectionPattern("*", ""));
  EXPECT_TRUE(MatchesCollectionPattern("\xC3\xA9*", "\xC3\xA9t\xC3\xA9"));
}

class AuthorizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(policy_, kPolicy);
    WriteFile(tokens_, kTokens);
    absl::StatusOr<std::unique_ptr<Authorizer>> authz =
        Authorizer::Load(policy_, tokens_);
    ASSERT_THAT(authz, IsOk());
    authz_ = *std::move(authz);
  }

  absl::Status Check(const Caller& caller, Method method,
                     absl::string_view collection) {
    return authz_->Check(caller, method, collection).status;
  }

  TempDir dir_;
  std::string policy_ = dir_.File("policy.textproto");
  std::string tokens_ = dir_.File("tokens");
  std::unique_ptr<Authorizer> authz_;
};

TEST_F(AuthorizerTest, CollectionsAreGrantedExactlyAndByPattern) {
  const Caller orders = Cert("uri:spiffe://test/orders");
  EXPECT_THAT(Check(orders, Method::kNextRange, "orders"), IsOk());
  EXPECT_THAT(Check(orders, Method::kReturnRange, "orders/eu"), IsOk());
  absl::Status denied = Check(orders, Method::kNextRange, "users");
  EXPECT_THAT(
      denied,
      StatusIs(absl::StatusCode::kPermissionDenied,
               "uri:spiffe://test/orders may not call NextRange on collection "
               "\"users\""));
  EXPECT_THAT(Check(orders, Method::kNextRange, "orders2"),
              StatusIs(absl::StatusCode::kPermissionDenied));
}

TEST_F(AuthorizerTest, AdminIsDeniedToAnIdOnlyIdentity) {
  const Caller orders = Cert("uri:spiffe://test/orders");
  for (Method m : {Method::kGetCollection, Method::kSetFloor}) {
    EXPECT_THAT(Check(orders, m, "orders"),
                StatusIs(absl::StatusCode::kPermissionDenied));
  }
  EXPECT_EQ(Check(orders, Method::kListCollections, "").message(),
            "uri:spiffe://test/orders may not call ListCollections");
  EXPECT_FALSE(
      authz_->Check(orders, Method::kNextRange, "orders").may_administer);
}

TEST_F(AuthorizerTest, ReadOnlyAdminReadsButMayNotSetFloor) {
  const Caller reader = Cert("dns:reader.test");
  EXPECT_THAT(Check(reader, Method::kGetCollection, "orders"), IsOk());
  EXPECT_THAT(Check(reader, Method::kListCollections, ""), IsOk());
  EXPECT_EQ(Check(reader, Method::kSetFloor, "orders").message(),
            "dns:reader.test may not call SetFloor on collection \"orders\"");
  EXPECT_THAT(Check(reader, Method::kNextRange, "orders"),
              StatusIs(absl::StatusCode::kPermissionDenied));
}

TEST_F(AuthorizerTest, DeleteCollectionNeedsTheSetFloorRight) {
  EXPECT_EQ(Check(Cert("dns:reader.test"), Method::kDeleteCollection, "orders")
                .message(),
            "dns:reader.test may not call DeleteCollection on collection "
            "\"orders\"");
  EXPECT_THAT(Check(Cert("uri:spiffe://test/orders"), Method::kDeleteCollection,
                    "orders"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(Check(Cert("cn:ops"), Method::kDeleteCollection, "orders"),
              IsOk());
}

TEST_F(AuthorizerTest, SetFloorAdminMayAdministerAndUseEveryCollection) {
  Decision d = authz_->Check(Cert("cn:ops"), Method::kSetFloor, "x");
  EXPECT_THAT(d.status, IsOk());
  EXPECT_TRUE(d.may_administer);
  EXPECT_THAT(Check(Cert("cn:ops"), Method::kNextRange, "anything"), IsOk());
}

TEST_F(AuthorizerTest, BearerTokenIsTheIdentityItsLineNames) {
  Decision right = authz_->Check(Bearer("fedcba9876543210fedc"),
                                 Method::kNextRange, "a-ids");
  EXPECT_THAT(right.status, IsOk());
  EXPECT_EQ(right.identity, "token:billing");
  EXPECT_EQ(Check(Bearer("fedcba9876543210fedc"), Method::kNextRange, "orders")
                .message(),
            "token:billing may not call NextRange on collection \"orders\"");

  absl::Status wrong =
      Check(Bearer("fedcba9876543210fedd"), Method::kNextRange, "a-ids");
  EXPECT_THAT(
      wrong, StatusIs(absl::StatusCode::kUnauthenticated,
                      "anonymous sent a bearer token this server does not know "
                      "(calling NextRange)"));
  EXPECT_THAT(std::string(wrong.message()),
              ::testing::Not(HasSubstr("fedcba")));
  // A prefix of a token is not the token.
  EXPECT_THAT(Check(Bearer("fedcba9876543210fed"), Method::kNextRange, "a-ids"),
              StatusIs(absl::StatusCode::kUnauthenticated));

  Caller none;
  EXPECT_EQ(Check(none, Method::kNextRange, "a-ids").message(),
            "anonymous may not call NextRange on collection \"a-ids\"");
}

TEST_F(AuthorizerTest, ReloadRevokesAndABadFileKeepsTheOldPolicy) {
  const Caller orders = Cert("uri:spiffe://test/orders");
  ASSERT_THAT(Check(orders, Method::kNextRange, "orders"), IsOk());
  EXPECT_EQ(authz_->generation(), 1);

  WriteFile(policy_,
            "grant { identity: \"uri:spiffe://test/orders\"\n"
            "  colections: \"orders\" }\n");
  absl::Status bad = authz_->Reload();
  EXPECT_THAT(
      bad, StatusIs(absl::StatusCode::kInvalidArgument,
                    absl::StrCat("authz policy ", policy_,
                                 " line 2 column 13: Message type "
                                 "\"hilo.internal.Grant\" has no field named "
                                 "\"colections\".")));
  EXPECT_THAT(Check(orders, Method::kNextRange, "orders"), IsOk());
  EXPECT_EQ(authz_->generation(), 1);

  WriteFile(policy_, "grant { identity: \"orders\" collections: \"*\" }\n");
  EXPECT_EQ(authz_->Reload().message(),
            absl::StrCat("authz policy ", policy_,
                         " grant 1: identity \"orders\" needs a kind: uri:, "
                         "dns:, cn:, token: or the word anonymous"));

  WriteFile(tokens_, "billing short\n");
  WriteFile(policy_, "grant { identity: \"cn:ops\" }\n");
  EXPECT_EQ(authz_->Reload().message(),
            absl::StrCat("authz token file ", tokens_,
                         " line 1: the token is shorter than 16 bytes; use a "
                         "random one (openssl rand -hex 32)"));
  EXPECT_THAT(Check(orders, Method::kNextRange, "orders"), IsOk());

  WriteFile(tokens_, kTokens);
  ASSERT_THAT(authz_->Reload(), IsOk());
  EXPECT_EQ(authz_->generation(), 2);
  EXPECT_EQ(Check(orders, Method::kNextRange, "orders").message(),
            "uri:spiffe://test/orders may not call NextRange on collection "
            "\"orders\"");
  // Unchanged files change nothing.
  ASSERT_THAT(authz_->Reload(), IsOk());
  EXPECT_EQ(authz_->generation(), 2);
}

// A token longer than kMaxBearerTokenBytes is unknown without being hashed
// or compared; a token file may not hold one.
TEST_F(AuthorizerTest, OverlongTokenIsUnknownUnread) {
  const int64_t before = authz_->token_digest_comparisons();
  const std::string overlong(kMaxBearerTokenBytes + 1, 'f');
  EXPECT_THAT(Check(Bearer(overlong), Method::kNextRange, "a-ids"),
              StatusIs(absl::StatusCode::kUnauthenticated,
                       "anonymous sent a bearer token this server does not "
                       "know (calling NextRange)"));
  EXPECT_EQ(authz_->token_digest_comparisons(), before);
  EXPECT_THAT(Check(Bearer(std::string(kMaxBearerTokenBytes, 'f')),
                    Method::kNextRange, "a-ids"),
              StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_EQ(authz_->token_digest_comparisons(), before + 2);

  WriteFile(tokens_, absl::StrCat("long ", overlong, "\n"));
  EXPECT_THAT(authz_->Reload(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat("authz token file ", tokens_,
                                    " line 1: the token is 513 bytes; the "
                                    "limit is 512")));
  WriteFile(tokens_, absl::StrCat("long ", overlong.substr(1), "\n"));
  ASSERT_THAT(authz_->Reload(), IsOk());
  EXPECT_EQ(authz_->Check(Bearer(overlong.substr(1)), Method::kNextRange, "x")
                .identity,
            "token:long");
}

// An empty policy file parses to no grant, which refuses everyone: a
// truncated write must not lock every client out, so such a policy is
// refused (at start and on reload, the old one staying) unless it says
// deny_all: true.
TEST_F(AuthorizerTest, PolicyWithoutGrantsIsRefusedUnlessItSaysDenyAll) {
  const Caller orders = Cert("uri:spiffe://test/orders");
  const std::string refusal = absl::StrCat(
      "authz policy ", policy_,
      " grants nothing: an empty or truncated file would refuse every "
      "caller; to refuse every caller on purpose, write \"deny_all: true\"");
  for (const char* text : {"", "\n", "# grant { identity: \"cn:ops\" }\n"}) {
    SCOPED_TRACE(absl::StrCat("policy \"", absl::CEscape(text), "\""));
    WriteFile(policy_, text);
    EXPECT_THAT(authz_->Reload(),
                StatusIs(absl::StatusCode::kInvalidArgument, refusal));
    EXPECT_THAT(Check(orders, Method::kNextRange, "orders"), IsOk());
    EXPECT_EQ(authz_->generation(), 1);
    EXPECT_THAT(Authorizer::Load(policy_, tokens_),
                StatusIs(absl::StatusCode::kInvalidArgument, refusal));
  }

  WriteFile(policy_, "deny_all: true\n");
  ASSERT_THAT(authz_->Reload(), IsOk());
  EXPECT_EQ(authz_->generation(), 2);
  EXPECT_THAT(Check(orders, Method::kNextRange, "orders"),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(Check(Cert("cn:ops"), Method::kSetFloor, "orders"),
              StatusIs(absl::StatusCode::kPermissionDenied));

  WriteFile(policy_,
            "deny_all: true\n"
            "grant { identity: \"cn:ops\" collections: \"*\" }\n");
  EXPECT_THAT(authz_->Reload(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat("authz policy ", policy_,
                                    " says deny_all: true: yet has 1 grants; "
                                    "remove one or the other")));
  EXPECT_EQ(authz_->generation(), 2);
}

// A token file deleted while the server runs revokes every token (a token
// revoked by deleting its file must not stay valid); certificates keep
// their rights, and the tokens are back with the file. At start a missing
// file is refused: it is a mistake in the flags.
TEST_F(AuthorizerTest, TokenFileDeletedOnReloadRevokesEveryToken) {
  const Caller ops = Bearer("0123456789abcdef0123");
  ASSERT_THAT(Check(ops, Method::kSetFloor, "orders"), IsOk());
  ASSERT_EQ(std::remove(tokens_.c_str()), 0);
  ASSERT_THAT(authz_->Reload(), IsOk());
  EXPECT_EQ(authz_->generation(), 2);
  EXPECT_TRUE(authz_->tokens_file_missing());
  EXPECT_THAT(Check(ops, Method::kSetFloor, "orders"),
              StatusIs(absl::StatusCode::kUnauthenticated,
                       "anonymous sent a bearer token this server does not "
                       "know (calling SetFloor)"));
  EXPECT_THAT(Check(Cert("cn:ops"), Method::kSetFloor, "orders"), IsOk());
  // Still gone: nothing changes.
  ASSERT_THAT(authz_->Reload(), IsOk());
  EXPECT_EQ(authz_->generation(), 2);

  EXPECT_THAT(
      Authorizer::Load(policy_, tokens_),
      StatusIs(absl::StatusCode::kInvalidArgument,
               absl::StrCat("authz token file ", tokens_,
                            " cannot be read: No such file or directory")));

  WriteFile(tokens_, kTokens);
  ASSERT_THAT(authz_->Reload(), IsOk());
  EXPECT_EQ(authz_->generation(), 3);
  EXPECT_FALSE(authz_->tokens_file_missing());
  EXPECT_THAT(Check(ops, Method::kSetFloor, "orders"), IsOk());
}

TEST(AuthorizerLoadTest, MissingFileIsNamed) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Authorizer>> authz =
      Authorizer::Load(dir.File("none"), "");
  EXPECT_THAT(
      authz,
      StatusIs(absl::StatusCode::kInvalidArgument,
               absl::StrCat("authz policy ", dir.File("none"),
                            " cannot be read: No such file or directory")));
}

// Issue 36 item 3: each identity's new collections count against a budget
// of its own (its grant's collection_creations_per_minute, 60 unset), inside
// the node's. A caller allowed "app*" that uses up its budget leaves the
// node's to a caller allowed "shop*"; its existing collections keep working;
// the refusal names the identity, its limit and when to retry; a minute
// later it may create again.
TEST(CreationBudgetTest, EachIdentityCreatesWithinABudgetOfItsOwn) {
  TempDir dir;
  WriteFile(dir.File("policy"), R"pb(
    grant {
      identity: "cn:app"
      collections: "app*"
      collection_creations_per_minute: 3
    }
    grant { identity: "cn:shop" collections: "shop*" }
    grant {
      identity: "cn:shop"
      collections: "shop-big*"
      collection_creations_per_minute: 5
    }
  )pb");
  auto authz = Authorizer::Load(dir.File("policy"), "");
  ASSERT_THAT(authz, IsOk());
  EXPECT_EQ((*authz)
                ->Check(Cert("cn:shop"), Method::kNextRange, "shop-1")
                .creation_quota.per_minute,
            kDefaultCreationsPerIdentityPerMinute);
  EXPECT_EQ((*authz)
                ->Check(Cert("cn:shop"), Method::kNextRange, "shop-big")
                .creation_quota.per_minute,
            kDefaultCreationsPerIdentityPerMinute);  // the larger of the two
  ManualClock clock(kStart);
  SqliteRangeStoreOptions options;
  options.path = dir.File("h.db");
  auto store = SqliteRangeStore::Open(options);
  ASSERT_THAT(store, IsOk());
  CollectionLimit limit(/*max=*/0, 0, /*max_creations_per_minute=*/10, &clock);
  Metrics metrics{MetricsOptions{"A", "test", 2}};
  HiLoService service(store->get(), RangeSizePolicy({}), "A", &clock, &metrics,
                      false, &limit);
  AdminService admin(store->get(), "A");
  Gatekeeper gate(&service, &admin, authz->get(), nullptr, &metrics);
  auto next = [&](const Caller& caller, const std::string& collection) {
    hilo::v1::NextRangeRequest request;
    request.set_collection(collection);
    hilo::v1::NextRangeResponse response;
    return base::Await<absl::Status>([&](ServiceCallback done) {
      gate.NextRange(caller, request, &response, std::move(done));
    });
  };
  const Caller app = Cert("cn:app");
  const Caller shop = Cert("cn:shop");
  for (int i = 0; i < 3; ++i) {
    ASSERT_THAT(next(app, absl::StrCat("app-", i)), IsOk());
  }
  clock.Advance(absl::Seconds(20));
  const absl::Status refused = next(app, "app-3");
  EXPECT_THAT(refused,
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("collection \"app-3\" would be new, "
                                       "and cn:app already created its limit "
                                       "of 3 collections in the last minute"),
                             HasSubstr("collection_creations_per_minute"),
                             HasSubstr("retry in 40s"))));
  EXPECT_EQ(CollectionRefusalReason(refused), kRefusedForIdentityRate);
  EXPECT_THAT(next(app, "app-0"), IsOk());
  // The node's budget left (10 - 3) is the shop's.
  for (int i = 0; i < 7; ++i) {
    ASSERT_THAT(next(shop, absl::StrCat("shop-", i)), IsOk()) << i;
  }
  EXPECT_THAT(next(shop, "shop-7"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("--max_collection_creations_per_minute")));
  EXPECT_EQ(limit.identities_tracked(), 2);
  clock.Advance(absl::Seconds(40));
  EXPECT_THAT(next(app, "app-3"), IsOk());
  EXPECT_FALSE((*store)->Get("app-4")->has_value());
  EXPECT_EQ((*store)->collection_count(), 3 + 7 + 1);
  EXPECT_THAT(
      prometheus::TextSerializer().Serialize(metrics.registry()->Collect()),
      HasSubstr("reason=\"identity_rate\"} 1"));
}

}  // namespace
}  // namespace hilo
