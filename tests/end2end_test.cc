// Real clients against real in-process servers on 127.0.0.1:0: uniqueness
// under concurrency, failover between nodes, restarts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "hilo/client.h"
#include "hilo/v1/conversions.h"
#include "service/rpc/hilo_service.h"
#include "service/store/sqlite/sqlite_range_store.h"
#include "testing/recording_observer.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace hilo {
namespace {

using ::hilo::testing_util::IsOk;
using ::hilo::testing_util::RecordingObserver;
using ::hilo::testing_util::StatusIs;
using ::hilo::testing_util::TempDir;

std::unique_ptr<Client> NewClient(std::vector<int> ports,
                                  absl::Duration deadline = absl::Seconds(5)) {
  ClientOptions options;
  for (int port : ports) options.targets.push_back(testing_util::Address(port));
  options.rpc_deadline = deadline;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  EXPECT_THAT(client, IsOk());
  return client.ok() ? *std::move(client) : nullptr;
}

// Finds the issued range holding `number`, or null.
const Range* RangeOf(const std::vector<Range>& sorted, int64_t number) {
  auto it =
      std::upper_bound(sorted.begin(), sorted.end(), number,
                       [](int64_t n, const Range& r) { return n < r.low; });
  if (it == sorted.begin()) return nullptr;
  --it;
  return number <= it->high ? &*it : nullptr;
}

std::vector<Range> SortedDisjoint(std::vector<Range> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.low < b.low; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    EXPECT_GT(ranges[i].low, ranges[i - 1].high) << "issued ranges overlap";
  }
  return ranges;
}

TEST(EndToEndTest, ManyThreadsAndClientsNeverRepeatAndUseExactlyTheRanges) {
  constexpr int kThreads = 8;
  constexpr int kClients = 4;
  constexpr int kPerCollection = 20'000;
  const std::vector<std::string> collections = {"orders", "users"};

  TempDir dir;
  RecordingObserver observer;
  ServerOptions options = testing_util::TestServerOptions(dir, "A");
  options.observer = &observer;
  std::unique_ptr<Server> server = testing_util::StartServer(options);
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<Client>> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.push_back(NewClient({server->port()}));
    ASSERT_NE(clients.back(), nullptr);
  }

  // numbers[collection index][thread] = what that thread got.
  std::vector<std::vector<std::vector<int64_t>>> numbers(
      collections.size(),
      std::vector<std::vector<int64_t>>(kThreads * kClients));
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, c, t] {
        const int slot = c * kThreads + t;
        for (size_t k = 0; k < collections.size(); ++k) {
          numbers[k][slot].reserve(kPerCollection);
        }
        for (int i = 0; i < kPerCollection; ++i) {
          for (size_t k = 0; k < collections.size(); ++k) {
            absl::StatusOr<Id> id = clients[c]->NextId(collections[k]);
            if (!id.ok() || id->node_tag != "A") {
              ++errors;
              continue;
            }
            numbers[k][slot].push_back(id->number);
          }
        }
      });
    }
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(errors.load(), 0);
  // Every range a number came from was recorded before its reply left.
  // (A prefetch may still be in flight; it is not needed here.)
  const auto issued = observer.issued();
  // Let prefetches land and unused tails go back (which may lower Max).
  clients.clear();
  for (size_t k = 0; k < collections.size(); ++k) {
    SCOPED_TRACE(collections[k]);
    ASSERT_EQ(issued.count(collections[k]), 1u);
    const std::vector<Range> ranges = SortedDisjoint(issued.at(collections[k]));
    std::vector<int64_t> all;
    for (const auto& per_thread : numbers[k]) {
      all.insert(all.end(), per_thread.begin(), per_thread.end());
    }
    ASSERT_EQ(all.size(), size_t{kThreads} * kClients * kPerCollection);
    std::sort(all.begin(), all.end());
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end())
        << "a number was handed out twice";
    // Each number lies in an issued range, and within each range the numbers
    // handed out are a prefix [low, k]; only the last range of each client
    // and the one it prefetched can be partly used (or unused).
    std::map<const Range*, int64_t> used;
    for (int64_t n : all) {
      const Range* r = RangeOf(ranges, n);
      ASSERT_NE(r, nullptr) << n << " is outside every issued range";
      ++used[r];
    }
    int partly_used = 0;
    for (const Range& r : ranges) {
      const int64_t count = used.count(&r) ? used[&r] : 0;
      const auto first = std::lower_bound(all.begin(), all.end(), r.low);
      if (count > 0) {
        EXPECT_EQ(*first, r.low);
        EXPECT_EQ(*(first + count - 1), r.low + count - 1);
      }
      if (count < r.size()) ++partly_used;
    }
    EXPECT_LE(partly_used, 2 * kClients);
    // Returns may have moved Max back, but never below a number in use.
    EXPECT_GE(server->store()->Get(collections[k]).value()->max, all.back());
  }
}

TEST(EndToEndTest, FailoverMidStreamKeepsEveryIdUniqueAndTaggedByItsRange) {
  TempDir dir;
  RecordingObserver observer_a, observer_b;
  ServerOptions options_a = testing_util::TestServerOptions(dir, "A");
  options_a.observer = &observer_a;
  ServerOptions options_b = testing_util::TestServerOptions(dir, "B");
  options_b.observer = &observer_b;
  // Small ranges, so the client keeps asking and meets the failover.
  options_a.range_sizes = options_b.range_sizes = {32, 64};
  std::unique_ptr<Server> a = testing_util::StartServer(options_a);
  std::unique_ptr<Server> b = testing_util::StartServer(options_b);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  std::unique_ptr<Client> client =
      NewClient({a->port(), b->port()}, absl::Seconds(2));
  ASSERT_NE(client, nullptr);

  constexpr int kThreads = 4;
  constexpr int kPerThread = 5'000;
  std::atomic<int> drawn{0};
  std::atomic<bool> a_down{false};
  std::vector<std::vector<Id>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (ids[t].size() < kPerThread) {
        // Past three quarters, only once A is down: the client draws
        // 64-number ranges at about 10 ns an ID, and on a busy machine the
        // thread that stops A was once scheduled only after all 20,000
        // were out of A's ranges, so B was never asked.
        if (ids[t].size() == kPerThread * 3 / 4) {
          const absl::Time deadline = absl::Now() + absl::Seconds(60);
          while (!a_down.load() && absl::Now() < deadline) {
            std::this_thread::yield();
          }
          ASSERT_TRUE(a_down.load()) << "A was not stopped within 60 s";
        }
        const bool started_after_shutdown = a_down.load();
        absl::StatusOr<Id> id = client->NextId("orders");
        if (!id.ok()) {
          // Only calls caught in A's shutdown may fail, as cancelled or
          // unavailable; once A is gone every call goes to B.
          ASSERT_FALSE(started_after_shutdown) << id.status();
          ASSERT_THAT(
              id, ::testing::AnyOf(StatusIs(absl::StatusCode::kCancelled),
                                   StatusIs(absl::StatusCode::kUnavailable)));
          continue;
        }
        ids[t].push_back(*id);
        ++drawn;
      }
    });
  }
  // Stop node A once half the IDs are out.
  while (drawn.load() < kThreads * kPerThread / 2) std::this_thread::yield();
  a->Shutdown(absl::ZeroDuration());
  a_down = true;
  for (std::thread& t : threads) t.join();

  const std::vector<Range> from_a =
      SortedDisjoint(observer_a.issued()["orders"]);
  const std::vector<Range> from_b =
      SortedDisjoint(observer_b.issued()["orders"]);
  ASSERT_FALSE(from_a.empty());
  ASSERT_FALSE(from_b.empty()) << "the client never failed over to B";
  std::set<std::pair<int64_t, std::string>> unique;
  int tagged_a = 0, tagged_b = 0;
  for (const auto& per_thread : ids) {
    for (const Id& id : per_thread) {
      EXPECT_TRUE(unique.emplace(id.number, id.node_tag).second)
          << id.number << "-" << id.node_tag << " repeated";
      if (id.node_tag == "A") {
        ++tagged_a;
        EXPECT_NE(RangeOf(from_a, id.number), nullptr)
            << id.number << "-A is not from a range A issued";
      } else {
        ASSERT_EQ(id.node_tag, "B");
        ++tagged_b;
        EXPECT_NE(RangeOf(from_b, id.number), nullptr)
            << id.number << "-B is not from a range B issued";
      }
    }
  }
  EXPECT_EQ(unique.size(), size_t{kThreads} * kPerThread);
  EXPECT_GT(tagged_a, 0);
  EXPECT_GT(tagged_b, 0);
}

TEST(EndToEndTest, UnusedTailReturnedByOneClientIsUsedByTheNext) {
  TempDir dir;
  std::unique_ptr<Server> server =
      testing_util::StartServer(testing_util::TestServerOptions(dir));
  ASSERT_NE(server, nullptr);
  {
    std::unique_ptr<Client> first = NewClient({server->port()});
    EXPECT_EQ(*first->NextDocumentId("orders"), "orders/1-A");
  }  // the destructor hands 2-32 back
  std::unique_ptr<Client> second = NewClient({server->port()});
  EXPECT_EQ(*second->NextDocumentId("orders"), "orders/2-A");
}

// Closing a client hands many collections back at once; each collection's
// returns (the range fetched ahead whole, then the tail) must still apply in
// order, so the next client continues right after the last number used in
// every one of them.
TEST(EndToEndTest, ClosingManyCollectionsHandsEveryTailBack) {
  constexpr int kCollections = 2000;
  TempDir dir;
  ServerOptions options = testing_util::TestServerOptions(dir);
  options.sync = SyncMode::kNormal;  // a test survives no power loss
  // 2,000 new collections in a second, above the default creation rate.
  options.max_collection_creations_per_minute = 0;
  std::unique_ptr<Server> server = testing_util::StartServer(options);
  ASSERT_NE(server, nullptr);
  auto name = [](int i) { return absl::StrCat("c", i); };
  // 1 to 50 IDs each: the first range holds 32 (so some collections are on
  // their second range), and prefetch (at a fifth) fetches the next range
  // ahead in most of them.
  auto draws = [](int i) { return 1 + i % 50; };
  std::vector<int64_t> last(kCollections);
  auto* store = dynamic_cast<SqliteRangeStore*>(server->store());
  ASSERT_NE(store, nullptr);
  int64_t commits_before = 0;
  {
    std::unique_ptr<Client> first = NewClient({server->port()});
    ASSERT_NE(first, nullptr);
    for (int i = 0; i < kCollections; ++i) {
      for (int d = 0; d < draws(i); ++d) {
        absl::StatusOr<Id> id = first->NextId(name(i));
        ASSERT_THAT(id, IsOk());
        last[i] = id->number;
      }
    }
    commits_before = store->commits();
  }  // the destructor hands everything unused back
  // In ReturnRanges batches of up to 1000 items, each one commit: about 2
  // rounds of 2 batches (single returns took over 50 commits).
  EXPECT_LE(store->commits() - commits_before, 10);
  std::unique_ptr<Client> second = NewClient({server->port()});
  ASSERT_NE(second, nullptr);
  int wrong = 0;
  for (int i = 0; i < kCollections; ++i) {
    absl::StatusOr<Id> id = second->NextId(name(i));
    ASSERT_THAT(id, IsOk());
    EXPECT_EQ(last[i], draws(i));  // one client: numbers from 1 in order
    if (id->number != last[i] + 1 && ++wrong <= 10) {
      ADD_FAILURE() << name(i) << ": last used " << last[i]
                    << ", next client starts at " << id->number;
    }
  }
  EXPECT_EQ(wrong, 0);
}

// A server older than ReturnRanges: the real service and store, serving
// NextRange and ReturnRange only (ReturnRanges is UNIMPLEMENTED).
class OldServer final : public hilo::v1::HiLo::Service {
 public:
  explicit OldServer(const TempDir& dir) {
    store_ = testing_util::OpenTestStore(dir, "old.db");
    service_ = std::make_unique<HiLoService>(store_.get(), RangeSizePolicy({}),
                                             "A", &clock_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~OldServer() override { server_->Shutdown(); }

  int port() const { return port_; }
  int returns() const { return returns_.load(); }

  grpc::Status NextRange(grpc::ServerContext*,
                         const hilo::v1::NextRangeRequest* request,
                         hilo::v1::NextRangeResponse* response) override {
    return ToGrpcStatus(service_->DoNextRange(*request, response));
  }
  grpc::Status ReturnRange(grpc::ServerContext*,
                           const hilo::v1::ReturnRangeRequest* request,
                           hilo::v1::ReturnRangeResponse* response) override {
    ++returns_;
    return ToGrpcStatus(service_->DoReturnRange(*request, response));
  }

 private:
  SystemClock clock_;
  std::unique_ptr<SqliteRangeStore> store_;
  std::unique_ptr<HiLoService> service_;
  std::atomic<int> returns_{0};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST(EndToEndTest, ClosingAgainstAServerWithoutReturnRangesSendsSingleReturns) {
  constexpr int kCollections = 50;
  TempDir dir;
  OldServer server(dir);
  ASSERT_NE(server.port(), 0);
  auto name = [](int i) { return absl::StrCat("c", i); };
  {
    std::unique_ptr<Client> first = NewClient({server.port()});
    ASSERT_NE(first, nullptr);
    for (int i = 0; i < kCollections; ++i) {
      for (int d = 0; d <= i % 3; ++d)
        ASSERT_THAT(first->NextId(name(i)), IsOk());
    }
  }
  EXPECT_GE(server.returns(), kCollections);
  std::unique_ptr<Client> second = NewClient({server.port()});
  ASSERT_NE(second, nullptr);
  for (int i = 0; i < kCollections; ++i) {
    absl::StatusOr<Id> id = second->NextId(name(i));
    ASSERT_THAT(id, IsOk());
    EXPECT_EQ(id->number, 2 + i % 3) << name(i);
  }
}

TEST(EndToEndTest, RestartedServerContinuesAboveEveryIssuedRange) {
  TempDir dir;
  ServerOptions options = testing_util::TestServerOptions(dir);
  std::set<int64_t> seen;
  for (int incarnation = 0; incarnation < 3; ++incarnation) {
    std::unique_ptr<Server> server = testing_util::StartServer(options);
    ASSERT_NE(server, nullptr);
    std::unique_ptr<Client> client = NewClient({server->port()});
    for (int i = 0; i < 100; ++i) {
      absl::StatusOr<Id> id = client->NextId("orders");
      ASSERT_THAT(id, IsOk());
      EXPECT_TRUE(seen.insert(id->number).second) << id->number;
    }
    // The server goes away while the client still holds its range, as if
    // it had crashed: the next incarnation must not reissue that range.
    server.reset();
    client.reset();  // its return fails quietly: the server is gone
  }
  EXPECT_EQ(seen.size(), 300u);
}

// A port of 127.0.0.1 held by a bound socket that does not listen, so
// connections to it are refused and no other process takes it.
class ReservedPort {
 public:
  ReservedPort() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), len), 0);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~ReservedPort() { Release(); }
  int port() const { return port_; }
  void Release() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(EndToEndTest, AllServersDownIsUnavailableNamingTargetsThenRecovers) {
  TempDir dir;
  ReservedPort reserved;
  const int port = reserved.port();
  std::unique_ptr<Client> client = NewClient({port}, absl::Seconds(2));
  absl::StatusOr<Id> id = client->NextId("orders");
  EXPECT_THAT(id, StatusIs(absl::StatusCode::kUnavailable,
                           ::testing::HasSubstr(testing_util::Address(port))));

  ServerOptions options = testing_util::TestServerOptions(dir);
  options.listen = testing_util::Address(port);
  reserved.Release();
  std::unique_ptr<Server> server = testing_util::StartServer(options);
  ASSERT_NE(server, nullptr);
  // The channel reconnects by itself (backoff at most 1 s); calls fail fast
  // with UNAVAILABLE until then.
  absl::StatusOr<Id> again;
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (absl::Now() < give_up) {
    again = client->NextId("orders");
    if (again.ok()) break;
    ASSERT_THAT(again, StatusIs(absl::StatusCode::kUnavailable));
  }
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->number, 1);
}

// A client that opened an HTTP/2 connection and never reads (nor closes)
// does not hold a stopping server to the end of its grace once no call is
// left: gRPC waits for every client to close after its GOAWAY, and hilo's
// own C++ and Python clients take about 5 s to (idle_connection_closer.h).
TEST(EndToEndTest, ShutdownDoesNotWaitTheGraceForAConnectionWithoutCalls) {
  TempDir dir;
  std::unique_ptr<Server> server =
      testing_util::StartServer(testing_util::TestServerOptions(dir));
  ASSERT_NE(server, nullptr);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(server->port()));
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  // The client preface and an empty SETTINGS frame: a connection gRPC
  // counts as a client's, which then reads nothing more.
  const std::string preface = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") +
                              std::string("\0\0\0\x04\0\0\0\0\0", 9);
  ASSERT_EQ(write(fd, preface.data(), preface.size()),
            static_cast<ssize_t>(preface.size()));
  // A call first, so the connection is known to be served.
  std::unique_ptr<Client> client =
      NewClient({server->port()}, absl::Seconds(5));
  ASSERT_THAT(client->NextId("orders"), IsOk());
  client.reset();

  constexpr absl::Duration kGrace = absl::Seconds(30);
  const absl::Time began = absl::Now();
  server->Shutdown(kGrace);
  const absl::Duration took = absl::Now() - began;
  close(fd);
  // Without the closer it returns at the end of the grace, 30 s.
  EXPECT_LT(took, kGrace / 2) << took;
}

}  // namespace
}  // namespace hilo
