// ReplyCoalescer (service/rpc/reply_coalescer.h), on real loopback TCP
// connections: inside a CompletionBatch a known caller's socket is corked
// from its first reply and uncorked at the batch's end (and what was
// queued arrives); a reply outside a batch, an unknown caller's, and
// another peer's socket stay as they were; sockets are found by a scan of
// the process's descriptors at the end of a batch that missed one, at most
// one per interval and share of the time, only among those a listener of
// the process accepted, and checked before each use; gRPC's forms of a
// peer address read alike, and the peer a real gRPC server gives a call
// leads to that call's socket.
#include "service/rpc/reply_coalescer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"
#include "hilo/v1/hilo.grpc.pb.h"
#include "service/store/completion_batch.h"

namespace hilo {
namespace {

// A loopback TCP connection: the server's end (what a reply is written to)
// and the client's, whose address is the server end's peer.
class Connection {
 public:
  Connection() {
    const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), size), 0);
    EXPECT_EQ(listen(listener, 1), 0);
    EXPECT_EQ(
        getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size), 0);
    client_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(connect(client_, reinterpret_cast<sockaddr*>(&address), size), 0);
    server_ = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    EXPECT_GE(server_, 0);
    listener_ = listener;  // open: the server's end is an accepted socket
    listener_peer_ = absl::StrCat("ipv4:127.0.0.1:", ntohs(address.sin_port));
    sockaddr_in mine{};
    size = sizeof mine;
    EXPECT_EQ(getsockname(client_, reinterpret_cast<sockaddr*>(&mine), &size),
              0);
    peer_ = absl::StrCat("ipv4:127.0.0.1:", ntohs(mine.sin_port));
  }
  ~Connection() {
    CloseServerEnd();
    close(client_);
    close(listener_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int server() const { return server_; }
  // The server end's peer, as gRPC names it: the client's address.
  const std::string& peer() const { return peer_; }
  // The client end's peer: the listener's address.
  const std::string& listener_peer() const { return listener_peer_; }
  int client() const { return client_; }
  void CloseServerEnd() {
    if (server_ >= 0) close(server_);
    server_ = -1;
  }
  // Whether TCP_CORK is set on the server's end.
  bool corked() const { return Corked(server_); }
  static bool Corked(int fd) {
    int on = -1;
    socklen_t size = sizeof on;
    EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, &size), 0);
    return on != 0;
  }
  // What the client can read within `patience` (at most 64 bytes).
  std::string Read(absl::Duration patience) {
    pollfd p{client_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(patience))) !=
        1) {
      return std::string();
    }
    char buffer[64];
    const ssize_t n = recv(client_, buffer, sizeof buffer, MSG_DONTWAIT);
    return n > 0 ? std::string(buffer, n) : std::string();
  }

 private:
  int listener_ = -1;
  int client_ = -1;
  int server_ = -1;
  std::string peer_;
  std::string listener_peer_;
};

// A clock that moves `step` forward at each reading, so a scan (two
// readings) seems to take `step`.
class SteppingClock final : public Clock {
 public:
  absl::Time Now() const override {
    const absl::Time now = now_;
    now_ += step_;
    return now;
  }
  void Set(absl::Time t) { now_ = t; }
  void set_step(absl::Duration step) { step_ = step; }

 private:
  mutable absl::Time now_ = absl::UnixEpoch() + absl::Hours(1);
  absl::Duration step_ = absl::ZeroDuration();
};

constexpr absl::Duration kPatience = absl::Seconds(10);

// A batch with one reply to `peer`: if the coalescer does not know the
// peer's socket yet, its end scans for it.
void OneReplyInABatch(ReplyCoalescer& replies, const std::string& peer) {
  CompletionBatch batch;
  replies.BeforeReply(peer);
}

TEST(ReplyCoalescerTest, AKnownCallersRepliesInABatchLeaveTogetherAtItsEnd) {
  SteppingClock clock;
  ReplyCoalescer replies({}, &clock);
  Connection connection;
  OneReplyInABatch(replies, connection.peer());
  ASSERT_EQ(replies.counts().scans, 1);
  {
    CompletionBatch batch;
    replies.BeforeReply(connection.peer());
    EXPECT_TRUE(connection.corked());
    ASSERT_EQ(send(connection.server(), "a", 1, 0), 1);
    replies.BeforeReply(connection.peer());
    EXPECT_TRUE(connection.corked());
    ASSERT_EQ(send(connection.server(), "b", 1, 0), 1);
    replies.BeforeReply(connection.peer());
    ASSERT_EQ(send(connection.server(), "c", 1, 0), 1);
  }
  EXPECT_FALSE(connection.corked());
  std::string got;
  while (got.size() < 3) {
    const std::string more = connection.Read(kPatience);
    ASSERT_FALSE(more.empty()) << "got only \"" << got << "\"";
    got += more;
  }
  EXPECT_EQ(got, "abc");
  EXPECT_EQ(replies.counts().corked, 1);  // once per socket and batch
  EXPECT_EQ(replies.counts().scans, 1);
  EXPECT_EQ(replies.counts().not_found, 1);
}

TEST(ReplyCoalescerTest, OutsideABatchNothingIsCorkedOrScanned) {
  SteppingClock clock;
  ReplyCoalescer replies({}, &clock);
  Connection connection;
  OneReplyInABatch(replies, connection.peer());
  for (int i = 0; i < 3; ++i) replies.BeforeReply(connection.peer());
  EXPECT_FALSE(connection.corked());
  EXPECT_EQ(replies.counts().scans, 1);
  EXPECT_EQ(replies.counts().corked, 0);
}

TEST(ReplyCoalescerTest, AnUnknownCallerIsNotHeldAndTheBatchsEndFindsIt) {
  SteppingClock clock;
  ReplyCoalescer replies({}, &clock);
  Connection known;
  OneReplyInABatch(replies, known.peer());
  Connection unknown;  // connected after the scan that found `known`
  clock.Set(clock.Now() + absl::Milliseconds(100));  // a scan is due
  {
    CompletionBatch batch;
    replies.BeforeReply(known.peer());
    replies.BeforeReply(unknown.peer());
    replies.BeforeReply(unknown.peer());
    EXPECT_TRUE(known.corked());
    EXPECT_FALSE(unknown.corked());
    EXPECT_EQ(replies.counts().scans, 1);  // none while replies are held
  }
  EXPECT_FALSE(known.corked());
  EXPECT_EQ(replies.counts().scans, 2);
  EXPECT_EQ(replies.counts().not_found, 2);  // each miss once per batch
  {
    CompletionBatch batch;
    replies.BeforeReply(unknown.peer());
    EXPECT_TRUE(unknown.corked());
  }
  EXPECT_EQ(replies.counts().corked, 2);
  EXPECT_EQ(replies.counts().scans, 2);
}

TEST(ReplyCoalescerTest, ANewConnectionIsFoundByTheNextScanItsIntervalAllows) {
  SteppingClock clock;
  const absl::Time start = clock.Now();
  ReplyCoalescer replies({.min_scan_interval = absl::Milliseconds(100)},
                         &clock);
  Connection first;
  OneReplyInABatch(replies, first.peer());  // scans at start
  Connection second;                        // connected after that scan
  auto second_corked_at = [&](absl::Duration at) {
    clock.Set(start + at);
    CompletionBatch batch;
    replies.BeforeReply(second.peer());
    return second.corked();
  };
  EXPECT_FALSE(second_corked_at(absl::Milliseconds(99)));
  EXPECT_EQ(replies.counts().scans, 1);  // too soon for another
  EXPECT_FALSE(second_corked_at(absl::Milliseconds(100)));
  EXPECT_EQ(replies.counts().scans, 2);  // this batch's end found it
  EXPECT_TRUE(second_corked_at(absl::Milliseconds(101)));
  EXPECT_EQ(replies.counts().scans, 2);
}

TEST(ReplyCoalescerTest, ScansTakeAtMostTheirShareOfTheTime) {
  SteppingClock clock;
  const absl::Time start = clock.Now();
  ReplyCoalescer replies(
      {.min_scan_interval = absl::Milliseconds(100), .max_scan_share = 0.01},
      &clock);
  Connection first;
  clock.set_step(absl::Milliseconds(10));  // the scan seems to take 10 ms
  OneReplyInABatch(replies, first.peer());
  clock.set_step(absl::ZeroDuration());
  // The batch's end read the clock at start, the scan ran from start +
  // 10 ms to start + 20 ms: the next may begin 99 x 10 ms after it ended,
  // not 100 ms after.
  Connection second;
  auto scans_at = [&](absl::Duration at) {
    clock.Set(start + at);
    OneReplyInABatch(replies, second.peer());
    return replies.counts().scans;
  };
  EXPECT_EQ(scans_at(absl::Milliseconds(1000)), 1);
  EXPECT_EQ(scans_at(absl::Milliseconds(1010)), 2);
}

TEST(ReplyCoalescerTest, ADescriptorNowAnotherPeersIsNotCorked) {
  SteppingClock clock;
  ReplyCoalescer replies({}, &clock);
  auto gone = std::make_unique<Connection>();
  const std::string gone_peer = gone->peer();
  const int descriptor = gone->server();
  OneReplyInABatch(replies, gone_peer);
  {
    CompletionBatch batch;
    replies.BeforeReply(gone_peer);
    ASSERT_TRUE(gone->corked());
  }
  gone->CloseServerEnd();
  // The descriptor number now names another connection's socket, as when
  // the kernel hands a closed one's number to the next accept.
  Connection reuser;
  ASSERT_EQ(dup2(reuser.server(), descriptor), descriptor);
  {
    CompletionBatch batch;
    replies.BeforeReply(gone_peer);
    EXPECT_FALSE(reuser.corked());
  }
  close(descriptor);
  EXPECT_EQ(replies.counts().corked, 1);
  EXPECT_EQ(replies.counts().not_found, 2);
}

TEST(ReplyCoalescerTest, OnlyASocketAListenerOfTheProcessAcceptedIsCorked) {
  SteppingClock clock;
  ReplyCoalescer replies({}, &clock);
  Connection connection;
  // The client end is this process's too, as a connection to PostgreSQL
  // would be; its peer is the listener's address. A caller at that
  // address (another host's, in life) must not cork it.
  OneReplyInABatch(replies, connection.listener_peer());
  {
    CompletionBatch batch;
    replies.BeforeReply(connection.listener_peer());
    EXPECT_FALSE(Connection::Corked(connection.client()));
  }
  EXPECT_EQ(replies.counts().corked, 0);
  EXPECT_EQ(replies.counts().not_found, 2);
}

// A HiLo service whose NextRange, inside a batch of its own, tells `replies`
// of a reply to its caller, and answers the corks and misses so far.
class CorkingService final : public hilo::v1::HiLo::CallbackService {
 public:
  explicit CorkingService(ReplyCoalescer* replies) : replies_(replies) {}
  grpc::ServerUnaryReactor* NextRange(
      grpc::CallbackServerContext* context, const hilo::v1::NextRangeRequest*,
      hilo::v1::NextRangeResponse* response) override {
    {
      CompletionBatch batch;
      replies_->BeforeReply(context->peer());
    }
    response->set_low(replies_->counts().corked);
    response->set_high(replies_->counts().not_found);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  ReplyCoalescer* const replies_;
};

// Corks made and sockets not found after two NextRange calls on one
// connection to a server on `host` (port 0), or nullopt when the host
// cannot be bound here.
std::optional<std::pair<int64_t, int64_t>> CorksOfTwoCallsOn(
    const std::string& host) {
  SteppingClock clock;
  ReplyCoalescer replies({}, &clock);
  CorkingService service(&replies);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat(host, ":0"),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return std::nullopt;
  auto stub = hilo::v1::HiLo::NewStub(grpc::CreateChannel(
      absl::StrCat(host, ":", port), grpc::InsecureChannelCredentials()));
  hilo::v1::NextRangeResponse response;
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kPatience));
    const grpc::Status status =
        stub->NextRange(&context, hilo::v1::NextRangeRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  server->Shutdown();
  return std::make_pair(response.low(), response.high());
}

TEST(ReplyCoalescerTest, TheCallersPeerAsGrpcGivesItLeadsToItsSocket) {
  // The first call's end finds the socket, the second's reply corks it.
  EXPECT_EQ(CorksOfTwoCallsOn("127.0.0.1"),
            std::make_pair(int64_t{1}, int64_t{1}));
  // IPv6 where the machine has it; gRPC may write the address escaped.
  std::optional<std::pair<int64_t, int64_t>> v6 = CorksOfTwoCallsOn("[::1]");
  if (!v6.has_value()) GTEST_SKIP() << "no IPv6 loopback here";
  EXPECT_EQ(*v6, std::make_pair(int64_t{1}, int64_t{1}));
}

TEST(ReplyCoalescerTest, PeerAddressesReadAlikeInEachOfGrpcsForms) {
  const std::string v4 = ReplyCoalescer::PeerKeyOf("ipv4:127.0.0.1:5000");
  ASSERT_FALSE(v4.empty());
  EXPECT_EQ(ReplyCoalescer::PeerKeyOf("ipv6:[::ffff:127.0.0.1]:5000"), v4);
  EXPECT_NE(ReplyCoalescer::PeerKeyOf("ipv4:127.0.0.1:5001"), v4);
  EXPECT_NE(ReplyCoalescer::PeerKeyOf("ipv4:127.0.0.2:5000"), v4);
  const std::string v6 = ReplyCoalescer::PeerKeyOf("ipv6:[::1]:5000");
  ASSERT_FALSE(v6.empty());
  EXPECT_NE(v6, v4);
  EXPECT_EQ(ReplyCoalescer::PeerKeyOf("ipv6:%5B::1%5D:5000"), v6);
  EXPECT_EQ(ReplyCoalescer::PeerKeyOf("ipv6:%5B%3A%3A1%5D:5000"), v6);
  EXPECT_EQ(ReplyCoalescer::PeerKeyOf("ipv6:[fe80::1%25eth0]:80"),
            ReplyCoalescer::PeerKeyOf("ipv6:[fe80::1]:80"));
  EXPECT_FALSE(ReplyCoalescer::PeerKeyOf("ipv6:[fe80::1]:80").empty());
  for (const char* not_tcp :
       {"", "unix:/run/hilo.sock", "unix-abstract:hilo", "ipv4:127.0.0.1",
        "ipv4:127.0.0.1:", "ipv4:127.0.0.1:65536", "ipv4:127.0.0.1:-1",
        "ipv4:127.0.0.1:80x", "ipv4:1.2.3:80", "ipv4:[127.0.0.1]:80",
        "ipv6:::1:80", "ipv6:[::1:80", "ipv6:[nothost]:80", "127.0.0.1:80"}) {
    EXPECT_EQ(ReplyCoalescer::PeerKeyOf(not_tcp), "") << not_tcp;
  }
}

}  // namespace
}  // namespace hilo
