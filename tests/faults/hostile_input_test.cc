// Malformed and hostile requests over real gRPC against an in-process server:
// each gets its exact status code, and no stored row changes unless the
// request was valid (then exactly as the contract says). Also returns that
// must never apply (without a token, with a guessed, stale or duplicated
// one, under a floor), and a flood of distinct collection names, which must
// not blow up the metrics' labels.
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"
#include "hilo/v1/conversions.h"
#include "hilo/v1/hilo.grpc.pb.h"
#include "service/store/range_token.h"
#include "service/store/validation.h"
#include "stress/raw_call.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;
using ::testing::HasSubstr;
using Pair = std::pair<int64_t, int64_t>;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxRangeSize = 1 << 20;  // the server's default
const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

// Bytes that are not UTF-8, or not a name, spelled out.
std::string Bytes(const char* bytes, size_t n) { return {bytes, n}; }

// Protobuf wire format, for requests no generated class can send.
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string VarintField(int field, uint64_t v) {
  return Varint(uint64_t(field) << 3 | 0) + Varint(v);
}
std::string BytesField(int field, const std::string& bytes) {
  return Varint(uint64_t(field) << 3 | 2) + Varint(bytes.size()) + bytes;
}
std::string Fixed64Field(int field, uint64_t v) {
  std::string out = Varint(uint64_t(field) << 3 | 1);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
  return out;
}

google::protobuf::Timestamp Ts(int64_t seconds, int32_t nanos = 0) {
  google::protobuf::Timestamp ts;
  ts.set_seconds(seconds);
  ts.set_nanos(nanos);
  return ts;
}

// What a call got back, as far as the checks need it.
struct Outcome {
  grpc::Status status;
  std::optional<Pair> range;  // an OK NextRange
  // An OK ReturnRange or SetFloor: (applied or raised, max).
  std::optional<std::pair<bool, int64_t>> ret;
  uint64_t token = 0;  // range_token of an OK NextRange
};

// A collection's row as GetCollection shows it.
struct Row {
  int64_t max = 0;
  int64_t return_floor = 0;
  absl::Time updated_at;

  friend bool operator==(const Row& a, const Row& b) {
    return a.max == b.max && a.return_floor == b.return_floor &&
           a.updated_at == b.updated_at;
  }
};

void PrintTo(const Row& r, std::ostream* os) {
  *os << "{max " << r.max << ", return_floor " << r.return_floor
      << ", updated_at " << absl::FormatTime(r.updated_at) << "}";
}

// A token no range of these tests was given.
constexpr uint64_t kEdgeToken = 0x5EED5EED5EED5EEDull;

class HostileInputTest;

// One request and what must come of it. Before it runs, "orders" has had
// 1-32 issued (its token is HostileInputTest::token_), and the clock has
// moved on a second since.
struct HostileCase {
  std::string name;
  std::function<Outcome(HostileInputTest*)> call;
  grpc::StatusCode code;
  // For a valid NextRange on "orders": the exact range, which must then be
  // the row of "orders". Unset: every row stays exactly as it was.
  std::optional<Pair> range = std::nullopt;
  // For a ReturnRange or SetFloor answered OK: (applied or raised, max).
  // When true, "orders" must then hold that Max as its max and return
  // floor, and no live token.
  std::optional<std::pair<bool, int64_t>> ret = std::nullopt;
  // Runs before the rows are taken as "before" (e.g. a row near INT64_MAX).
  std::function<void(HostileInputTest*)> setup = nullptr;
  // For a SetFloor at or below Max: the return floor "orders" must then
  // have, all else of it unchanged but updated_at.
  std::optional<int64_t> return_floor = std::nullopt;
};

void PrintTo(const HostileCase& c, std::ostream* os) { *os << c.name; }

class HostileInputTest : public ::testing::Test {
 public:
  void SetUp() override {
    ServerOptions options = testing_util::TestServerOptions(dir_, "A");
    options.clock = &clock_;
    options.allow_returns_without_token = AllowReturnsWithoutToken();
    // The floods here create thousands of names on a clock that stands
    // still; the creation rate has tests of its own.
    options.max_collection_creations_per_minute = 0;
    // Only where needed: stopping the metrics endpoint takes seconds.
    if (ServeMetrics()) options.metrics_listen = "127.0.0.1:0";
    server_ = testing_util::StartServer(options);
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(testing_util::Address(server_->port()),
                                   grpc::InsecureChannelCredentials());
    hilo_ = hilo::v1::HiLo::NewStub(channel_);
    admin_ = hilo::v1::HiLoAdmin::NewStub(channel_);
  }

  virtual bool ServeMetrics() const { return false; }
  virtual bool AllowReturnsWithoutToken() const { return false; }

  static std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(20));
    return context;
  }

  Outcome Next(const hilo::v1::NextRangeRequest& request) {
    hilo::v1::NextRangeResponse response;
    Outcome out;
    out.status = hilo_->NextRange(Context().get(), request, &response);
    if (out.status.ok()) {
      out.range = Pair(response.low(), response.high());
      out.token = response.range_token();
      EXPECT_EQ(response.node_tag(), "A");
      EXPECT_NE(response.range_token(), 0u);
    }
    return out;
  }
  Outcome Next(const std::string& collection, int64_t last_size = 0,
               int64_t last_max = 0) {
    hilo::v1::NextRangeRequest request;
    request.set_collection(collection);
    request.set_last_size(last_size);
    request.set_last_max(last_max);
    return Next(request);
  }

  // A ReturnRange with `token` as its range_token (0: none).
  Outcome Return(const std::string& collection, int64_t end, int64_t last,
                 uint64_t token, const std::string& tag = "") {
    hilo::v1::ReturnRangeRequest request;
    request.set_collection(collection);
    request.set_end(end);
    request.set_last(last);
    request.set_node_tag(tag);
    request.set_range_token(token);
    hilo::v1::ReturnRangeResponse response;
    Outcome out;
    out.status = hilo_->ReturnRange(Context().get(), request, &response);
    if (out.status.ok()) out.ret = {response.applied(), response.max()};
    return out;
  }

  // `bytes` sent as the request of `method`, whatever they encode.
  Outcome Raw(const std::string& method, const std::string& bytes) {
    std::string reply;
    Outcome out;
    out.status = stress::RawUnaryCall(channel_, method, bytes, &reply,
                                      absl::Seconds(20));
    if (out.status.ok() && method == "/hilo.v1.HiLo/NextRange") {
      hilo::v1::NextRangeResponse response;
      EXPECT_TRUE(response.ParseFromString(reply));
      out.range = Pair(response.low(), response.high());
      out.token = response.range_token();
    }
    if (out.status.ok() && method == "/hilo.v1.HiLo/ReturnRange") {
      hilo::v1::ReturnRangeResponse response;
      EXPECT_TRUE(response.ParseFromString(reply));
      out.ret = {response.applied(), response.max()};
    }
    return out;
  }

  Outcome Get(const std::string& collection) {
    hilo::v1::GetCollectionRequest request;
    request.set_collection(collection);
    hilo::v1::GetCollectionResponse response;
    return Outcome{admin_->GetCollection(Context().get(), request, &response),
                   std::nullopt, std::nullopt};
  }
  Outcome List(int32_t page_size, const std::string& token = "") {
    hilo::v1::ListCollectionsRequest request;
    request.set_page_size(page_size);
    request.set_page_token(token);
    hilo::v1::ListCollectionsResponse response;
    return Outcome{admin_->ListCollections(Context().get(), request, &response),
                   std::nullopt, std::nullopt};
  }
  Outcome Floor(const std::string& collection, int64_t floor) {
    hilo::v1::SetFloorRequest request;
    request.set_collection(collection);
    request.set_floor(floor);
    hilo::v1::SetFloorResponse response;
    Outcome out;
    out.status = admin_->SetFloor(Context().get(), request, &response);
    if (out.status.ok()) out.ret = {response.raised(), response.max()};
    return out;
  }

  // The row of `collection` through GetCollection; nullopt if NOT_FOUND.
  std::optional<Row> GetRow(const std::string& collection) {
    hilo::v1::GetCollectionRequest request;
    request.set_collection(collection);
    hilo::v1::GetCollectionResponse response;
    const grpc::Status status =
        admin_->GetCollection(Context().get(), request, &response);
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) return std::nullopt;
    EXPECT_THAT(status, IsOk());
    const hilo::v1::Collection& c = response.collection();
    EXPECT_EQ(c.name(), collection);
    return Row{c.max(), c.return_floor(),
               FromProtoTimeUnchecked(c.updated_at())};
  }

  // What the store keeps of the token of the range last issued: its
  // RangeTokenDigest (0: retired).
  uint64_t StoredToken(const std::string& collection) {
    absl::StatusOr<std::optional<CollectionState>> row =
        server_->store()->Get(collection);
    EXPECT_THAT(row, IsOk());
    return row.ok() && row->has_value() ? (*row)->range_token : 0;
  }

  // Every stored row, read straight from the store.
  std::vector<NamedCollectionState> Rows() {
    absl::StatusOr<std::vector<NamedCollectionState>> rows =
        server_->store()->List("", 100'000);
    EXPECT_THAT(rows, IsOk());
    return rows.ok() ? *rows : std::vector<NamedCollectionState>{};
  }

  TempDir dir_;
  ManualClock clock_{kStart};
  uint64_t token_ = 0;        // the table's: of "orders" 1-32
  uint64_t other_token_ = 0;  // set by a case's setup
  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<hilo::v1::HiLo::Stub> hilo_;
  std::unique_ptr<hilo::v1::HiLoAdmin::Stub> admin_;
};

class HostileInputTableTest
    : public HostileInputTest,
      public ::testing::WithParamInterface<HostileCase> {};

TEST_P(HostileInputTableTest, ExactCodeAndOnlyTheContractsChange) {
  const HostileCase& c = GetParam();
  const Outcome first = Next("orders");
  ASSERT_EQ(first.range, Pair(1, 32));
  token_ = first.token;
  if (c.setup) c.setup(this);
  const std::vector<NamedCollectionState> before = Rows();
  clock_.Advance(absl::Seconds(1));

  const Outcome out = c.call(this);
  EXPECT_THAT(out.status, StatusIs(static_cast<absl::StatusCode>(c.code)));
  if (c.range.has_value()) {
    EXPECT_EQ(out.range, c.range);
  } else {
    EXPECT_EQ(out.range, std::nullopt);
  }
  if (c.ret.has_value()) {
    EXPECT_EQ(out.ret, c.ret);
  } else {
    EXPECT_EQ(out.ret, std::nullopt);
  }

  const std::vector<NamedCollectionState> after = Rows();
  ASSERT_EQ(after.size(), before.size()) << "a row was created or removed";
  for (size_t i = 0; i < after.size(); ++i) {
    SCOPED_TRACE(after[i].name);
    EXPECT_EQ(after[i].name, before[i].name);
    const CollectionState& was = before[i].state;
    const CollectionState& is = after[i].state;
    if (c.range.has_value() && after[i].name == "orders") {
      EXPECT_EQ(is.max, c.range->second);
      EXPECT_EQ(is.return_floor, c.range->first - 1);
      EXPECT_EQ(is.range_token, RangeTokenDigest(out.token));
      // Right above the last range: that one is the previous range now.
      const bool adjacent = c.range->first == was.max + 1;
      EXPECT_EQ(is.previous_token, adjacent ? was.range_token : 0u);
      EXPECT_EQ(is.previous_return_floor, adjacent ? was.return_floor : 0);
      EXPECT_EQ(is.updated_at, clock_.Now());
      continue;
    }
    if (c.return_floor.has_value() && after[i].name == "orders") {
      EXPECT_EQ(is.max, was.max);
      EXPECT_EQ(is.return_floor, *c.return_floor);
      EXPECT_EQ(is.range_token, was.range_token);
      EXPECT_EQ(is.previous_token, was.previous_token);
      EXPECT_EQ(is.updated_at, clock_.Now());
      continue;
    }
    if (c.ret.has_value() && c.ret->first && after[i].name == "orders") {
      EXPECT_EQ(is.max, c.ret->second);
      EXPECT_EQ(is.return_floor, c.ret->second);
      EXPECT_EQ(is.range_token, 0u)
          << "an applied return and a raised floor retire the token";
      EXPECT_EQ(is.updated_at, clock_.Now());
      continue;
    }
    EXPECT_EQ(is.max, was.max);
    EXPECT_EQ(is.return_floor, was.return_floor);
    EXPECT_EQ(is.range_token, was.range_token);
    EXPECT_EQ(is.previous_token, was.previous_token);
    EXPECT_EQ(is.previous_return_floor, was.previous_return_floor);
    EXPECT_EQ(is.updated_at, was.updated_at);
  }
  // The same through the admin API.
  const std::optional<Row> orders = GetRow("orders");
  ASSERT_TRUE(orders.has_value());
  for (const NamedCollectionState& row : after) {
    if (row.name != "orders") continue;
    EXPECT_EQ(*orders, (Row{row.state.max, row.state.return_floor,
                            row.state.updated_at}));
  }
}

const std::string k257 = std::string(257, 'o');
// 256 characters but 257 bytes (é is two): over the limit, which counts
// bytes.
const std::string k257EndingInTwoBytes =
    absl::StrCat(std::string(255, 'o'), "\xC3\xA9");
const std::string kOversized = std::string(70 * 1024, 'o');
const std::string kNext = "/hilo.v1.HiLo/NextRange";
const std::string kReturn = "/hilo.v1.HiLo/ReturnRange";

// A row whose Max is 10 below INT64_MAX, its last range of 32 outstanding
// with kEdgeToken.
void PutEdge(HostileInputTest* t) {
  ASSERT_THAT(
      t->server_->store()->PutForTesting(
          "edge", CollectionState{.max = kInt64Max - 10,
                                  .return_floor = kInt64Max - 42,
                                  .range_token = RangeTokenDigest(kEdgeToken),
                                  .updated_at = kStart}),
      IsOk());
}

// "orders" with Max 100 below the last_max guard rail (2^62), within the
// jump a last_max may make.
void PutOrdersJustBelowTheGuardRail(HostileInputTest* t) {
  ASSERT_THAT(t->server_->store()->PutForTesting(
                  "orders", CollectionState{.max = kMaxFloor - 100,
                                            .return_floor = 0,
                                            .updated_at = kStart}),
              IsOk());
}

// Another collection's range, whose token is then other_token_.
void NextOther(HostileInputTest* t) {
  const Outcome other = t->Next("other");
  ASSERT_EQ(other.range, Pair(1, 32));
  t->other_token_ = other.token;
}

using C = grpc::StatusCode;
using T = HostileInputTest;

INSTANTIATE_TEST_SUITE_P(
    Table, HostileInputTableTest,
    ::testing::Values(
        // ---- names
        HostileCase{"NextEmptyName", [](T* t) { return t->Next(""); },
                    C::INVALID_ARGUMENT},
        HostileCase{"Next257ByteName", [](T* t) { return t->Next(k257); },
                    C::INVALID_ARGUMENT},
        HostileCase{
            "Next257BytesEndingInTwoByteCharacter",
            [](T* t) { return t->Next(k257EndingInTwoBytes); },
            C::INVALID_ARGUMENT},
        HostileCase{"NextInvalidUtf8",
                    [](T* t) { return t->Next(Bytes("ord\xFF", 4)); },
                    C::UNIMPLEMENTED},
        HostileCase{"NextOverlongUtf8Nul",
                    [](T* t) { return t->Next(Bytes("\xC0\x80", 2)); },
                    C::UNIMPLEMENTED},
        HostileCase{"NextTruncatedUtf8",
                    [](T* t) { return t->Next(Bytes("orders\xE2\x82", 8)); },
                    C::UNIMPLEMENTED},
        HostileCase{"NextNulByte",
                    [](T* t) { return t->Next(Bytes("ord\0ers", 7)); },
                    C::INVALID_ARGUMENT},
        HostileCase{"NextNewline", [](T* t) { return t->Next("orders\n"); },
                    C::INVALID_ARGUMENT},
        HostileCase{"NextTab", [](T* t) { return t->Next("or\tders"); },
                    C::INVALID_ARGUMENT},
        HostileCase{"NextEscapeSequence",
                    [](T* t) { return t->Next("\x1b[2Jorders"); },
                    C::INVALID_ARGUMENT},
        HostileCase{"NextDelete", [](T* t) { return t->Next("orders\x7f"); },
                    C::INVALID_ARGUMENT},
        HostileCase{"NextC1Control",
                    [](T* t) { return t->Next("orders\xC2\x85"); },
                    C::INVALID_ARGUMENT},
        // ---- numbers
        HostileCase{"NextNegativeLastSize",
                    [](T* t) { return t->Next("orders", -1); },
                    C::INVALID_ARGUMENT},
        HostileCase{"NextInt64MinLastSize",
                    [](T* t) { return t->Next("orders", kInt64Min); },
                    C::INVALID_ARGUMENT},
        HostileCase{"NextNegativeLastMax",
                    [](T* t) { return t->Next("orders", 0, -5); },
                    C::INVALID_ARGUMENT},
        HostileCase{"NextInt64MinLastMax",
                    [](T* t) { return t->Next("orders", 32, kInt64Min); },
                    C::INVALID_ARGUMENT},
        HostileCase{"NextZeroLastSizeIsValid",
                    [](T* t) { return t->Next("orders", 0); }, C::OK,
                    Pair(33, 64)},
        HostileCase{"NextInt64MaxLastSizeIsClamped",
                    [](T* t) { return t->Next("orders", kInt64Max); }, C::OK,
                    Pair(33, 32 + kMaxRangeSize)},
        // The guard rail (kMaxFloor = 2^62): a last_max that would move Max
        // to the end of the int64 space, burning the collection for every
        // other client, is refused and changes nothing.
        HostileCase{"NextLastMaxNearInt64Max",
                    [](T* t) { return t->Next("orders", 0, kInt64Max - 5); },
                    C::INVALID_ARGUMENT},
        HostileCase{"NextLastMaxInt64Max",
                    [](T* t) { return t->Next("orders", 0, kInt64Max); },
                    C::INVALID_ARGUMENT},
        HostileCase{"NextLastMaxTwoPow63Minus40",
                    [](T* t) { return t->Next("orders", 0, kInt64Max - 39); },
                    C::INVALID_ARGUMENT},
        HostileCase{"NextLastMaxJustAboveTheGuardRail",
                    [](T* t) { return t->Next("orders", 0, kMaxFloor + 1); },
                    C::INVALID_ARGUMENT},
        HostileCase{"NextLastMaxAtTheGuardRailIsServed",
                    [](T* t) { return t->Next("orders", 0, kMaxFloor); }, C::OK,
                    Pair(kMaxFloor + 1, kMaxFloor + 32), std::nullopt,
                    PutOrdersJustBelowTheGuardRail},
        // A last_max may lift Max by --max_last_max_jump at most (2^32 by
        // default), so one request cannot burn the space up to 2^62 either.
        HostileCase{"NextLastMaxAtTheJumpIsServed",
                    [](T* t) {
                      return t->Next("orders", 0, 32 + kDefaultMaxLastMaxJump);
                    },
                    C::OK,
                    Pair(kDefaultMaxLastMaxJump + 33,
                         kDefaultMaxLastMaxJump + 64)},
        HostileCase{"NextLastMaxBeyondTheJumpIsRefused",
                    [](T* t) {
                      return t->Next("orders", 0,
                                     32 + kDefaultMaxLastMaxJump + 1);
                    },
                    C::FAILED_PRECONDITION},
        HostileCase{
            "NextHugeLastSizeAndLastMaxNearInt64Max",
            [](T* t) { return t->Next("orders", kInt64Max, kInt64Max - 100); },
            C::INVALID_ARGUMENT},
        HostileCase{"NextAtMaxTenBelowInt64Max",
                    [](T* t) { return t->Next("edge"); }, C::OUT_OF_RANGE,
                    std::nullopt, std::nullopt, PutEdge},
        // ---- timestamps
        HostileCase{"NextFutureLastRangeAtDoubles",
                    [](T* t) {
                      hilo::v1::NextRangeRequest r;
                      r.set_collection("orders");
                      r.set_last_size(32);
                      *r.mutable_last_range_at() = Ts(253402300799);  // 9999
                      return t->Next(r);
                    },
                    C::OK, Pair(33, 96)},
        HostileCase{"NextTimestampSecondsBeyondYear9999",
                    [](T* t) {
                      hilo::v1::NextRangeRequest r;
                      r.set_collection("orders");
                      *r.mutable_last_range_at() = Ts(kInt64Max);
                      return t->Next(r);
                    },
                    C::INVALID_ARGUMENT},
        HostileCase{"NextTimestampNanosTooBig",
                    [](T* t) {
                      hilo::v1::NextRangeRequest r;
                      r.set_collection("orders");
                      *r.mutable_last_range_at() = Ts(1, 1'000'000'000);
                      return t->Next(r);
                    },
                    C::INVALID_ARGUMENT},
        // ---- encodings and sizes
        HostileCase{"NextOver64KiB", [](T* t) { return t->Next(kOversized); },
                    C::RESOURCE_EXHAUSTED},
        HostileCase{"NextOver64KiBOfUnknownField",
                    [](T* t) {
                      return t->Raw(kNext, BytesField(1, "orders") +
                                               BytesField(99, kOversized));
                    },
                    C::RESOURCE_EXHAUSTED},
        HostileCase{"NextUnknownFieldsAreIgnored",
                    [](T* t) {
                      return t->Raw(kNext, BytesField(1, "orders") +
                                               VarintField(99, 12345) +
                                               BytesField(100, "junk") +
                                               VarintField(2, 0));
                    },
                    C::OK, Pair(33, 64)},
        HostileCase{"NextTruncatedMessage",
                    [](T* t) {
                      // Says 6 bytes of name follow; 3 do.
                      return t->Raw(kNext,
                                    BytesField(1, "orders").substr(0, 5));
                    },
                    C::UNIMPLEMENTED},
        HostileCase{"NextWrongWireTypeIsAnUnknownField",
                    [](T* t) {
                      // last_size (a varint) sent length-delimited: protobuf
                      // keeps it as an unknown field, so last_size is 0.
                      return t->Raw(
                          kNext, BytesField(1, "orders") + BytesField(2, "xx"));
                    },
                    C::OK, Pair(33, 64)},
        HostileCase{"NextTenByteVarintOfAllOnes",
                    [](T* t) {
                      // last_max = -1 in two's complement.
                      return t->Raw(kNext, BytesField(1, "orders") +
                                               VarintField(4, ~uint64_t{0}));
                    },
                    C::INVALID_ARGUMENT},
        // ---- returns (with the token of 1-32 unless the case is about
        //      the token, so the one fault is the one named)
        HostileCase{"ReturnEmptyName",
                    [](T* t) { return t->Return("", 32, 1, t->token_); },
                    C::INVALID_ARGUMENT},
        HostileCase{
            "ReturnControlCharacterName",
            [](T* t) { return t->Return("orders\r", 32, 1, t->token_); },
            C::INVALID_ARGUMENT},
        HostileCase{
            "ReturnInvalidUtf8Name",
            [](T* t) { return t->Return(Bytes("\xFE", 1), 32, 1, t->token_); },
            C::UNIMPLEMENTED},
        HostileCase{"ReturnLastAboveEnd",
                    [](T* t) { return t->Return("orders", 32, 33, t->token_); },
                    C::INVALID_ARGUMENT},
        HostileCase{"ReturnNegativeLast",
                    [](T* t) { return t->Return("orders", 32, -1, t->token_); },
                    C::INVALID_ARGUMENT},
        HostileCase{
            "ReturnInt64MinEnd",
            [](T* t) { return t->Return("orders", kInt64Min, 0, t->token_); },
            C::INVALID_ARGUMENT},
        HostileCase{"ReturnZeroEnd",
                    [](T* t) { return t->Return("orders", 0, 0, t->token_); },
                    C::INVALID_ARGUMENT},
        HostileCase{"ReturnEndInt64Max",
                    [](T* t) {
                      return t->Return("orders", kInt64Max, kInt64Max - 1,
                                       t->token_);
                    },
                    C::OK, std::nullopt, std::pair(false, int64_t{32})},
        HostileCase{
            "ReturnForeignNodeTag",
            [](T* t) { return t->Return("orders", 32, 1, t->token_, "B"); },
            C::OK, std::nullopt, std::pair(false, int64_t{32})},
        HostileCase{"ReturnGarbageNodeTag",
                    [](T* t) {
                      return t->Return("orders", 32, 1, t->token_, "a\x01!");
                    },
                    C::OK, std::nullopt, std::pair(false, int64_t{32})},
        HostileCase{"ReturnToUnknownCollection",
                    [](T* t) { return t->Return("nobody", 32, 1, t->token_); },
                    C::OK, std::nullopt, std::pair(false, int64_t{0})},
        HostileCase{
            "ReturnAboveAnEdgeRow",
            [](T* t) {
              return t->Return("edge", kInt64Max, kInt64Max - 20, kEdgeToken);
            },
            C::OK, std::nullopt, std::pair(false, kInt64Max - 10), PutEdge},
        HostileCase{
            "ReturnOver64KiB",
            [](T* t) { return t->Return(kOversized, 32, 1, t->token_); },
            C::RESOURCE_EXHAUSTED},
        HostileCase{"ReturnUnknownFieldsAreIgnored",
                    [](T* t) {
                      return t->Raw(
                          kReturn,
                          BytesField(1, "orders") + VarintField(2, 32) +
                              VarintField(3, 5) + Fixed64Field(5, t->token_) +
                              VarintField(77, 1) + BytesField(78, "junk"));
                    },
                    C::OK, std::nullopt, std::pair(true, int64_t{5})},
        HostileCase{"ReturnOfTheWholeRangeApplies",
                    [](T* t) { return t->Return("orders", 32, 0, t->token_); },
                    C::OK, std::nullopt, std::pair(true, int64_t{0})},
        HostileCase{"ReturnStaleEnd",
                    [](T* t) { return t->Return("orders", 31, 1, t->token_); },
                    C::OK, std::nullopt, std::pair(false, int64_t{32})},
        // ---- range tokens
        HostileCase{"ReturnWithoutToken",
                    [](T* t) { return t->Return("orders", 32, 1, 0); },
                    C::FAILED_PRECONDITION},
        HostileCase{"ReturnOfTheWholeRangeWithoutToken",
                    [](T* t) { return t->Return("orders", 32, 0, 0); },
                    C::FAILED_PRECONDITION},
        HostileCase{"ReturnWithoutTokenToUnknownCollection",
                    [](T* t) { return t->Return("nobody", 32, 1, 0); },
                    C::FAILED_PRECONDITION},
        HostileCase{"ReturnWithoutTokenAndForeignNodeTag",
                    [](T* t) { return t->Return("orders", 32, 1, 0, "B"); },
                    C::FAILED_PRECONDITION},
        HostileCase{"ReturnTokenZeroSentExplicitly",
                    [](T* t) {
                      return t->Raw(kReturn, BytesField(1, "orders") +
                                                 VarintField(2, 32) +
                                                 VarintField(3, 1) +
                                                 Fixed64Field(5, 0));
                    },
                    C::FAILED_PRECONDITION},
        HostileCase{"ReturnTokenAsVarintIsAnUnknownField",
                    [](T* t) {
                      // The right token with the wrong wire type: protobuf
                      // keeps it as an unknown field, so there is none.
                      return t->Raw(kReturn, BytesField(1, "orders") +
                                                 VarintField(2, 32) +
                                                 VarintField(3, 1) +
                                                 VarintField(5, t->token_));
                    },
                    C::FAILED_PRECONDITION},
        HostileCase{"ReturnGuessedTokenOne",
                    [](T* t) { return t->Return("orders", 32, 1, 1); }, C::OK,
                    std::nullopt, std::pair(false, int64_t{32})},
        HostileCase{
            "ReturnTokenPlusOne",
            [](T* t) { return t->Return("orders", 32, 1, t->token_ + 1); },
            C::OK, std::nullopt, std::pair(false, int64_t{32})},
        HostileCase{
            "ReturnTokenWithLowBitFlipped",
            [](T* t) { return t->Return("orders", 32, 0, t->token_ ^ 1); },
            C::OK, std::nullopt, std::pair(false, int64_t{32})},
        HostileCase{
            "ReturnTokenAllOnes",
            [](T* t) { return t->Return("orders", 32, 0, ~uint64_t{0}); },
            C::OK, std::nullopt, std::pair(false, int64_t{32})},
        HostileCase{
            "ReturnTokenOfAnotherCollection",
            [](T* t) { return t->Return("orders", 32, 0, t->other_token_); },
            C::OK, std::nullopt, std::pair(false, int64_t{32}), NextOther},
        HostileCase{"ReturnTokenOfARowPutWithoutTheRange",
                    [](T* t) { return t->Return("orders", 32, 0, kEdgeToken); },
                    C::OK, std::nullopt, std::pair(false, int64_t{32}),
                    PutEdge},
        // ---- admin
        HostileCase{"GetCollection257ByteName",
                    [](T* t) { return t->Get(k257); }, C::INVALID_ARGUMENT},
        HostileCase{"GetCollectionUnknown",
                    [](T* t) { return t->Get("nobody"); }, C::NOT_FOUND},
        HostileCase{"ListNegativePageSize", [](T* t) { return t->List(-1); },
                    C::INVALID_ARGUMENT},
        HostileCase{"ListHugePageSize",
                    [](T* t) { return t->List(2'000'000'000); },
                    C::INVALID_ARGUMENT},
        HostileCase{"ListControlCharacterPageToken",
                    [](T* t) { return t->List(10, "\x01"); },
                    C::INVALID_ARGUMENT},
        HostileCase{"SetFloorNegative",
                    [](T* t) { return t->Floor("orders", -1); },
                    C::INVALID_ARGUMENT},
        HostileCase{"SetFloorEmptyName", [](T* t) { return t->Floor("", 5); },
                    C::INVALID_ARGUMENT},
        HostileCase{"SetFloorBelowMaxRaisesOnlyTheReturnFloor",
                    [](T* t) { return t->Floor("orders", 7); }, C::OK,
                    std::nullopt, std::pair(false, int64_t{32}), nullptr,
                    int64_t{7}},
        HostileCase{"SetFloorAtMaxRaisesOnlyTheReturnFloor",
                    [](T* t) { return t->Floor("orders", 32); }, C::OK,
                    std::nullopt, std::pair(false, int64_t{32}), nullptr,
                    int64_t{32}},
        HostileCase{"SetFloorAtTheReturnFloorChangesNothing",
                    [](T* t) { return t->Floor("orders", 0); }, C::OK,
                    std::nullopt, std::pair(false, int64_t{32})},
        HostileCase{"SetFloorInt64Max",
                    [](T* t) { return t->Floor("orders", kInt64Max); },
                    C::INVALID_ARGUMENT},
        HostileCase{"SetFloorJustAboveTheGuardRail",
                    [](T* t) { return t->Floor("orders", kMaxFloor + 1); },
                    C::INVALID_ARGUMENT},
        HostileCase{"SetFloorAboveMaxRaisesIt",
                    [](T* t) { return t->Floor("orders", 1000); }, C::OK,
                    std::nullopt, std::pair(true, int64_t{1000})}),
    [](const ::testing::TestParamInfo<HostileCase>& info) {
      return info.param.name;
    });

// A client may use a range up to INT64_MAX and hand back nothing of it: the
// return applies without moving Max, the row's return floor becomes
// INT64_MAX (not last + 1 wrapped around), and no later return moves Max
// lower.
TEST_F(HostileInputTest, ReturnOfAllOfARangeEndingAtInt64Max) {
  // No request may take Max there (the guard rail); a row may be there.
  ASSERT_THAT(server_->store()->PutForTesting(
                  "edge", CollectionState{.max = kInt64Max - 32,
                                          .return_floor = kInt64Max - 32,
                                          .updated_at = kStart}),
              IsOk());
  const Outcome range = Next("edge");
  EXPECT_EQ(range.range, Pair(kInt64Max - 31, kInt64Max));
  const Outcome returned = Return("edge", kInt64Max, kInt64Max, range.token);
  EXPECT_THAT(returned.status, IsOk());
  EXPECT_EQ(returned.ret, std::pair(true, kInt64Max));
  const std::vector<NamedCollectionState> rows = Rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state.max, kInt64Max);
  EXPECT_EQ(rows[0].state.return_floor, kInt64Max);
  EXPECT_EQ(Return("edge", kInt64Max, kInt64Max - 1, range.token).ret,
            std::pair(false, kInt64Max));
  EXPECT_THAT(Next("edge").status, StatusIs(absl::StatusCode::kOutOfRange));
}

// A floor at INT64_MAX covers every number: a return claiming a range that
// ends there (no client was given one) must not reopen INT64_MAX.
TEST_F(HostileInputTest, ForgedReturnBelowAFloorAtInt64Max) {
  EXPECT_THAT(Floor("edge", kInt64Max).status,
              StatusIs(absl::StatusCode::kInvalidArgument));
  // The row a floor at INT64_MAX made before the guard rail.
  ASSERT_THAT(server_->store()->PutForTesting(
                  "edge", CollectionState{.max = kInt64Max,
                                          .return_floor = kInt64Max,
                                          .updated_at = kStart}),
              IsOk());
  EXPECT_EQ(Return("edge", kInt64Max, kInt64Max - 1, 1).ret,
            std::pair(false, kInt64Max));
  EXPECT_THAT(Return("edge", kInt64Max, kInt64Max - 1, 0).status,
              StatusIs(absl::StatusCode::kFailedPrecondition));
  const std::vector<NamedCollectionState> rows = Rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state.max, kInt64Max);
  EXPECT_THAT(Next("edge").status, StatusIs(absl::StatusCode::kOutOfRange));
}

// ---- Returns that must not apply, step by step. Each call gets its exact
// code and reply, and the row (GetCollection) is checked after each; the
// clock moves a second before each call, so updated_at shows whether the
// call changed the row.

// The bug the floor fix closed: a floor below Max did not raise the return
// floor, so the holder of 33-64 could hand back 41-64 and 41-50, which the
// import behind the floor uses, went out again.
TEST_F(HostileInputTest, FloorBelowMaxRefusesAReturnReachingUnderIt) {
  ASSERT_EQ(Next("orders").range, Pair(1, 32));
  const Outcome held = Next("orders");
  ASSERT_EQ(held.range, Pair(33, 64));

  clock_.Advance(absl::Seconds(1));
  const Outcome floor = Floor("orders", 50);
  EXPECT_THAT(floor.status, IsOk());
  EXPECT_EQ(floor.ret, std::pair(false, int64_t{64}));
  const absl::Time floored = clock_.Now();
  EXPECT_EQ(GetRow("orders"), (Row{64, 50, floored}));
  EXPECT_EQ(StoredToken("orders"), RangeTokenDigest(held.token))
      << "a floor below Max retires "
         "no token";

  clock_.Advance(absl::Seconds(1));
  const Outcome returned = Return("orders", 64, 40, held.token);
  EXPECT_THAT(returned.status, IsOk());
  EXPECT_EQ(returned.ret, std::pair(false, int64_t{64}));
  EXPECT_EQ(GetRow("orders"), (Row{64, 50, floored}));

  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Next("orders").range, Pair(65, 96));
}

// The same floor does not stop the holder handing back what lies above it.
TEST_F(HostileInputTest, FloorBelowMaxStillTakesAReturnAboveIt) {
  ASSERT_EQ(Next("orders").range, Pair(1, 32));
  const Outcome held = Next("orders");
  ASSERT_EQ(held.range, Pair(33, 64));
  clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(Floor("orders", 50).ret, std::pair(false, int64_t{64}));

  clock_.Advance(absl::Seconds(1));
  const Outcome returned = Return("orders", 64, 55, held.token);
  EXPECT_THAT(returned.status, IsOk());
  EXPECT_EQ(returned.ret, std::pair(true, int64_t{55}));
  EXPECT_EQ(GetRow("orders"), (Row{55, 55, clock_.Now()}));
  EXPECT_EQ(StoredToken("orders"), 0u);

  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Next("orders").range, Pair(56, 87));
}

// A floor equal to Max: the old code changed nothing, and a return of the
// whole range then restarted the collection at 1.
TEST_F(HostileInputTest, FloorAtMaxRefusesAReturnBelowIt) {
  const Outcome held = Next("orders");
  ASSERT_EQ(held.range, Pair(1, 32));

  clock_.Advance(absl::Seconds(1));
  const Outcome floor = Floor("orders", 32);
  EXPECT_THAT(floor.status, IsOk());
  EXPECT_EQ(floor.ret, std::pair(false, int64_t{32}));
  const absl::Time floored = clock_.Now();
  EXPECT_EQ(GetRow("orders"), (Row{32, 32, floored}));

  clock_.Advance(absl::Seconds(1));
  const Outcome returned = Return("orders", 32, 0, held.token);
  EXPECT_THAT(returned.status, IsOk());
  EXPECT_EQ(returned.ret, std::pair(false, int64_t{32}));
  EXPECT_EQ(GetRow("orders"), (Row{32, 32, floored}));

  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Next("orders").range, Pair(33, 64));
}

// The same return delivered twice (a retry, a duplicated packet) applies
// once, also when it hands back nothing and so leaves Max where the second
// copy's `end` still matches it.
TEST_F(HostileInputTest, DuplicatedReturnAppliesOnce) {
  for (const int64_t last : {int64_t{10}, int64_t{32}}) {
    SCOPED_TRACE(absl::StrCat("last ", last));
    const std::string name = absl::StrCat("orders-", last);
    const Outcome held = Next(name);
    ASSERT_EQ(held.range, Pair(1, 32));

    clock_.Advance(absl::Seconds(1));
    const Outcome first = Return(name, 32, last, held.token);
    EXPECT_THAT(first.status, IsOk());
    EXPECT_EQ(first.ret, std::pair(true, last));
    const absl::Time returned = clock_.Now();
    EXPECT_EQ(GetRow(name), (Row{last, last, returned}));
    EXPECT_EQ(StoredToken(name), 0u);

    clock_.Advance(absl::Seconds(1));
    const Outcome second = Return(name, 32, last, held.token);
    EXPECT_THAT(second.status, IsOk());
    EXPECT_EQ(second.ret, std::pair(false, last));
    EXPECT_EQ(GetRow(name), (Row{last, last, returned}));

    clock_.Advance(absl::Seconds(1));
    EXPECT_EQ(Next(name).range, Pair(last + 1, last + 32));
  }
}

// A copy of a return that arrives after its numbers went out again (to
// another client, whose range ends at the same Max) is refused: without
// tokens it would apply and let 1-32 out a third time.
TEST_F(HostileInputTest, StaleCopyAfterTheNumbersWereIssuedAgainIsRefused) {
  const Outcome a = Next("orders");
  ASSERT_EQ(a.range, Pair(1, 32));
  clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(Return("orders", 32, 0, a.token).ret, std::pair(true, int64_t{0}));

  clock_.Advance(absl::Seconds(1));
  const Outcome b = Next("orders");
  ASSERT_EQ(b.range, Pair(1, 32));
  const absl::Time reissued = clock_.Now();
  EXPECT_NE(b.token, a.token);

  clock_.Advance(absl::Seconds(1));
  const Outcome stale = Return("orders", 32, 0, a.token);
  EXPECT_THAT(stale.status, IsOk());
  EXPECT_EQ(stale.ret, std::pair(false, int64_t{32}));
  EXPECT_EQ(GetRow("orders"), (Row{32, 0, reissued}));
  EXPECT_EQ(StoredToken("orders"), RangeTokenDigest(b.token));

  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Next("orders").range, Pair(33, 64));
}

// Client B does not hold 1-32 and guesses A's token, one bit at a time:
// never applied, nothing changes, and A can still hand its tail back.
TEST_F(HostileInputTest, GuessingATokenBitByBitNeverApplies) {
  const Outcome a = Next("orders");
  ASSERT_EQ(a.range, Pair(1, 32));
  const std::optional<Row> before = GetRow("orders");
  ASSERT_EQ(before, (Row{32, 0, kStart}));

  int guesses = 0;
  for (int bit = 0; bit < 64; ++bit) {
    const uint64_t guess = uint64_t{1} << bit;
    for (const uint64_t token : {guess, ~guess, a.token ^ guess}) {
      clock_.Advance(absl::Seconds(1));
      const Outcome stolen = Return("orders", 32, 0, token);
      SCOPED_TRACE(absl::StrCat("token ", token));
      ASSERT_THAT(stolen.status, IsOk());
      ASSERT_EQ(stolen.ret, std::pair(false, int64_t{32}));
      ++guesses;
    }
  }
  EXPECT_EQ(guesses, 3 * 64);
  EXPECT_EQ(GetRow("orders"), before);
  EXPECT_EQ(StoredToken("orders"), RangeTokenDigest(a.token));

  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Return("orders", 32, 5, a.token).ret, std::pair(true, int64_t{5}));
  EXPECT_EQ(GetRow("orders"), (Row{5, 5, clock_.Now()}));
}

// A client that fetched ahead returns its later range whole, then the tail
// of the earlier one: Max ends at the last number it used; copies of either
// return are refused after it applied.
TEST_F(HostileInputTest, AdjacentRangesComeBackWholeThenTheTail) {
  const Outcome current = Next("orders");
  ASSERT_EQ(current.range, Pair(1, 32));
  const Outcome ahead = Next("orders");
  ASSERT_EQ(ahead.range, Pair(33, 64));

  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Return("orders", 64, 32, ahead.token).ret,
            std::pair(true, int64_t{32}));
  const absl::Time whole = clock_.Now();
  EXPECT_EQ(GetRow("orders"), (Row{32, 0, whole}));
  EXPECT_EQ(StoredToken("orders"), RangeTokenDigest(current.token));

  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Return("orders", 64, 32, ahead.token).ret,
            std::pair(false, int64_t{32}));
  EXPECT_EQ(Return("orders", 32, 32, ahead.token).ret,
            std::pair(false, int64_t{32}));
  EXPECT_EQ(GetRow("orders"), (Row{32, 0, whole}));

  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Return("orders", 32, 7, current.token).ret,
            std::pair(true, int64_t{7}));
  const absl::Time tail = clock_.Now();
  EXPECT_EQ(GetRow("orders"), (Row{7, 7, tail}));

  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Return("orders", 32, 7, current.token).ret,
            std::pair(false, int64_t{7}));
  EXPECT_EQ(Return("orders", 7, 7, current.token).ret,
            std::pair(false, int64_t{7}));
  EXPECT_EQ(GetRow("orders"), (Row{7, 7, tail}));
  EXPECT_EQ(Next("orders").range, Pair(8, 39));
}

// A floor below Max also binds the earlier range a whole return brings
// back: its tail comes back only down to the floor.
TEST_F(HostileInputTest, FloorAlsoBindsTheRangeAWholeReturnBringsBack) {
  const Outcome current = Next("orders");
  ASSERT_EQ(current.range, Pair(1, 32));
  const Outcome ahead = Next("orders");
  ASSERT_EQ(ahead.range, Pair(33, 64));
  clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(Floor("orders", 10).ret, std::pair(false, int64_t{64}));
  const std::optional<Row> floored = GetRow("orders");
  ASSERT_TRUE(floored.has_value());
  EXPECT_EQ(floored->max, 64);
  EXPECT_EQ(floored->return_floor, 32);

  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Return("orders", 64, 32, ahead.token).ret,
            std::pair(true, int64_t{32}));
  const absl::Time whole = clock_.Now();
  EXPECT_EQ(GetRow("orders"), (Row{32, 10, whole}));

  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Return("orders", 32, 5, current.token).ret,
            std::pair(false, int64_t{32}));
  EXPECT_EQ(GetRow("orders"), (Row{32, 10, whole}));
  EXPECT_EQ(Return("orders", 32, 12, current.token).ret,
            std::pair(true, int64_t{12}));
  EXPECT_EQ(GetRow("orders"), (Row{12, 12, clock_.Now()}));
  EXPECT_EQ(Next("orders").range, Pair(13, 44));
}

// With --allow_returns_without_token a return without one is judged by the
// old rule (Max and the return floor alone) and retires the token.
class HostileInputLegacyReturnsTest : public HostileInputTest {
  bool AllowReturnsWithoutToken() const override { return true; }
};

TEST_F(HostileInputLegacyReturnsTest, ReturnWithoutTokenTakesTheOldRule) {
  const Outcome held = Next("orders");
  ASSERT_EQ(held.range, Pair(1, 32));
  clock_.Advance(absl::Seconds(1));
  const Outcome returned = Return("orders", 32, 5, 0);
  EXPECT_THAT(returned.status, IsOk());
  EXPECT_EQ(returned.ret, std::pair(true, int64_t{5}));
  EXPECT_EQ(GetRow("orders"), (Row{5, 5, clock_.Now()}));
  EXPECT_EQ(StoredToken("orders"), 0u);
  EXPECT_EQ(Return("orders", 32, 5, held.token).ret,
            std::pair(false, int64_t{5}));
  EXPECT_EQ(Next("orders").range, Pair(6, 37));
}

// Names are bound as parameters, never spliced into SQL.
TEST_F(HostileInputTest, SqlInANameIsJustAName) {
  const std::string name = "orders'); DROP TABLE collections; --";
  EXPECT_EQ(Next(name).range, Pair(1, 32));
  EXPECT_EQ(Next("orders").range, Pair(1, 32));
  EXPECT_EQ(Next(name).range, Pair(33, 64));
  EXPECT_THAT(Get(name).status, IsOk());
  EXPECT_EQ(Rows().size(), 2u);
}

// The value of every sample of `metric` in a Prometheus text scrape, by its
// label set.
std::map<std::string, double> Samples(const std::string& scrape,
                                      const std::string& metric) {
  std::map<std::string, double> samples;
  for (absl::string_view line : absl::StrSplit(scrape, '\n')) {
    if (!absl::StartsWith(line, metric + "{")) continue;
    const size_t close = line.rfind('}');
    if (close == absl::string_view::npos) continue;
    double value = 0;
    if (!absl::SimpleAtod(line.substr(close + 1), &value)) continue;
    samples[std::string(
        line.substr(metric.size(), close - metric.size() + 1))] = value;
  }
  return samples;
}

class HostileInputMetricsTest : public HostileInputTest {
  bool ServeMetrics() const override { return true; }
};

TEST_F(HostileInputMetricsTest,
       FloodOfDistinctNamesIsServedWithBoundedMetrics) {
  constexpr int kNames = 5000;
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kNames; i += kThreads) {
        // Names a label printer must escape, too.
        const Outcome out = Next(absl::StrCat("flood \"", i, "\"\\{}"));
        if (!out.status.ok() || out.range != Pair(1, 32)) ++failures[t];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << t;
  EXPECT_EQ(Rows().size(), static_cast<size_t>(kNames));
  EXPECT_EQ(server_->store()->collection_count(), kNames);

  absl::StatusOr<std::string> scrape =
      testing_util::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_THAT(scrape, IsOk());
  const std::map<std::string, double> reserved =
      Samples(*scrape, "hilo_ids_reserved_total");
  // Every name is new, counted from its first number: all under _other,
  // so that no series shows a collection's Max (MetricsTest.
  // IdsReservedNeverShowsACollectionsMax).
  EXPECT_EQ(reserved.size(), 1u);
  ASSERT_EQ(reserved.count("{collection=\"_other\"}"), 1u);
  EXPECT_EQ(reserved.at("{collection=\"_other\"}"), 32.0 * kNames);
  EXPECT_THAT(*scrape, HasSubstr(absl::StrCat("hilo_collections ", kNames)));
}

}  // namespace
}  // namespace hilo
