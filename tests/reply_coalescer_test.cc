// ReplyCoalescer (service/rpc/reply_coalescer.h), on real loopback TCP
// connections: inside a CompletionBatch a known caller's socket is corked
// from its second reply, or from its first unless its last few batches
// gave it one reply each, and uncorked at the batch's end (and what was
// queued arrives); a caller with one reply a batch is never corked; a reply
// outside a batch, an unknown caller's, and
// another peer's socket stay as they were; sockets are found by a scan on
// the coalescer's own thread, asked for by the end of a batch that missed
// one, at most one per interval and share of the time, only among those a
// listener of the process accepted, and checked before use; store threads
// running batches at once, and the scans beside them, keep to their own
// sockets; gRPC's forms of a peer address read alike. A real gRPC server's
// peers: reply_coalescer_grpc_test.cc.
#include "service/rpc/reply_coalescer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "hilo/base/clock.h"
#include "hilo/base/monotonic_clock.h"
#include "hilo/base/mutex.h"
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
    // Bound first: a port no other socket here has, so no two connections
    // of a test share a client address (connect alone may reuse one).
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(client_, reinterpret_cast<sockaddr*>(&any), sizeof any), 0);
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
  // Forgets the server end without closing it (its number was taken over).
  void ForgetServerEnd() { server_ = -1; }
  // Whether TCP_CORK is set on the server's end.
  bool corked() const { return Corked(server_); }
  static bool Corked(int fd) {
    int on = -1;
    socklen_t size = sizeof on;
    EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, &size), 0);
    return on != 0;
  }
  // What the client can read within `patience` (at most 64 bytes).
  std::string Read(absl::Duration patience) const {
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
// readings) seems to take `step`. The scanner thread reads it too.
class SteppingClock final : public Clock {
 public:
  absl::Time Now() const override {
    base::MutexLock lock(&mu_);
    const absl::Time now = now_;
    now_ += step_;
    return now;
  }
  void Set(absl::Time t) {
    base::MutexLock lock(&mu_);
    now_ = t;
  }
  void set_step(absl::Duration step) {
    base::MutexLock lock(&mu_);
    step_ = step;
  }

 private:
  mutable base::Mutex mu_;
  mutable absl::Time now_ ABSL_GUARDED_BY(mu_) =
      absl::UnixEpoch() + absl::Hours(1);
  absl::Duration step_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
};

constexpr absl::Duration kPatience = absl::Seconds(10);

// A batch with one reply to `peer`: if the coalescer does not know the
// peer's socket yet, its end asks for a scan, which this waits for.
void OneReplyInABatch(ReplyCoalescer& replies, const std::string& peer) {
  {
    CompletionBatch batch;
    replies.BeforeReply(peer);
  }
  EXPECT_TRUE(replies.WaitForScansForTesting(kPatience));
}

TEST(ReplyCoalescerTest, ACallersSecondReplyInABatchHoldsItUntilItsEnd) {
  SteppingClock clock;
  ReplyCoalescer replies({}, &clock);
  Connection connection;
  OneReplyInABatch(replies, connection.peer());
  ASSERT_EQ(replies.counts().scans, 1);
  {
    CompletionBatch batch;
    replies.BeforeReply(connection.peer());
    EXPECT_FALSE(connection.corked());  // new to it: as if lone
    ASSERT_EQ(send(connection.server(), "a", 1, 0), 1);
    replies.BeforeReply(connection.peer());
    EXPECT_TRUE(connection.corked());
    ASSERT_EQ(send(connection.server(), "b", 1, 0), 1);
    replies.BeforeReply(connection.peer());
    EXPECT_TRUE(connection.corked());
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

TEST(ReplyCoalescerTest, ACallerIsHeldFromItsFirstTillItsLastBatchesGaveOne) {
  SteppingClock clock;
  ReplyCoalescer replies({.lone_batches = 2}, &clock);
  Connection connection;
  OneReplyInABatch(replies, connection.peer());
  // Batches of 2, 1, 1, 1, 3 and 2 replies; whether the first reply of
  // each held the socket (a later one always does). A new caller counts as
  // one whose last 2 batches gave it one reply.
  struct Step {
    int replies;
    bool held_at_first;
  };
  const Step steps[] = {{2, false}, {1, true},  {1, true},
                        {1, false}, {3, false}, {2, true}};
  int64_t corks = 0;
  for (const Step& step : steps) {
    CompletionBatch batch;
    replies.BeforeReply(connection.peer());
    EXPECT_EQ(connection.corked(), step.held_at_first) << step.replies;
    for (int i = 1; i < step.replies; ++i) {
      replies.BeforeReply(connection.peer());
      EXPECT_TRUE(connection.corked()) << step.replies;
    }
    if (step.held_at_first || step.replies >= 2) ++corks;
  }
  EXPECT_FALSE(connection.corked());
  EXPECT_EQ(replies.counts().corked, corks);
  EXPECT_EQ(corks, 5);
}

TEST(ReplyCoalescerTest,
     ByDefaultACallerIsHeldFromItsFirstForEightLoneBatches) {
  SteppingClock clock;
  ReplyCoalescer replies({}, &clock);
  Connection connection;
  OneReplyInABatch(replies, connection.peer());
  {
    CompletionBatch batch;  // two replies
    replies.BeforeReply(connection.peer());
    replies.BeforeReply(connection.peer());
  }
  for (int i = 0; i < 9; ++i) {
    CompletionBatch batch;  // one reply
    replies.BeforeReply(connection.peer());
    EXPECT_EQ(connection.corked(), i < 8) << i;
  }
  EXPECT_EQ(replies.counts().corked, 9);
}

TEST(ReplyCoalescerTest, ACallerWithOneReplyEachBatchIsNeverHeld) {
  SteppingClock clock;
  ReplyCoalescer replies({}, &clock);
  Connection connection;
  Connection other;  // a caller of the same batches with two replies each
  OneReplyInABatch(replies, connection.peer());
  for (int i = 0; i < 10; ++i) {
    CompletionBatch batch;
    replies.BeforeReply(other.peer());
    replies.BeforeReply(connection.peer());
    replies.BeforeReply(other.peer());
    EXPECT_FALSE(connection.corked()) << i;
    EXPECT_TRUE(other.corked()) << i;
  }
  EXPECT_EQ(replies.counts().corked, 10);  // `other`'s, once a batch
  EXPECT_EQ(replies.counts().scans, 1);
}

TEST(ReplyCoalescerTest, AScanKeepsWhatBatchesTaughtOfASocketItFindsAgain) {
  SteppingClock clock;
  ReplyCoalescer replies({}, &clock);
  Connection connection;
  OneReplyInABatch(replies, connection.peer());
  {
    CompletionBatch batch;  // two replies: held from the first next time
    replies.BeforeReply(connection.peer());
    replies.BeforeReply(connection.peer());
  }
  clock.Set(clock.Now() + absl::Milliseconds(100));  // a scan is due
  OneReplyInABatch(replies, "ipv4:127.0.0.1:1");     // no socket has it
  ASSERT_EQ(replies.counts().scans, 2);
  {
    CompletionBatch batch;
    replies.BeforeReply(connection.peer());
    EXPECT_TRUE(connection.corked());
  }
  EXPECT_EQ(replies.counts().corked, 2);
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
    replies.BeforeReply(known.peer());
    replies.BeforeReply(unknown.peer());
    EXPECT_TRUE(known.corked());
    EXPECT_FALSE(unknown.corked());
    EXPECT_EQ(replies.counts().scans, 1);  // none while replies are held
  }
  EXPECT_FALSE(known.corked());
  ASSERT_TRUE(replies.WaitForScansForTesting(kPatience));
  EXPECT_EQ(replies.counts().scans, 2);
  EXPECT_EQ(replies.counts().not_found, 2);  // each miss once per batch
  {
    CompletionBatch batch;
    replies.BeforeReply(unknown.peer());
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
    bool corked = false;
    {
      CompletionBatch batch;
      replies.BeforeReply(second.peer());
      replies.BeforeReply(second.peer());
      corked = second.corked();
    }
    EXPECT_TRUE(replies.WaitForScansForTesting(kPatience));
    return corked;
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
    replies.BeforeReply(gone_peer);
    ASSERT_TRUE(gone->corked());
  }
  // The descriptor number now names another connection's socket, as when
  // the kernel hands a closed one's number to the next accept (dup2 closes
  // `gone`'s end and puts `reuser`'s under its number).
  Connection reuser;
  ASSERT_EQ(dup2(reuser.server(), descriptor), descriptor);
  gone->ForgetServerEnd();
  {
    CompletionBatch batch;
    replies.BeforeReply(gone_peer);  // had several: checked at once
    EXPECT_FALSE(reuser.corked());
    replies.BeforeReply(gone_peer);
    EXPECT_FALSE(reuser.corked());
  }
  close(descriptor);
  EXPECT_EQ(replies.counts().corked, 1);
  EXPECT_EQ(replies.counts().not_found, 2);
}

TEST(ReplyCoalescerTest, ADescriptorNowAnotherPeersIsNotCorkedAtASecondReply) {
  SteppingClock clock;
  ReplyCoalescer replies({}, &clock);
  auto gone = std::make_unique<Connection>();
  const std::string gone_peer = gone->peer();
  const int descriptor = gone->server();
  OneReplyInABatch(replies, gone_peer);  // known, and lone
  Connection reuser;
  ASSERT_EQ(dup2(reuser.server(), descriptor), descriptor);
  gone->ForgetServerEnd();
  {
    CompletionBatch batch;
    replies.BeforeReply(gone_peer);
    replies.BeforeReply(gone_peer);  // checked here, and found another's
    EXPECT_FALSE(reuser.corked());
  }
  close(descriptor);
  EXPECT_EQ(replies.counts().corked, 0);
  EXPECT_EQ(replies.counts().not_found, 2);
}

TEST(ReplyCoalescerTest, AScanForgetsTheSocketsClosedSinceTheOneBefore) {
  SteppingClock clock;
  ReplyCoalescer replies({}, &clock);
  Connection staying;
  auto leaving = std::make_unique<Connection>();
  OneReplyInABatch(replies, staying.peer());
  EXPECT_EQ(replies.counts().known, 2);
  leaving.reset();
  clock.Set(clock.Now() + absl::Milliseconds(100));  // a scan is due
  OneReplyInABatch(replies, "ipv4:127.0.0.1:1");     // no socket has it
  EXPECT_EQ(replies.counts().scans, 2);
  EXPECT_EQ(replies.counts().known, 1);
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
    replies.BeforeReply(connection.listener_peer());
    EXPECT_FALSE(Connection::Corked(connection.client()));
  }
  EXPECT_EQ(replies.counts().corked, 0);
  EXPECT_EQ(replies.counts().not_found, 2);
}

TEST(ReplyCoalescerTest, StoreThreadsAndScansAtOnceKeepToTheirOwnSockets) {
  // Scans as often as asked, on the real clock: each batch below also
  // replies to a caller no socket has, so scans run beside the batches.
  ReplyCoalescer replies(
      {.min_scan_interval = absl::ZeroDuration(), .max_scan_share = 1.0},
      MonotonicClock::Get());
  constexpr int kThreads = 2;
  constexpr int kBatches = 200;
  Connection connections[kThreads];
  for (const Connection& connection : connections) {
    OneReplyInABatch(replies, connection.peer());
    CompletionBatch batch;  // two replies: the next batch holds from one
    replies.BeforeReply(connection.peer());
    replies.BeforeReply(connection.peer());
  }
  const std::string nobody = "ipv4:127.0.0.1:1";
  const int64_t corked_before = replies.counts().corked;
  std::vector<std::thread> threads;
  int held[kThreads] = {};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Connection& mine = connections[t];
      for (int i = 0; i < kBatches; ++i) {
        CompletionBatch batch;
        replies.BeforeReply(mine.peer());
        replies.BeforeReply(nobody);
        if (mine.corked()) ++held[t];
        EXPECT_EQ(send(mine.server(), "x", 1, 0), 1);
        replies.BeforeReply(mine.peer());
        EXPECT_EQ(send(mine.server(), "y", 1, 0), 1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_TRUE(replies.WaitForScansForTesting(kPatience));
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(held[t], kBatches) << "thread " << t;
    EXPECT_FALSE(connections[t].corked()) << "thread " << t;
    std::string got;
    while (got.size() < 2 * kBatches) {
      const std::string more = connections[t].Read(kPatience);
      ASSERT_FALSE(more.empty()) << "thread " << t << " got " << got.size();
      got += more;
    }
    std::string sent;
    for (int i = 0; i < kBatches; ++i) sent += "xy";
    EXPECT_EQ(got, sent) << "thread " << t;
  }
  EXPECT_EQ(replies.counts().corked - corked_before, kThreads * kBatches);
  EXPECT_GE(replies.counts().scans, 2);  // the first, and one beside
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
